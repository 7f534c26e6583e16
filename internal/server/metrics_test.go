package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/google/go-cmp/cmp"
)

// Metrics, health checks and drains, with real agents and real jobs.

func runMetrics(t *testing.T, h *harness, id int64, history int) *api.RunMetrics {
	t.Helper()
	m, err := h.c.RunMetrics(context.Background(), fmt.Sprint(id), client.MetricsOptions{History: history})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func node(t *testing.T, h *harness, name string) api.Node {
	t.Helper()
	ns, err := h.c.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return api.Node{}
}

func runStatus(t *testing.T, h *harness, id int64) *api.Run {
	t.Helper()
	r, err := h.c.Run(context.Background(), fmt.Sprint(id))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A job that burns a CPU shows it, with its memory against its limit, within
// a few samples; each job's history is bounded. The 1-CPU quota is checked
// on the job's whole life (CPU seconds over its wall time), which a loaded
// machine cannot push over it; one sample's percentage over 100 ms can be
// (the CFS period and the sampler's own delay).
func TestMetricsOfBurningJob(t *testing.T) {
	requireLimits(t)
	h := newHarness(t, t.TempDir())
	h.srv.jm.mu.Lock()
	h.srv.jm.perJob = 5
	h.srv.jm.mu.Unlock()
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, mon: agent.Monitoring{MetricsEvery: 100 * time.Millisecond}})
	r := submit(t, h, "type: task\nresources: {cpu: 1, memory: 256MB}\ncommands: [\"x=$(head -c 8M /dev/zero | tr '\\\\0' a); while :; do :; done\"]\n")
	defer func() { _, _ = h.c.Stop(context.Background(), fmt.Sprint(r.ID), true) }()
	var m *api.RunMetrics
	waitFor(t, "a busy CPU and memory in use", func() bool {
		m = runMetrics(t, h, r.ID, -1)
		if len(m.Jobs) != 1 || m.Jobs[0].Latest == nil {
			return false
		}
		s := m.Jobs[0].Latest
		return s.CPUPercent != nil && *s.CPUPercent > 0 && s.CPUSeconds >= 0.5 && s.MemoryUsed > 0
	})
	j := m.Jobs[0]
	started := runStatus(t, h, r.ID).Jobs[0].StartedAt
	if started == nil {
		t.Fatal("a running job without a start time")
	}
	s := j.Latest
	if s.MemoryLimit != 256<<20 || s.MemoryPeak < s.MemoryUsage || s.MemoryUsage < s.MemoryUsed {
		t.Errorf("latest sample %+v, want the 256MB limit, peak >= used", s)
	}
	if life := s.Time.Sub(*started).Seconds(); s.CPUSeconds > 1.1*life+0.05 {
		t.Errorf("the job used %.2f CPU seconds in %.2f s of life: over its 1-CPU quota", s.CPUSeconds, life)
	}
	if j.Node != "n1" || j.Status != api.StatusRunning || j.Alloc.CPUs != 1 {
		t.Errorf("job %+v", j)
	}
	// Memory keeps 5 samples a job; the store keeps them all: the history
	// outgrows memory's, oldest first, the latest last.
	waitFor(t, "a history longer than memory's", func() bool { return len(runMetrics(t, h, r.ID, -1).Jobs[0].History) > 6 })
	j = runMetrics(t, h, r.ID, -1).Jobs[0]
	if !j.History[len(j.History)-1].Time.Equal(j.Latest.Time) {
		t.Fatalf("history of %d samples, last %v, latest %v", len(j.History), j.History[len(j.History)-1].Time, j.Latest.Time)
	}
	if n := len(h.srv.jm.of(r.ID, -1)[j.JobID]); n != 5 {
		t.Errorf("memory holds %d samples of the job, want 5", n)
	}
	for i := 1; i < len(j.History); i++ {
		if !j.History[i].Time.After(j.History[i-1].Time) {
			t.Errorf("history out of order at %d: %v", i, j.History)
		}
	}
	if j := runMetrics(t, h, r.ID, 0).Jobs[0]; j.Latest == nil || len(j.History) != 0 {
		t.Errorf("history=0: latest %v, %d in history", j.Latest, len(j.History))
	}
	if j := runMetrics(t, h, r.ID, 2).Jobs[0]; len(j.History) != 2 {
		t.Errorf("history=2: %d samples", len(j.History))
	}
	// What was sampled stays after the run ends.
	if _, err := h.c.Stop(context.Background(), fmt.Sprint(r.ID), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run's end", func() bool { return runStatus(t, h, r.ID).Status.Finished() })
	if m := runMetrics(t, h, r.ID, 0); len(m.Jobs) != 1 || m.Jobs[0].Latest == nil || !m.Status.Finished() {
		t.Errorf("after the end: %+v", m)
	}
}

// A finished run's metrics are there after a restart of the server (they
// are in the store); past an hour they are folded into a sample a minute
// that keeps each minute's most memory and mean CPU; past the retention
// they are gone.
func TestMetricsSurviveRestartAndFold(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, mon: agent.Monitoring{MetricsEvery: 50 * time.Millisecond}})
	r := submit(t, h, "type: task\ncommands: [\"sleep 1\"]\n")
	waitFor(t, "the run's end", func() bool { return runStatus(t, h, r.ID).Status.Finished() })
	before := runMetrics(t, h, r.ID, -1)
	if len(before.Jobs) != 1 || len(before.Jobs[0].History) < 5 {
		t.Fatalf("a second's samples: %+v", before)
	}
	addr := h.http.Listener.Addr().String()
	h.close()
	h = newHarnessAt(t, dir, addr)
	after := runMetrics(t, h, r.ID, -1)
	if len(after.Jobs) != 1 || len(after.Jobs[0].History) < len(before.Jobs[0].History) {
		t.Fatalf("after a restart: %d samples, before %d", len(after.Jobs[0].History), len(before.Jobs[0].History))
	}
	hist := after.Jobs[0].History
	var peak int64
	for _, x := range hist {
		peak = max(peak, x.MemoryUsed)
	}
	first, last := hist[0].Time, hist[len(hist)-1].Time
	// An hour and a minute on, every sample is folded, one a minute.
	if err := h.srv.foldSamples(context.Background(), last.Add(time.Hour+time.Minute)); err != nil {
		t.Fatal(err)
	}
	folded := runMetrics(t, h, r.ID, -1).Jobs[0].History
	minutes := int(last.Truncate(time.Minute).Sub(first.Truncate(time.Minute))/time.Minute) + 1
	if len(folded) != minutes {
		t.Fatalf("%d samples from %v to %v folded into %d, want %d a minute", len(hist), first, last, len(folded), minutes)
	}
	var fpeak int64
	for _, x := range folded {
		fpeak = max(fpeak, x.MemoryUsed)
		if x.Time != x.Time.Truncate(time.Minute) {
			t.Errorf("a folded sample at %v, not a minute's start", x.Time)
		}
	}
	if fpeak != peak {
		t.Errorf("folded samples' most memory %d, the samples' %d", fpeak, peak)
	}
	// Past the retention (30 days by default) nothing is left.
	if err := h.srv.foldSamples(context.Background(), last.Add(31*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m := runMetrics(t, h, r.ID, -1); len(m.Jobs) != 0 {
		t.Errorf("past the retention: %+v", m.Jobs)
	}
}

// A fake nvidia-smi stands in for GPUs: a job's GPUs are sampled, and
// their ECC errors warn about the node (correctable) or drain it
// (uncorrectable) until they are gone.
func TestGPUMetricsAndHealth(t *testing.T) {
	dir := t.TempDir()
	health := filepath.Join(dir, "health")
	smi := filepath.Join(dir, "nvidia-smi")
	script := `#!/bin/sh
case "$1" in
--query-gpu=index,uuid,utilization.gpu,*) printf '0, GPU-aaa, 97, 1024, 81920\n1, GPU-bbb, 3, 10, 81920\n' ;;
--query-gpu=index,uuid,ecc*) if [ -f ` + health + ` ]; then cat ` + health + `; else printf '0, GPU-aaa, 0, 0, 40\n1, GPU-bbb, 0, 0, 41\n'; fi ;;
*) echo "unexpected query $1" >&2; exit 2 ;;
esac
`
	if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "g1", cpus: 4, gpus: "A100:80GB:2",
		mon: agent.Monitoring{MetricsEvery: 100 * time.Millisecond, NvidiaSMI: smi, HealthEvery: 100 * time.Millisecond}})
	r := submit(t, h, "type: task\nresources: {gpu: 1}\ncommands: [\"sleep 60\"]\n")
	defer func() { _, _ = h.c.Stop(context.Background(), fmt.Sprint(r.ID), true) }()
	var m *api.RunMetrics
	waitFor(t, "GPU samples", func() bool {
		m = runMetrics(t, h, r.ID, 0)
		return len(m.Jobs) == 1 && m.Jobs[0].Latest != nil && len(m.Jobs[0].Latest.GPUs) > 0
	})
	want := api.GPUSample{Index: 0, UUID: "GPU-aaa", Util: 97, MemoryUsed: 1 << 30, MemoryTotal: 80 << 30}
	if g := m.Jobs[0].Latest.GPUs; len(g) != 1 || g[0] != want {
		t.Errorf("GPUs of the job = %+v, want only %+v (its own)", g, want)
	}
	if n := node(t, h, "g1"); n.Status != "busy" || n.Health == nil || n.Health.Status != api.HealthOK {
		t.Errorf("healthy node: %s, %+v", n.Status, n.Health)
	}

	write := func(s string) {
		if err := os.WriteFile(health, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0, GPU-aaa, 0, 0, 40\n1, GPU-bbb, 0, 5, 41\n")
	waitFor(t, "a warning", func() bool {
		n := node(t, h, "g1")
		return n.Status == "busy (warning)" && n.Reason == "GPU 1: 5 correctable ECC errors"
	})
	// A warning keeps the node in service.
	second := submit(t, h, "type: task\nresources: {gpu: 1}\ncommands: [\"true\"]\n")
	if _, end := follow(t, h, second.ID); end.Status != api.StatusDone {
		t.Fatalf("run on a node with a warning: %s %s", end.Status, end.Reason)
	}
	write("0, GPU-aaa, 0, 0, 40\n1, GPU-bbb, 2, 5, 41\n")
	waitFor(t, "a failure", func() bool {
		n := node(t, h, "g1")
		return n.Status == "busy (failure)" && n.Reason == "GPU 1: 2 uncorrectable ECC errors"
	})
	third := submit(t, h, "type: task\nresources: {gpu: 1}\ncommands: [\"true\"]\n")
	waitFor(t, "the third to wait", func() bool {
		r := runStatus(t, h, third.ID)
		return r.Status == api.StatusSubmitted && r.Reason == api.ReasonResources
	})
	if err := os.Remove(health); err != nil {
		t.Fatal(err)
	}
	if _, end := follow(t, h, third.ID); end.Status != api.StatusDone {
		t.Fatalf("third after the GPU recovered: %s %s", end.Status, end.Reason)
	}
	if n := node(t, h, "g1"); n.Status != "busy" || n.Reason != "" {
		t.Errorf("recovered node: %s (%s)", n.Status, n.Reason)
	}
}

// A failing health-check program drains the node, with its last line as
// the reason: a new run waits, the running job goes on; once the program
// passes again, the drain is lifted and the new run starts.
func TestHealthCheckDrains(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "fail")
	prog := filepath.Join(dir, "check.sh")
	script := "#!/bin/sh\necho checking $BERTH_NODE_NAME\nif [ -f " + flag + " ]; then cat " + flag + "; exit 1; fi\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, mon: agent.Monitoring{MetricsEvery: -1, HealthCheck: prog, HealthEvery: 100 * time.Millisecond}})
	long := submit(t, h, "type: task\ncommands: [\"echo started\", \"sleep 3\", \"echo survived\"]\n")
	waitFor(t, "the long run", func() bool { return runStatus(t, h, long.ID).Status == api.StatusRunning })

	if err := os.WriteFile(flag, []byte("scratch disk is full\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drain", func() bool {
		n := node(t, h, "n1")
		return n.Status == "busy (failure)" && n.Reason == "scratch disk is full" && n.Health != nil && n.Health.Status == api.HealthFailure
	})
	next := submit(t, h, "type: task\ncommands: [\"echo next\"]\n")
	waitFor(t, "the new run to wait", func() bool {
		r := runStatus(t, h, next.ID)
		return r.Status == api.StatusSubmitted && r.Reason == api.ReasonResources
	})
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	out, end := follow(t, h, next.ID)
	if out != "next\n" || end.Status != api.StatusDone {
		t.Errorf("next after the check passed: %q %s", out, end.Status)
	}
	out, end = follow(t, h, long.ID)
	if out != "started\nsurvived\n" || end.Status != api.StatusDone {
		t.Errorf("the job running through the drain: %q %s %s", out, end.Status, end.Reason)
	}
	if n := node(t, h, "n1"); n.Status != "idle" {
		t.Errorf("node after: %s (%s)", n.Status, n.Reason)
	}
}

// An administrator's drain: no new jobs, the running one goes on
// (draining), it survives a restart of the server, and only resume lifts it.
func TestManualDrainAndResume(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	addr := h.http.Listener.Addr().String()
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, dir: t.TempDir(), mon: agent.Monitoring{MetricsEvery: -1}})
	ctx := context.Background()
	if _, err := h.c.Drain(ctx, "nope", "x"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("drain of an unknown node: %v, want 404", err)
	}
	bob := h.userClient(t, "bob")
	var apiErr *client.APIError
	if _, err := bob.Drain(ctx, "n1", "mine"); !errors.As(err, &apiErr) || apiErr.Status != 403 {
		t.Errorf("drain by a user who is not an admin: %v, want 403 (the docs say: forbidden)", err)
	}

	long := submit(t, h, "type: task\ncommands: [\"sleep 2\", \"echo survived\"]\n")
	waitFor(t, "the long run", func() bool { return runStatus(t, h, long.ID).Status == api.StatusRunning })
	n, err := h.c.Drain(ctx, "n1", "new kernel")
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != "draining (new kernel)" || n.Reason != "new kernel" || n.Drain == nil || n.Drain.By != "admin" || n.Drain.Since.IsZero() {
		t.Errorf("drained node: %+v (drain %+v)", n, n.Drain)
	}
	next := submit(t, h, "type: task\ncommands: [\"echo next\"]\n")
	waitFor(t, "the new run to wait", func() bool {
		r := runStatus(t, h, next.ID)
		return r.Status == api.StatusSubmitted && r.Reason == api.ReasonResources
	})
	if out, end := follow(t, h, long.ID); out != "survived\n" || end.Status != api.StatusDone {
		t.Errorf("the job running through the drain: %q %s", out, end.Status)
	}
	waitFor(t, "drained", func() bool { return node(t, h, "n1").Status == "drained (new kernel)" })

	h.close()
	h = newHarnessAt(t, dir, addr)
	waitFor(t, "the agent back", func() bool {
		n := node(t, h, "n1")
		return n.Status == "drained (new kernel)" && n.Drain != nil && n.Drain.By == "admin"
	})
	time.Sleep(300 * time.Millisecond)
	if r := runStatus(t, h, next.ID); r.Status != api.StatusSubmitted {
		t.Fatalf("a run started on a drained node after a restart: %s", r.Status)
	}
	if n, err = h.c.Resume(ctx, "n1"); err != nil || n.Drain != nil || (n.Status != "idle" && n.Status != "busy") {
		t.Fatalf("resume: %+v, %v", n, err)
	}
	if out, end := follow(t, h, next.ID); out != "next\n" || end.Status != api.StatusDone {
		t.Errorf("after resume: %q %s", out, end.Status)
	}
}

