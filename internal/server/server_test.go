package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
	"github.com/berth-hq/berth/internal/store/pgtest"
)

// TestMain lets the test binary act as the job supervisor (`berth shim`),
// so these tests run real agents with real job processes.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "berth-shim" {
		os.Exit(agent.RunShim(os.Args[2]))
	}
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

type agentOpts struct {
	name   string
	cpus   int
	gpus   string
	dir    string // data directory; default a new one
	fleet  string
	mon    agent.Monitoring // metrics and health checks (metrics_test.go)
	token  string           // the agent's credential (default testToken, an admin's)
	blocks int              // berth agent --blocks (agent.BlocksAuto: auto)
}

// startAgent runs a real agent for h until the test ends (or stop is called).
func startAgent(t testing.TB, h *harness, o agentOpts) (stop func()) {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.token == "" {
		o.token = testToken
	}
	cfg := agent.Config{Server: h.http.URL, Token: o.token, Name: o.name, Fleet: o.fleet, DataDir: o.dir, CPUs: o.cpus,
		ShimCommand: []string{os.Args[0], "berth-shim"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogTick: 20 * time.Millisecond,
		Monitor: o.mon, Blocks: o.blocks,
		// The tests' users (alice, bob…) have no Unix accounts here: their
		// jobs run as the agent's user (running as the user is the agent's
		// and the cli's tests).
		RunAsAgent: true}
	if o.gpus != "" {
		g, err := agent.ParseGPUs(o.gpus, func(s string) (int64, error) { b, err := spec.ParseBytes(s); return int64(b), err })
		if err != nil {
			t.Fatal(err)
		}
		cfg.GPUs, cfg.DeclaredGPUs = g, true
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	waitFor(t, "node "+o.name+" online", func() bool {
		ns, err := h.c.Nodes(context.Background())
		if err != nil {
			return false
		}
		for _, n := range ns {
			if n.Name == o.name && n.Status != "offline" {
				return true
			}
		}
		return false
	})
	return stop
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func submit(t *testing.T, h *harness, yaml string) *api.Run {
	t.Helper()
	r, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(t, yaml)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// follow streams a run's output to its end and returns it with the final run.
func follow(t *testing.T, h *harness, id int64) (string, *api.Run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	end, err := h.c.Logs(ctx, fmt.Sprint(id), client.LogOptions{Follow: true, Job: -1}, func(e api.LogEntry) { out.Write(e.Data) })
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), end
}

func TestRunLifecycle(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	r := submit(t, h, `
type: task
name: life
env:
  - GREETING=hello
commands:
  - echo "$GREETING $BERTH_RUN_NAME $SLURM_JOB_ID $DSTACK_NODE_RANK/$DSTACK_NODES_NUM $SLURM_JOB_NUM_NODES [$CUDA_VISIBLE_DEVICES]"
  - echo to-stderr >&2
`)
	if r.Status != api.StatusSubmitted || r.Name != "life" || r.ID != 1 {
		t.Fatalf("submitted run = %+v", r)
	}
	out, end := follow(t, h, r.ID)
	if want := "hello life 1 0/1 1 []\nto-stderr\n"; out != want {
		t.Errorf("output = %q, want %q", out, want)
	}
	if end.Status != api.StatusDone || end.Reason != api.ReasonDone || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Errorf("final run = %s %s %v", end.Status, end.Reason, end.ExitCode)
	}
	if end.StartedAt == nil || end.FinishedAt == nil || end.StartedAt.Before(end.SubmittedAt) {
		t.Errorf("times: submitted %v started %v finished %v", end.SubmittedAt, end.StartedAt, end.FinishedAt)
	}
	if len(end.Jobs) != 1 || end.Jobs[0].Node != "n1" || end.Jobs[0].Alloc.CPUs != 1 {
		t.Errorf("jobs = %+v", end.Jobs)
	}
	// The history of the run is kept and shown.
	got, err := h.c.Run(context.Background(), "life")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range got.Events {
		types = append(types, e.Type+": "+e.Message)
	}
	if want := []string{"placed: on n1", "job_finished: done (done_by_runner) exit code 0"}; !slices.Equal(types, want) {
		t.Errorf("events = %q, want %q", types, want)
	}
	// The node has everything back.
	waitFor(t, "node idle", func() bool {
		ns, _ := h.c.Nodes(context.Background())
		return len(ns) == 1 && ns[0].Status == "idle" && ns[0].AllocCPUs == 0
	})
}

func TestFailedRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	r := submit(t, h, "type: task\ncommands: [\"echo before\", \"exit 3\", \"echo never\"]\n")
	out, end := follow(t, h, r.ID)
	if out != "before\n" {
		t.Errorf("output = %q: commands must stop at the first failure", out)
	}
	if end.Status != api.StatusFailed || end.Reason != api.ReasonExitedWithError || end.ExitCode == nil || *end.ExitCode != 3 {
		t.Errorf("final run = %s %s %v, want failed exited_with_error 3", end.Status, end.Reason, end.ExitCode)
	}
}

func TestStopQueuedRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	r := submit(t, h, "type: task\ncommands: [\"true\"]\n")
	waitFor(t, "pending reason", func() bool {
		got, err := h.c.Run(context.Background(), fmt.Sprint(r.ID))
		return err == nil && got.Reason == api.ReasonNoNode
	})
	got, err := h.c.Stop(context.Background(), fmt.Sprint(r.ID), false)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.StatusTerminated || got.Reason != api.ReasonTerminatedByUser {
		t.Errorf("stopped queued run = %s %s", got.Status, got.Reason)
	}
	if _, end := follow(t, h, r.ID); end.Status != api.StatusTerminated {
		t.Errorf("follow ended with %s", end.Status)
	}
}

func TestStopRunningRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	r := submit(t, h, "type: task\nname: stopme\ncommands: [\"trap 'echo got TERM; exit 0' TERM; echo ready; sleep 60 & wait\"]\n")
	waitFor(t, "ready", func() bool {
		var out strings.Builder
		_, _ = h.c.Logs(context.Background(), "stopme", client.LogOptions{Job: -1}, func(e api.LogEntry) { out.Write(e.Data) })
		return out.String() == "ready\n"
	})
	if _, err := h.c.Stop(context.Background(), "stopme", false); err != nil {
		t.Fatal(err)
	}
	out, end := follow(t, h, r.ID)
	if out != "ready\ngot TERM\n" || end.Status != api.StatusTerminated || end.Reason != api.ReasonTerminatedByUser {
		t.Errorf("output %q, run %s %s", out, end.Status, end.Reason)
	}
}

func TestBadSubmissionStoresNothing(t *testing.T) {
	h := newHarness(t, t.TempDir())
	bad := map[string]*spec.Task{
		"priority out of range": {Type: "task", Commands: []string{"true"}, Priority: 500},
		"no commands":           {Type: "task"},
		"negative nodes":        {Type: "task", Commands: []string{"true"}, Nodes: -2},
	}
	for name, tk := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: tk})
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != 400 {
				t.Fatalf("Submit = %v, want a 400", err)
			}
		})
	}
	runs, err := h.st.ListRuns(context.Background(), store.RunFilter{All: true})
	if err != nil || len(runs) != 0 {
		t.Fatalf("store has %d runs after bad submissions (%v)", len(runs), err)
	}
	if r := submit(t, h, "type: task\ncommands: [\"true\"]\n"); r.ID != 1 {
		t.Errorf("first good run got ID %d: bad ones must not use IDs", r.ID)
	}
}

func TestAuth(t *testing.T) {
	h := newHarness(t, t.TempDir())
	c := client.New(h.http.URL, "wrong")
	var apiErr *client.APIError
	if _, err := c.Runs(context.Background(), client.ListOptions{}); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("wrong token: %v, want 401", err)
	}
}

