//go:build !slim

package cli

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// newBenchSocketCmd measures what the socket hop adds to a submission: the
// same held submissions through the server's local agent's Unix socket
// (the agent reads the caller's UID, asserts the user and forwards with
// its node credential) and straight to the server with a token over HTTP,
// in alternating rounds on one server so that both see the same store.
func newBenchSocketCmd() *cobra.Command {
	var runs, rounds int
	var clients string
	cmd := &cobra.Command{
		Use:   "socket",
		Short: "The added cost per submission of the local socket hop (no token) against a token over HTTP",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			sock := client.NewUnix(filepath.Join(b.home, "sock"))
			task := benchTask("true")
			via := map[string]*client.Client{"token": b.c, "socket": sock}
			for _, cs := range strings.Split(clients, ",") {
				nc, err := strconv.Atoi(strings.TrimSpace(cs))
				if err != nil || nc < 1 {
					return fmt.Errorf("--clients %q: want a list of positive integers", clients)
				}
				lat := map[string][]time.Duration{}
				wall := map[string]time.Duration{}
				for _, name := range []string{"token", "socket"} { // warm both paths
					if _, _, err := submitHeld(ctx, via[name], nc*10, nc, task); err != nil {
						return fmt.Errorf("bench socket: warming %s: %w", name, err)
					}
				}
				for r := range rounds {
					order := []string{"token", "socket"}
					if r%2 == 1 {
						order = []string{"socket", "token"}
					}
					for _, name := range order {
						l, w, err := submitHeld(ctx, via[name], runs/rounds, nc, task)
						if err != nil {
							return fmt.Errorf("bench socket: %s: %w", name, err)
						}
						lat[name] = append(lat[name], l...)
						wall[name] += w
					}
				}
				for _, name := range []string{"token", "socket"} {
					n := len(lat[name])
					fmt.Fprintf(out, "submit via %-6s %d runs, %d client(s): %.0f runs/s; latency p50 %s, p99 %s\n", name, n, nc,
						float64(n)/wall[name].Seconds(), ms(percentile(lat[name], 0.5)), ms(percentile(lat[name], 0.99)))
				}
				fmt.Fprintf(out, "socket hop adds: p50 %s per submission (%+.0f%%)\n",
					ms(percentile(lat["socket"], 0.5)-percentile(lat["token"], 0.5)),
					100*(float64(percentile(lat["socket"], 0.5))/float64(percentile(lat["token"], 0.5))-1))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 4000, "held runs to submit per path and measurement")
	cmd.Flags().IntVar(&rounds, "rounds", 4, "alternating rounds the runs are split in")
	cmd.Flags().StringVar(&clients, "clients", "1,8", "concurrent clients, a comma-separated list of measurements")
	return cmd
}

// submitHeld submits n held runs of t with the given concurrency: the
// request's latencies and the wall time. Held runs never start.
func submitHeld(ctx context.Context, c *client.Client, n, clients int, task *spec.Task) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < n; i += clients {
				t0 := time.Now()
				if _, err := c.Submit(ctx, api.SubmitRequest{Spec: task, Hold: true}); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return lat, time.Since(start), firstErr
}
