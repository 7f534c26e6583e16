//go:build !slim

package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/sched/synth"
	"github.com/berth-hq/berth/internal/spec"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Berth on this machine against a real server and agent",
		Long: `Each benchmark starts its own berth server (and agent) as separate processes, with state in a
fresh temporary $BERTH_HOME and SQLite, drives it over HTTP on loopback, prints what it measured,
and removes everything it made.`,
	}
	cmd.AddCommand(newBenchSubmitCmd(), newBenchLatencyCmd(), newBenchDrainCmd(), newBenchSchedCmd(), newBenchChainCmd(), newBenchArrayCmd(), newBenchAgentCmd(), newBenchStepsCmd(), newBenchMemoryCmd(), newBenchHistoryCmd(), newBenchLargestCmd(), newBenchCrashCmd(), newBenchAgentsCmd(), newBenchSocketCmd(), newBenchSqueueCmd(), newBenchCLICmd(), newBenchRepoCmd())
	cmd.PersistentFlags().BoolVar(&benchNoCgroups, "no-cgroups", false, "run the benchmark's jobs without cgroups (to measure what they cost)")
	cmd.PersistentFlags().StringVar(&benchPolicy, "policy", "", "the benchmark's server's scheduling policy (default: the server's, berth)")
	return cmd
}

// benchNoCgroups passes --no-cgroups to the benchmark's agents.
var benchNoCgroups bool

// benchPolicy, when set, is the benchmark's server's --policy.
var benchPolicy string

// benchServer is a berth server started for a benchmark.
type benchServer struct {
	home string
	exe  string
	args []string
	url  string
	tok  string
	cmd  *exec.Cmd
	kids []*exec.Cmd
	c    *client.Client
}

func startBenchServer(ctx context.Context, localAgent bool) (*benchServer, error) {
	return startBench(ctx, benchOpts{localAgent: localAgent})
}

// benchOpts are how a benchmark's server is started.
type benchOpts struct {
	localAgent bool
	// seed, when given, runs on the fresh $BERTH_HOME before the server
	// starts (to fill its store).
	seed func(home string) error
	// listen is the server's address (default a free port, chosen by the
	// server); a fixed one lets the server be started again at the same
	// URL (kill9AndRestart).
	listen string
	// db is the server's --db (default its home's SQLite file).
	db string
}

// startBench starts a server as o says, in a fresh $BERTH_HOME, and waits
// until it answers (and its local agent is connected).
func startBench(ctx context.Context, o benchOpts) (*benchServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		return nil, err
	}
	b := &benchServer{home: home, exe: exe}
	if o.seed != nil {
		if err := o.seed(home); err != nil {
			_ = os.RemoveAll(home)
			return nil, err
		}
	}
	b.args = []string{"server", "--listen", cmp.Or(o.listen, "127.0.0.1:0"), "--socket", filepath.Join(home, "sock")}
	if !o.localAgent {
		b.args = append(b.args, "--no-local-agent")
	}
	if benchNoCgroups {
		b.args = append(b.args, "--no-cgroups")
	}
	if benchPolicy != "" {
		b.args = append(b.args, "--policy", benchPolicy)
	}
	if o.db != "" {
		b.args = append(b.args, "--db", o.db)
	}
	if err := b.launch(ctx); err != nil {
		b.stop()
		return nil, err
	}
	b.c = client.New(b.url, b.tok)
	if o.localAgent {
		if err := b.waitNodes(ctx, 1); err != nil {
			b.stop()
			return nil, err
		}
	}
	return b, nil
}

