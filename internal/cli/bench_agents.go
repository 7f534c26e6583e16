//go:build !slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// serverPingEvery is how often a server pings each agent's stream
// (server.Config.PingEvery's default): the heartbeat bench agents times.
const serverPingEvery = 10 * time.Second

func newBenchAgentsCmd() *cobra.Command {
	var agents, runs, cpus, clients int
	var sleep, idle time.Duration
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Many simulated agents against one server: its CPU and memory, heartbeat lag, scheduling latency",
		Long: `Starts a server (a separate process, SQLite, no local agent) and --agents simulated agents in this
process: each a goroutine pair speaking the agents' real protocol over real HTTP (internal/client:
register, the assignment stream, event reports) with a node token of its own made through the API.
They run no processes: a job assigned is reported started at once and exited after the sleep its
command names. The server's CPU and resident memory are measured with the agents idle (only the
streams' heartbeats) for --idle, then while --clients clients submit --runs one-CPU runs of
"sleep --sleep" until they have all ended. Heartbeat lag is how late each ping of the server's
comes after the previous one (it pings each stream every 10 s); scheduling latency is from a
submission's request to its assignment arriving at the agent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agents < 1 || runs < 0 || cpus < 1 || clients < 1 {
				return errors.New("bench agents: --agents, --cpus, --clients want at least 1")
			}
			return benchAgents(cmd, agents, runs, cpus, clients, sleep, idle)
		},
	}
	f := cmd.Flags()
	f.IntVar(&agents, "agents", 1000, "simulated agents (nodes)")
	f.IntVar(&runs, "runs", 2000, "runs to submit once the agents are connected")
	f.IntVar(&cpus, "cpus", 2, "CPUs each simulated node declares")
	f.IntVar(&clients, "clients", 8, "clients submitting at once")
	f.DurationVar(&sleep, "sleep", 5*time.Second, "how long each run's job 'runs' (sleep) on its simulated node")
	f.DurationVar(&idle, "idle", 30*time.Second, "how long the server is measured with the agents connected and idle")
	return cmd
}

// simAgent is one simulated node: its client (its own node token), the
// jobs it "runs", and what it measured.
type simAgent struct {
	name string
	c    *client.Client
	cpus int
	b    *simBench

	mu     sync.Mutex
	jobs   map[int64]bool // running here
	events chan api.AgentEvent
}

// simBench is what the simulated agents share.
type simBench struct {
	sleep    time.Duration
	mu       sync.Mutex
	pingLag  []time.Duration
	postLat  []time.Duration
	assigned map[int64]time.Time // run ID -> first assignment seen
	ended    atomic.Int64
	online   atomic.Int64
	errs     atomic.Int64
}

func (a *simAgent) run(ctx context.Context) {
	go a.reporter(ctx)
	info := api.NodeInfo{Name: a.name, Addr: "127.0.0.1", CPUs: a.cpus, Memory: 8 << 30, Declared: true, Cgroups: "none",
		Limits: "none (simulated)", Containers: "none (simulated)", Version: Version}
	first := true
	for ctx.Err() == nil {
		if err := a.c.Register(ctx, info); err != nil {
			a.b.errs.Add(1)
			time.Sleep(time.Second)
			continue
		}
		var lastPing time.Time
		_ = a.c.AgentStream(ctx, a.name, func(m api.AgentMessage) error {
			now := time.Now()
			if first {
				first = false
				a.b.online.Add(1)
			}
			switch m.Type {
			case "ping":
				if !lastPing.IsZero() {
					lag := now.Sub(lastPing) - serverPingEvery
					a.b.mu.Lock()
					a.b.pingLag = append(a.b.pingLag, max(lag, 0))
					a.b.mu.Unlock()
				}
				lastPing = now
			case "sync", "assign":
				for _, j := range m.Jobs {
					if j.Stop != 0 {
						a.end(j.JobID, 143)
						continue
					}
					a.start(j, now)
				}
			case "stop":
				if m.Stop != nil {
					a.end(m.Stop.JobID, 143)
				}
			}
			return nil
		})
		if ctx.Err() == nil {
			a.b.errs.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// start "runs" job j: started now, exited after its sleep.
func (a *simAgent) start(j api.Assignment, now time.Time) {
	a.mu.Lock()
	if a.jobs[j.JobID] {
		a.mu.Unlock()
		return
	}
	a.jobs[j.JobID] = true
	a.mu.Unlock()
	a.b.mu.Lock()
	if _, ok := a.b.assigned[j.RunID]; !ok {
		a.b.assigned[j.RunID] = now
	}
	a.b.mu.Unlock()
	a.events <- api.AgentEvent{JobID: j.JobID, Type: "started", Time: time.Now().UTC()}
	d := a.b.sleep
	for _, c := range j.Commands {
		if f := strings.Fields(c); len(f) == 2 && f[0] == "sleep" {
			if s, err := strconv.ParseFloat(f[1], 64); err == nil {
				d = time.Duration(s * float64(time.Second))
			}
		}
	}
	time.AfterFunc(d, func() { a.end(j.JobID, 0) })
}

func (a *simAgent) end(job int64, code int) {
	a.mu.Lock()
	if !a.jobs[job] {
		a.mu.Unlock()
		return
	}
	delete(a.jobs, job)
	a.mu.Unlock()
	a.events <- api.AgentEvent{JobID: job, Type: "exited", Time: time.Now().UTC(), ExitCode: code}
}

// reporter sends the agent's events, those queued together in one
// report, as the real agent does, until the server has them.
func (a *simAgent) reporter(ctx context.Context) {
	for {
		var evs []api.AgentEvent
		select {
		case <-ctx.Done():
			return
		case e := <-a.events:
			evs = append(evs, e)
		}
		for more := true; more; {
			select {
			case e := <-a.events:
				evs = append(evs, e)
			default:
				more = false
			}
		}
		for ctx.Err() == nil {
			t0 := time.Now()
			_, err := a.c.AgentEvents(ctx, api.AgentEvents{Node: a.name, Events: evs})
			if err == nil {
				a.b.mu.Lock()
				a.b.postLat = append(a.b.postLat, time.Since(t0))
				a.b.mu.Unlock()
				for _, e := range evs {
					if e.Type == "exited" {
						a.b.ended.Add(1)
					}
				}
				break
			}
			a.b.errs.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func benchAgents(cmd *cobra.Command, agents, runs, cpus, clients int, sleep, idle time.Duration) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	out := cmd.OutOrStdout()
	b, err := startBenchServer(ctx, false)
	if err != nil {
		return err
	}
	defer b.stop()
	pid := b.cmd.Process.Pid
	sb := &simBench{sleep: sleep, assigned: map[int64]time.Time{}}
	start := time.Now()
	// Node tokens, made through the API as an admin would.
	toks := make([]string, agents)
	var wg sync.WaitGroup
	var tokErr atomic.Value
	sem := make(chan struct{}, 16)
	for i := range agents {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t, err := b.c.CreateNodeToken(ctx, simName(i), api.NodeTokenRequest{})
			if err != nil {
				tokErr.Store(err)
				return
			}
			toks[i] = t.Secret
		}()
	}
	wg.Wait()
	if err, _ := tokErr.Load().(error); err != nil {
		return fmt.Errorf("bench agents: node token: %w", err)
	}
	for i := range agents {
		a := &simAgent{name: simName(i), c: client.New(b.url, toks[i]), cpus: cpus, b: sb, jobs: map[int64]bool{}, events: make(chan api.AgentEvent, 1024)}
		go a.run(ctx)
	}
	for sb.online.Load() < int64(agents) {
		if time.Since(start) > 5*time.Minute || ctx.Err() != nil {
			return fmt.Errorf("bench agents: %d of %d agents connected after 5 minutes", sb.online.Load(), agents)
		}
		time.Sleep(50 * time.Millisecond)
	}
	connected := time.Since(start)
	fmt.Fprintf(out, "agents: %d simulated agents (%d CPUs each) registered and streaming in %.1f s (node tokens made through the API included)\n", agents, cpus, connected.Seconds())

	// Idle: only the streams' pings.
	c0 := cpuOf(pid)
	time.Sleep(idle)
	idleCPU := cpuOf(pid) - c0
	idleRSS := statusField(pid, "VmRSS")
	sb.mu.Lock()
	idleLag := slices.Clone(sb.pingLag)
	sb.mu.Unlock()

	// Load: submissions, assignments, starts and ends.
	c1 := cpuOf(pid)
	t1 := time.Now()
	task := benchTask(fmt.Sprintf("sleep %g", sleep.Seconds()))
	var sent sync.Map // run ID -> request time
	var next atomic.Int64
	var subErr atomic.Value
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(runs) {
				t0 := time.Now()
				r, err := b.c.Submit(ctx, api.SubmitRequest{Spec: task})
				if err != nil {
					subErr.Store(err)
					return
				}
				sent.Store(r.ID, t0)
			}
		}()
	}
	wg.Wait()
	if err, _ := subErr.Load().(error); err != nil {
		return fmt.Errorf("bench agents: submit: %w", err)
	}
	submitted := time.Since(t1)
	var peakRSS int64
	for sb.ended.Load() < int64(runs) {
		peakRSS = max(peakRSS, statusField(pid, "VmRSS"))
		if time.Since(t1) > 10*time.Minute || ctx.Err() != nil {
			return fmt.Errorf("bench agents: %d of %d runs ended after 10 minutes", sb.ended.Load(), runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	loadWall := time.Since(t1)
	loadCPU := cpuOf(pid) - c1
	peakRSS = max(peakRSS, statusField(pid, "VmRSS"))
	// What the server says of them: done, each.
	done := 0
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		list, err := b.c.Runs(ctx, client.ListOptions{All: true})
		done = 0
		for _, r := range list {
			if r.Status == api.StatusDone {
				done++
			}
		}
		if err == nil && done >= runs || time.Now().After(deadline) {
			break
		}
	}
	var sched []time.Duration
	sb.mu.Lock()
	sent.Range(func(k, v any) bool {
		if at, ok := sb.assigned[k.(int64)]; ok {
			sched = append(sched, at.Sub(v.(time.Time)))
		}
		return true
	})
	lag := slices.Clone(sb.pingLag)
	post := slices.Clone(sb.postLat)
	sb.mu.Unlock()
	slices.Sort(sched)
	slices.Sort(lag)
	slices.Sort(idleLag)
	slices.Sort(post)
	fmt.Fprintf(out, "idle, %s: server CPU %.1f%% of a core, RSS %s; heartbeat lag over %d pings: median %s, p99 %s, max %s\n",
		idle, cpuPct(idleCPU, idle), mib(idleRSS<<10), len(idleLag), ms(percentile(idleLag, 0.5)), ms(percentile(idleLag, 0.99)), ms(percentile(idleLag, 1)))
	fmt.Fprintf(out, "load: %d runs of \"sleep %g\" submitted by %d clients in %.1f s, all ended %.1f s after the first submission (%d done); server CPU %.1f%% of a core over that, peak RSS %s\n",
		runs, sleep.Seconds(), clients, submitted.Seconds(), loadWall.Seconds(), done, cpuPct(loadCPU, loadWall), mib(peakRSS<<10))
	fmt.Fprintf(out, "scheduling latency (submit request to assignment at the agent), %d runs: median %s, p99 %s, max %s\n",
		len(sched), ms(percentile(sched, 0.5)), ms(percentile(sched, 0.99)), ms(percentile(sched, 1)))
	fmt.Fprintf(out, "heartbeat lag over the whole bench, %d pings: median %s, p99 %s, max %s; agents' event reports, %d: median %s, p99 %s; reconnects or failed requests %d\n",
		len(lag), ms(percentile(lag, 0.5)), ms(percentile(lag, 0.99)), ms(percentile(lag, 1)), len(post), ms(percentile(post, 0.5)), ms(percentile(post, 0.99)), sb.errs.Load())
	return nil
}

func simName(i int) string { return fmt.Sprintf("sim-%04d", i) }

func cpuPct(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return math.NaN()
	}
	return 100 * cpu.Seconds() / wall.Seconds()
}
