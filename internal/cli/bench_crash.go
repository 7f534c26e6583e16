//go:build !slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

func newBenchCrashCmd() *cobra.Command {
	var clients, runs, kills, replicas int
	var db string
	cmd := &cobra.Command{
		Use:   "crash",
		Short: "Kill the server with SIGKILL while clients submit: nothing acknowledged lost, nothing twice",
		Long: `Starts a server with its local agent on a fixed port, and --clients clients that submit --runs
runs between them, each printing two lines. Each submission carries an Idempotency-Key and is
retried with it, on any error, until it is answered. Meanwhile the server is killed with SIGKILL
--kills times at random moments and started again at once (its jobs go on under their
supervisors). Then it waits for every run to end and checks that every acknowledged run is
there exactly once, done, with both its lines once each. Prints the acknowledged, lost and
duplicated runs, and the time from each kill to the server answering again (min, median, max).

With --replicas N and --db postgres://… (an empty database), N replicas run on that database
(berth server --replica) with one agent given all their URLs, and each kill is the leader's:
the time printed is then the failover, from the kill to the API answering through a follower
that took over (the killed replica is started again, as a follower).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			var c *client.Client
			var kill func(context.Context) (time.Duration, error)
			what := "the server"
			if replicas > 0 {
				rs, err := startBenchReplicas(ctx, replicas, db)
				if err != nil {
					return err
				}
				defer rs.stop()
				c, kill = rs.c, rs.killLeader
				what = fmt.Sprintf("the leader of %d replicas", replicas)
			} else {
				// A fixed address: the clients reach the server again
				// after each restart.
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				addr := l.Addr().String()
				l.Close()
				cs, err := startBench(ctx, benchOpts{localAgent: true, listen: addr, db: db})
				if err != nil {
					return err
				}
				defer cs.stop()
				c, kill = cs.c, cs.kill9AndRestart
			}
			var mu sync.Mutex
			acked := map[int]int64{} // run number -> ID
			var wg sync.WaitGroup
			var firstErr error
			start := time.Now()
			for k := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := k; i < runs; i += clients {
						id, err := submitUntilAnswered(ctx, c, crashTask(i), fmt.Sprintf("crash-%d-%d", os.Getpid(), i))
						mu.Lock()
						if err != nil && firstErr == nil {
							firstErr = err
						}
						if err == nil {
							acked[i] = id
						}
						mu.Unlock()
						if err != nil {
							return
						}
					}
				}()
			}
			// The kills, at random moments while the submissions go on.
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			var outages []time.Duration
			for k := range kills {
				select {
				case <-done:
				case <-time.After(time.Duration(100+rand.IntN(400)) * time.Millisecond):
				}
				d, err := kill(ctx)
				if err != nil {
					return fmt.Errorf("restart %d: %w", k+1, err)
				}
				outages = append(outages, d)
			}
			<-done
			if firstErr != nil {
				return firstErr
			}
			if replicas > 0 {
				// Said now: the wait for every run below may be long.
				slices.Sort(outages)
				fmt.Fprintf(out, "crash: %d kills of the leader of %d replicas; failover (kill to the API answering again): min %s, median %s, max %s\n",
					len(outages), replicas, ms(percentile(outages, 0)), ms(percentile(outages, 0.5)), ms(percentile(outages, 1)))
			}
			submitted := time.Since(start)
			// Every acknowledged run ends.
			deadline := time.Now().Add(10 * time.Minute)
			var list []api.Run
			var err error
			for {
				list, err = c.Runs(ctx, client.ListOptions{All: true})
				if err == nil && allFinished(list) && len(list) >= len(acked) {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return fmt.Errorf("runs still active after 10 minutes (%v)", err)
				}
				time.Sleep(500 * time.Millisecond)
			}
			byName := map[string][]api.Run{}
			for _, r := range list {
				byName[r.Name] = append(byName[r.Name], r)
			}
			lost, dup, bad := 0, 0, 0
			for i, id := range acked {
				rs := byName[crashName(i)]
				switch {
				case len(rs) == 0:
					lost++
					continue
				case len(rs) > 1:
					dup++
				}
				if rs[0].ID != id || rs[0].Status != api.StatusDone || !crashLogOK(ctx, c, id, i) {
					bad++
				}
			}
			slices.Sort(outages)
			answering := "server answering again after a kill"
			if replicas > 0 {
				answering = "failover (kill to the API answering again)"
			}
			fmt.Fprintf(out, "crash: %d runs acknowledged from %d clients in %.1f s through %d kills of %s; lost %d, duplicated %d, not done with their whole log %d; %s: min %s, median %s, max %s\n",
				len(acked), clients, submitted.Seconds(), len(outages), what, lost, dup, bad, answering, ms(percentile(outages, 0)), ms(percentile(outages, 0.5)), ms(percentile(outages, 1)))
			if lost+dup+bad > 0 {
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&clients, "clients", 16, "clients submitting at once")
	f.IntVar(&runs, "runs", 2000, "runs to submit")
	f.IntVar(&kills, "kills", 5, "times the server is killed with SIGKILL")
	f.IntVar(&replicas, "replicas", 0, "run this many replicas (berth server --replica) on --db and kill the leader each time (0: one server)")
	f.StringVar(&db, "db", "", "the server's database (default a SQLite file in the benchmark's home); --replicas needs an empty PostgreSQL database, postgres://…")
	return cmd
}

func crashName(i int) string { return "crash-" + strconv.Itoa(i) }

func crashTask(i int) *spec.Task {
	t := benchTask(fmt.Sprintf("echo run %d first", i), fmt.Sprintf("echo run %d second", i))
	t.Name = crashName(i)
	return t
}

// crashLogOK tells whether run id printed both of its lines, once each.
func crashLogOK(ctx context.Context, c *client.Client, id int64, i int) bool {
	var b strings.Builder
	if _, err := c.Logs(ctx, strconv.FormatInt(id, 10), client.LogOptions{Job: -1}, func(e api.LogEntry) { b.Write(e.Data) }); err != nil {
		return false
	}
	return b.String() == fmt.Sprintf("run %d first\nrun %d second\n", i, i)
}

func allFinished(rs []api.Run) bool {
	for _, r := range rs {
		if !r.Status.Finished() {
			return false
		}
	}
	return true
}

// submitUntilAnswered submits t with key until the server answers, for
// up to two minutes: a connection refused or cut (the server killed) and
// a 503 are tried again, with the same key.
func submitUntilAnswered(ctx context.Context, c *client.Client, t *spec.Task, key string) (int64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := c.SubmitKey(ctx, api.SubmitRequest{Spec: t}, key)
		if err == nil {
			return r.ID, nil
		}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status != http.StatusServiceUnavailable || time.Now().After(deadline) || ctx.Err() != nil {
			return 0, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