// userClient is a client with the token of a new user who is not an admin.
func (h *harness) userClient(t *testing.T, name string) *client.Client {
	t.Helper()
	ctx := context.Background()
	uid, err := h.st.EnsureUser(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	token := name + "-token"
	if err := h.st.AddToken(ctx, uid, HashToken(token), name); err != nil {
		t.Fatal(err)
	}
	return client.New(h.http.URL, token)
}

// The store keeps perJob samples of each job, the newest, and maxRuns
// runs, dropping the least recently sampled.
func TestMetricsStoreBounds(t *testing.T) {
	m := &metricsStore{perJob: 3, maxRuns: 2}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	for i := range 7 {
		m.add([]sample{{run: 1, s: api.JobSample{JobID: 10, Time: at(i)}}, {run: 1, s: api.JobSample{JobID: 11, Time: at(i)}}}, at(i))
	}
	got := m.of(1, -1)
	for _, id := range []int64{10, 11} {
		if s := got[id]; len(s) != 3 || !s[0].Time.Equal(at(4)) || !s[2].Time.Equal(at(6)) || s[0].JobID != 0 {
			t.Errorf("job %d: %+v, want the samples of 4, 5, 6 s", id, s)
		}
	}
	if s := m.of(1, 1)[10]; len(s) != 1 || !s[0].Time.Equal(at(6)) {
		t.Errorf("newest 1: %+v", s)
	}
	m.add([]sample{{run: 2, s: api.JobSample{JobID: 20, Time: at(8)}}}, at(8))
	m.add([]sample{{run: 1, s: api.JobSample{JobID: 10, Time: at(9)}}}, at(9)) // run 1 is now the fresher
	m.add([]sample{{run: 3, s: api.JobSample{JobID: 30, Time: at(10)}}}, at(10))
	if m.of(2, -1) != nil || m.of(1, -1) == nil || m.of(3, -1) == nil {
		t.Errorf("kept runs %v, want 1 and 3", m.runs)
	}
}

// A minute's samples fold into one: the mean of the CPU and GPU use that
// was measured, the most memory, the last limit.
func TestFoldMinute(t *testing.T) {
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	pct := func(v float64) *float64 { return &v }
	got := foldMinute(at, []api.JobSample{
		{Time: at.Add(5 * time.Second), CPUSeconds: 1, MemoryUsed: 10, MemoryPeak: 12, MemoryLimit: 100, GPUs: []api.GPUSample{{Index: 1, Util: 50, MemoryUsed: 5, MemoryTotal: 80}}},
		{Time: at.Add(10 * time.Second), CPUPercent: pct(40), CPUSeconds: 2, MemoryUsed: 30, MemoryPeak: 31, MemoryLimit: 100, GPUs: []api.GPUSample{{Index: 1, Util: 100, MemoryUsed: 9, MemoryTotal: 80}}},
		{Time: at.Add(15 * time.Second), CPUPercent: pct(80), CPUSeconds: 3, MemoryUsed: 20, MemoryPeak: 31, MemoryLimit: 100, GPUs: []api.GPUSample{{Index: 1, Util: 0, MemoryUsed: 7, MemoryTotal: 80}}},
	})
	want := api.JobSample{Time: at, CPUPercent: pct(60), CPUSeconds: 3, MemoryUsed: 30, MemoryPeak: 31, MemoryLimit: 100,
		GPUs: []api.GPUSample{{Index: 1, Util: 50, MemoryUsed: 9, MemoryTotal: 80}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("folded (-want +got):\n%s", diff)
	}
}