func TestGPUQueueing(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "g1", cpus: 4, gpus: "A100:80GB:2"})
	// The first holds the GPUs longer than pending reasons take to be
	// written (up to a second).
	first := submit(t, h, "type: task\ncommands: [\"echo $CUDA_VISIBLE_DEVICES; sleep 2\"]\nresources: {gpu: A100:2}\n")
	second := submit(t, h, "type: task\ncommands: [\"echo $CUDA_VISIBLE_DEVICES\"]\nresources: {gpu: 80GB:2}\n")
	waitFor(t, "second waits for resources", func() bool {
		r, err := h.c.Run(context.Background(), fmt.Sprint(second.ID))
		return err == nil && r.Status == api.StatusSubmitted && r.Reason == api.ReasonResources
	})
	out1, end1 := follow(t, h, first.ID)
	out2, end2 := follow(t, h, second.ID)
	if out1 != "0,1\n" || out2 != "0,1\n" || end1.Status != api.StatusDone || end2.Status != api.StatusDone {
		t.Errorf("first %q %s, second %q %s", out1, end1.Status, out2, end2.Status)
	}
	if !end2.StartedAt.After(*end1.FinishedAt) && !end2.StartedAt.Equal(*end1.FinishedAt) {
		t.Errorf("second started %v before first finished %v", end2.StartedAt, end1.FinishedAt)
	}
	never := submit(t, h, "type: task\ncommands: [\"true\"]\nresources: {gpu: H100:1}\n")
	waitFor(t, "never-fitting run's reason", func() bool {
		r, err := h.c.Run(context.Background(), fmt.Sprint(never.ID))
		return err == nil && r.Reason == api.ReasonNoNode
	})
}

func TestMultiNodeRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "a", cpus: 1})
	startAgent(t, h, agentOpts{name: "b", cpus: 1})
	r := submit(t, h, "type: task\nnodes: 2\ncommands: [\"echo rank=$DSTACK_NODE_RANK of $DSTACK_NODES_NUM on $BERTH_NODE_NAME nodes=$SLURM_JOB_NODELIST\"]\n")
	out, end := follow(t, h, r.ID)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := map[string]bool{"rank=0 of 2 on a nodes=a,b": true, "rank=1 of 2 on b nodes=a,b": true}
	if len(lines) != 2 || !want[lines[0]] || !want[lines[1]] || lines[0] == lines[1] {
		t.Errorf("output = %q", out)
	}
	if end.Status != api.StatusDone || len(end.Jobs) != 2 {
		t.Errorf("run %s with %d jobs", end.Status, len(end.Jobs))
	}
}

// A restarted server finds its queue and runs it; nothing acknowledged is lost.
func TestServerRestartKeepsQueue(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	var ids []int64
	for range 5 {
		ids = append(ids, submit(t, h, "type: task\ncommands: [\"echo $BERTH_RUN_ID\"]\n").ID)
	}
	h.close()
	h = newHarness(t, dir)
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	for _, id := range ids {
		out, end := follow(t, h, id)
		if out != fmt.Sprintf("%d\n", id) || end.Status != api.StatusDone {
			t.Errorf("run %d: output %q, status %s", id, out, end.Status)
		}
	}
	if r := submit(t, h, "type: task\ncommands: [\"true\"]\n"); r.ID != 6 {
		t.Errorf("IDs after restart continue at %d, want 6", r.ID)
	}
	st, err := h.c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes != 1 || st.Commits == 0 || st.Batches < st.Commits || st.Passes == 0 {
		t.Errorf("status = %+v", st)
	}
}

// Lots of output arrives complete and in order, with a follower attached
// from the start.
func TestLogsCompleteInOrder(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	r := submit(t, h, "type: task\ncommands: [\"for i in $(seq 1 3000); do echo line $i; done\"]\n")
	out, end := follow(t, h, r.ID)
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if out != want.String() || end.Status != api.StatusDone {
		t.Errorf("got %d bytes, want %d; status %s", len(out), want.Len(), end.Status)
	}
}