// launch starts the server process (again, after a kill) and waits until
// it answers; its output goes on at the end of server.log.
func (b *benchServer) launch(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(b.home, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	b.cmd = exec.Command(b.exe, b.args...)
	b.cmd.Env = append(os.Environ(), "BERTH_HOME="+b.home)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	if err := b.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		conf, err := readClientConfig(filepath.Join(b.home, "config.yml"))
		if err == nil && conf.URL != "" {
			resp, herr := http.Get(conf.URL + "/healthz")
			if herr == nil {
				resp.Body.Close()
				b.url, b.tok = conf.URL, conf.Token
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("bench: the server did not start; see " + filepath.Join(b.home, "server.log"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill9AndRestart kills the server with SIGKILL and starts it again (at
// the same address only with benchOpts.listen): the time from the kill to
// its answering again.
func (b *benchServer) kill9AndRestart(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	_ = b.cmd.Wait()
	if err := b.launch(ctx); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (b *benchServer) waitNodes(ctx context.Context, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		nodes, err := b.c.Nodes(ctx)
		online := 0
		for _, x := range nodes {
			if x.Status != "offline" {
				online++
			}
		}
		if err == nil && online >= n {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("bench: no agent joined")
}

// startAgent starts a separate `berth agent` process for the server, with
// extra arguments.
func (b *benchServer) startAgent(name string, extra ...string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(b.home, name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"agent", "--server", b.url, "--name", name, "--data-dir", filepath.Join(b.home, name)}
	if benchNoCgroups {
		args = append(args, "--no-cgroups")
	}
	args = append(args, extra...)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "BERTH_HOME="+b.home, "BERTH_TOKEN="+b.tok)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	b.kids = append(b.kids, cmd)
	return nil
}

func (b *benchServer) stop() {
	for _, k := range append(b.kids, b.cmd) {
		if k.Process != nil {
			_ = k.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = k.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = k.Process.Kill()
				<-done
			}
		}
	}
	_ = os.RemoveAll(b.home)
}

func benchTask(commands ...string) *spec.Task {
	t := &spec.Task{Type: "task", Commands: commands}
	t.Normalize()
	return t
}

// submitAll submits n runs from `clients` goroutines and returns each
// request's latency and the wall time.
func submitAll(ctx context.Context, c *client.Client, n, clients int, t *spec.Task) ([]time.Duration, time.Duration, error) {
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
				if _, err := c.Submit(ctx, api.SubmitRequest{Spec: t}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
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

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func newBenchSubmitCmd() *cobra.Command {
	var runs int
	var clients string
	cmd := &cobra.Command{
		Use:   "submit",
		Short: "Submissions per second through the API into SQLite (no agent: runs stay queued)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			for _, cs := range strings.Split(clients, ",") {
				nc, err := strconv.Atoi(strings.TrimSpace(cs))
				if err != nil || nc < 1 {
					return fmt.Errorf("--clients %q: want a list of positive integers", clients)
				}
				b, err := startBenchServer(ctx, false)
				if err != nil {
					return err
				}
				// Warm the connections and the server before measuring.
				if _, _, err := submitAll(ctx, b.c, nc*20, nc, benchTask("true")); err != nil {
					b.stop()
					return err
				}
				before, err := b.c.Status(ctx)
				if err != nil {
					b.stop()
					return err
				}
				lat, wall, err := submitAll(ctx, b.c, runs, nc, benchTask("true"))
				if err != nil {
					b.stop()
					return err
				}
				after, err := b.c.Status(ctx)
				b.stop()
				if err != nil {
					return err
				}
				commits := max(after.Commits-before.Commits, 1)
				fmt.Fprintf(out, "submit: %d runs, %d client(s): %.0f runs/s; request latency p50 %s, p99 %s; %.1f changes per transaction\n",
					runs, nc, float64(runs)/wall.Seconds(), ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)),
					float64(after.Batches-before.Batches)/float64(commits))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 20000, "runs to submit per measurement")
	cmd.Flags().StringVar(&clients, "clients", "1,8", "concurrent clients, a comma-separated list of measurements")
	return cmd
}

func newBenchLatencyCmd() *cobra.Command {
	var runs int
	cmd := &cobra.Command{
		Use:   "latency",
		Short: "Submit-to-start latency on an idle local agent (one run at a time)",
		Long: `Submits trivial runs one at a time to a server with its local agent and waits for each to end.
Two figures per run: "recorded", the job's start as the agent reports it (its supervisor process is
running) minus the submission's arrival; and "observed", the moment the job's own first command ran
(it prints its clock) minus the same arrival.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			var recorded, observed []time.Duration
			t := benchTask("date +%s%N")
			for i := range runs + 5 {
				run, err := b.c.Submit(ctx, api.SubmitRequest{Spec: t})
				if err != nil {
					return err
				}
				var printed strings.Builder
				end, err := b.c.Logs(ctx, fmt.Sprint(run.ID), client.LogOptions{Follow: true, Job: -1}, func(e api.LogEntry) { printed.Write(e.Data) })
				if err != nil {
					return err
				}
				if end.Status != api.StatusDone || end.StartedAt == nil {
					return fmt.Errorf("bench: run %d ended %s (%s)", run.ID, end.Status, end.Reason)
				}
				if i < 5 {
					continue // warm-up
				}
				recorded = append(recorded, end.StartedAt.Sub(end.SubmittedAt))
				ns, err := strconv.ParseInt(strings.TrimSpace(printed.String()), 10, 64)
				if err != nil {
					return fmt.Errorf("bench: run %d printed %q", run.ID, printed.String())
				}
				observed = append(observed, time.Unix(0, ns).Sub(end.SubmittedAt))
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "latency: %d runs; submit->start recorded p50 %s, p99 %s; observed by the job p50 %s, p99 %s\n", runs,
				ms(percentile(recorded, 0.5)), ms(percentile(recorded, 0.99)), ms(percentile(observed, 0.5)), ms(percentile(observed, 0.99)))
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 200, "runs to measure")
	return cmd
}

func newBenchDrainCmd() *cobra.Command {
	var runs int
	var slurmMode string
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Time to drain queued trivial runs (`true`) on one node",
		Long: `Queues the runs on a server with no agent, then starts one agent (a separate process) and times
from its start to the end of the last run (the server's record of it). --slurm queues what
sbatch --wrap true -o /dev/null submits instead (the batch script the node runs as slurmd does);
--slurm=wrapper what sbatch submitted before Slurm was applied at placement (a bash wrapper).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := startBenchServer(ctx, false)
			if err != nil {
				return err
			}
			defer b.stop()
			task, err := drainTask(slurmMode) // bench_drain_slurm.go
			if err != nil {
				return err
			}
			if _, _, err := submitAll(ctx, b.c, runs, 8, task); err != nil {
				return err
			}
			before, err := b.c.Status(ctx)
			if err != nil {
				return err
			}
			server0 := treeCPU(b.cmd.Process.Pid)
			t0 := time.Now()
			if err := b.startAgent("drain-node"); err != nil {
				return err
			}
			all, err := b.waitIdle(ctx, t0)
			if err != nil {
				return err
			}
			// The CPU the drain took, whatever else the machine runs: the
			// server's, and the agent's with its shims and jobs.
			serverCPU := treeCPU(b.cmd.Process.Pid) - server0
			agentCPU := treeCPU(b.kids[len(b.kids)-1].Process.Pid)
			after, err := b.c.Status(ctx)
			if err != nil {
				return err
			}
			var last time.Time
			failed := 0
			for _, r := range all {
				if r.Status != api.StatusDone {
					failed++
				}
				if r.FinishedAt != nil && r.FinishedAt.After(last) {
					last = *r.FinishedAt
				}
			}
			if failed > 0 {
				return fmt.Errorf("bench: %d of %d runs did not end done", failed, len(all))
			}
			d := last.Sub(t0)
			fmt.Fprintf(cmd.OutOrStdout(), "drain: %d runs on one node (%s) in %.2f s (%.0f runs/s), agent start included; %s; %.1f transactions per run\n",
				len(all), nodeText(ctx, b.c), d.Seconds(), float64(len(all))/d.Seconds(), turnover(ctx, b.c, all, d),
				float64(after.Commits-before.Commits)/float64(len(all)))
			fmt.Fprintf(cmd.OutOrStdout(), "drain: CPU per run %s: server %s, agent with its shims and jobs %s\n",
				ms((serverCPU+agentCPU)/time.Duration(len(all))), ms(serverCPU/time.Duration(len(all))), ms(agentCPU/time.Duration(len(all))))
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 500, "runs to queue")
	cmd.Flags().StringVar(&slurmMode, "slurm", "", "queue sbatch --wrap true jobs: sbatch (today's), wrapper (before Slurm was applied at placement)")
	cmd.Flags().Lookup("slurm").NoOptDefVal = "sbatch"
	return cmd
}

// waitIdle waits until the server has no active run and lists them all.
// It polls cheaply (one run at most per answer): the figures come from the
// server's own record of the runs' ends, not from here.
func (b *benchServer) waitIdle(ctx context.Context, t0 time.Time) ([]api.Run, error) {
	for {
		active, err := b.c.Runs(ctx, client.ListOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(active) == 0 {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			return nil, errors.New("bench: runs still active after 10 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return b.c.Runs(ctx, client.ListOptions{All: true})
}

// turnover splits a node's time over runs of one CPU each: how long a run
// took from its start to its end (the shim's record: the job's own work),
// and how long a CPU stood idle between two runs (the rest: the report of
// an end, the commits, the pass, the assignment, the job's directory).
func turnover(ctx context.Context, c *client.Client, runs []api.Run, d time.Duration) string {
	var busy time.Duration
	n := 0
	for _, r := range runs {
		if r.StartedAt != nil && r.FinishedAt != nil {
			busy += r.FinishedAt.Sub(*r.StartedAt)
			n++
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) == 0 || n == 0 {
		return "?"
	}
	idle := time.Duration(nodes[0].CPUs)*d - busy
	return fmt.Sprintf("a run's start to end averaged %s, a CPU's idle time between two runs %s", ms(busy/time.Duration(n)), ms(idle/time.Duration(n)))
}

func nodeText(ctx context.Context, c *client.Client) string {
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) == 0 {
		return "?"
	}
	return fmt.Sprintf("%d CPUs", nodes[0].CPUs)
}

func newBenchSchedCmd() *cobra.Command {
	var pending, nodes, cycles int
	var seed uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sched",
		Short: "One full scheduling pass (the server's defaults) on a synthetic cluster, in this process",
		Long: `Builds a seeded synthetic cluster (internal/sched/synth: nodes of 32-128 CPUs, a quarter with
8 GPUs, half of every node held by running runs) and a queue of mixed pending runs (some
multi-node, some asking for a GPU model), runs the scheduler on it several times and prints the
median pass time and the heap held per pending run by the snapshot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Unix(1_700_000_000, 0)
			heap := func() uint64 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			empty := synth.Cluster(seed, nodes, 0, now)
			withNodes := heap()
			snap := synth.Cluster(seed, nodes, pending, now)
			full := heap()
			runtime.KeepAlive(empty)
			perPending := float64(full-withNodes) / float64(max(pending, 1))
			var times []time.Duration
			for range max(cycles, 1) {
				t0 := time.Now()
				sched.Schedule(snap, now)
				times = append(times, time.Since(t0))
			}
			median := percentile(times, 0.5)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"pending": pending, "nodes": nodes, "cycles": len(times),
					"median_cycle_ms": float64(median.Microseconds()) / 1000, "bytes_per_pending": perPending})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sched: %d pending on %d nodes, berth policy, multifactor priority: median pass %s over %d passes; %.0f bytes per pending run\n",
				pending, nodes, ms(median), len(times), perPending)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&pending, "pending", 10000, "pending runs")
	f.IntVar(&nodes, "nodes", 1000, "nodes")
	f.IntVar(&cycles, "cycles", 5, "passes to time")
	f.Uint64Var(&seed, "seed", 1, "seed of the synthetic cluster")
	f.BoolVar(&asJSON, "json", false, "print JSON (median_cycle_ms, bytes_per_pending)")
	return cmd
}