// An agent that stops while its jobs run finds them again when it comes
// back: the jobs go on meanwhile, and their output arrives whole, once.
func TestAgentRestartFindsJobs(t *testing.T) {
	h := newHarness(t, t.TempDir())
	o := agentOpts{name: "n1", cpus: 2, dir: t.TempDir()}
	stop := startAgent(t, h, o)
	r := submit(t, h, "type: task\ncommands: [\"for i in $(seq 1 40); do echo line $i; sleep 0.05; done\"]\n")
	waitFor(t, "the job to run", func() bool {
		got, err := h.c.Run(context.Background(), fmt.Sprint(r.ID))
		return err == nil && got.Status == api.StatusRunning
	})
	stop()
	time.Sleep(500 * time.Millisecond) // output piles up while no agent ships it
	startAgent(t, h, o)
	out, end := follow(t, h, r.ID)
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if out != want.String() || end.Status != api.StatusDone {
		t.Errorf("output %q, status %s", out, end.Status)
	}
}

func TestHubReleasesWaiters(t *testing.T) {
	h := newHub()
	ch, release := h.wait(1)
	_, release2 := h.wait(1)
	h.notify(1)
	select {
	case <-ch:
	default:
		t.Fatal("notify did not wake the waiter")
	}
	release()
	release2()
	_, release3 := h.wait(2)
	release3()
	if len(h.ch) != 0 {
		t.Errorf("%d runs still have waiters after every follower left", len(h.ch))
	}
}

// A follower of a run's output (berth apply, berth logs -f) rides out a
// restart of the server: it resumes where it stopped, without repeats.
func TestFollowAcrossServerRestart(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	addr := h.http.Listener.Addr().String()
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, dir: t.TempDir()})
	r := submit(t, h, "type: task\ncommands: [\"for i in $(seq 1 30); do echo line $i; sleep 0.05; done\"]\n")
	var out strings.Builder
	type result struct {
		end *api.Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := h.c.Logs(context.Background(), fmt.Sprint(r.ID), client.LogOptions{Follow: true, Job: -1, Reconnect: 30 * time.Second},
			func(e api.LogEntry) { out.Write(e.Data) })
		done <- result{end, err}
	}()
	time.Sleep(500 * time.Millisecond)
	h.close()
	newHarnessAt(t, dir, addr)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	var want strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if out.String() != want.String() || res.end.Status != api.StatusDone {
		t.Errorf("output %q, status %s", out.String(), res.end.Status)
	}
}

// Fleets are Slurm's partitions: a run that names fleets goes only to their
// nodes, and the plan says why the others will not do.
func TestFleets(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "c1", cpus: 2, fleet: "cpu"})
	startAgent(t, h, agentOpts{name: "g1", cpus: 2, fleet: "gpu"})
	r := submit(t, h, "type: task\nfleets: [gpu]\ncommands: [\"echo $BERTH_NODE_NAME\"]\n")
	if out, end := follow(t, h, r.ID); out != "g1\n" || end.Status != api.StatusDone {
		t.Errorf("ran on %q (%s), want g1", out, end.Status)
	}
	plan, err := h.c.Plan(context.Background(), api.SubmitRequest{Spec: task(t, "type: task\nfleets: [tpu]\ncommands: [\"true\"]\n")})
	if err != nil {
		t.Fatal(err)
	}
	if plan.FitsNow || len(plan.Rows) != 2 || plan.Rows[0].Fits != "never" || plan.Rows[0].Why != "not in fleet tpu" || len(plan.Unsupported) != 0 {
		t.Errorf("plan = %+v", plan)
	}
	nowhere := submit(t, h, "type: task\nfleets: [tpu]\ncommands: [\"true\"]\n")
	waitFor(t, "the reason of a run for a fleet with no nodes", func() bool {
		got, err := h.c.Run(context.Background(), fmt.Sprint(nowhere.ID))
		return err == nil && got.Reason == api.ReasonNoNode
	})
}
