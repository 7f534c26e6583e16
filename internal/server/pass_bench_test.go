package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/sched/synth"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// The cluster of BenchmarkSubmitDuringPass: `berth bench sched`'s largest.
const (
	passNodes   = 10_000
	passPending = 100_000
)

// seedCluster stores the synthetic cluster c as the server would have
// written it: its nodes, one running run per running entry (its jobs on
// their nodes) and the pending runs with their waiting jobs. Users are the
// synthetic ones.
func seedCluster(b *testing.B, st store.Store, c sched.Snapshot, now time.Time) {
	b.Helper()
	ctx := context.Background()
	pid, err := st.EnsureProject(ctx, "main")
	if err != nil {
		b.Fatal(err)
	}
	users := map[string]int64{}
	user := func(name string) int64 {
		if name == "" {
			name = "admin"
		}
		if id, ok := users[name]; ok {
			return id
		}
		id, err := st.EnsureUser(ctx, name, name == "admin")
		if err != nil {
			b.Fatal(err)
		}
		users[name] = id
		return id
	}
	batch := &store.Batch{}
	flush := func(force bool) {
		if force || len(batch.Runs)+len(batch.Nodes) >= 5000 {
			if err := st.Apply(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = &store.Batch{}
		}
	}
	for _, n := range c.Nodes {
		info := api.NodeInfo{Name: n.Name, Fleet: n.Fleet, Addr: "127.0.0.1", CPUs: n.CPUs, Memory: int64(n.Memory)}
		for _, g := range n.GPUs {
			info.GPUs = append(info.GPUs, api.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, Memory: int64(g.Memory)})
		}
		body, _ := json.Marshal(info)
		batch.Nodes = append(batch.Nodes, &store.Node{Name: n.Name, Info: body, RegisteredAt: now, LastSeen: now})
		flush(false)
	}
	// A run's configuration asks for what the synthetic run asks for.
	body := func(nodes int, r sched.Request, limit time.Duration) []byte {
		t := spec.Task{Type: "task", Commands: []string{"true"}, Nodes: nodes}
		t.Resources.CPU = &spec.CPUSpec{Count: spec.IntRange{Min: r.CPUs}}
		t.Resources.Memory = &spec.ByteRange{Min: spec.Bytes(r.Memory)}
		if r.GPU.Count > 0 {
			t.Resources.GPU = &spec.GPUSpec{Count: spec.IntRange{Min: r.GPU.Count}, Names: r.GPU.Names}
		}
		if limit > 0 {
			d := spec.Duration(limit / time.Second)
			t.MaxDuration = &d
		}
		out, err := json.Marshal(&t)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	var nextJob int64
	for _, r := range c.Running {
		p := r.Placements[0]
		req := sched.Request{CPUs: p.CPUs, Memory: p.Memory}
		req.GPU.Count = len(p.GPUs)
		batch.Runs = append(batch.Runs, &store.Run{ID: r.RunID, ProjectID: pid, UserID: user(r.User), Name: "running", Status: string(api.StatusRunning),
			Spec: body(1, req, r.End.Sub(now)), SubmittedAt: now, StartedAt: now, ArrayIndex: -1})
		for _, p := range r.Placements {
			nextJob++
			alloc, _ := json.Marshal(api.Alloc{CPUs: p.CPUs, Memory: int64(p.Memory), GPUs: p.GPUs})
			batch.Jobs = append(batch.Jobs, &store.Job{ID: nextJob, RunID: r.RunID, Status: string(api.StatusRunning), Node: p.Node,
				Alloc: alloc, SubmittedAt: now, StartedAt: now})
		}
		flush(false)
	}
	for _, p := range c.Pending {
		batch.Runs = append(batch.Runs, &store.Run{ID: p.RunID, ProjectID: pid, UserID: user(p.User), Name: "waiting", Status: string(api.StatusSubmitted),
			Priority: p.Priority, Spec: body(p.Nodes, *p.Request, p.Limit), SubmittedAt: p.SubmittedAt, ArrayIndex: -1})
		for k := range p.Nodes {
			nextJob++
			batch.Jobs = append(batch.Jobs, &store.Job{ID: nextJob, RunID: p.RunID, Num: k, Status: string(api.StatusSubmitted), Alloc: []byte("{}"), SubmittedAt: now})
		}
		flush(false)
	}
	flush(true)
}

// connectAll gives every node a stream, as if its agent were connected
// (what it is sent goes nowhere), so the scheduler sees it online.
func connectAll(b *testing.B, s *Server) {
	s.mu.Lock()
	nodes := s.Nodes()
	s.unlock()
	for _, n := range nodes {
		if _, err := s.connect(n.Name); err != nil {
			b.Fatal(err)
		}
	}
}

// fullPass asks for a full pass at once.
func fullPass(s *Server) {
	_, _, _ = s.queue(func() control.Input { return control.ResyncInput{} })
	s.wakeScheduler()
}

// bigCluster is a real server on SQLite loaded with `berth bench sched`'s
// largest cluster (100,000 waiting runs, 10,000 nodes connected but
// without agents), after the first passes started what fits: the cluster
// is full and a pass places next to nothing, as in a long queue's steady
// state. Its safety-net timer is off: passes run when a benchmark asks.
func bigCluster(b *testing.B) *harness {
	dir := b.TempDir()
	ctx := context.Background()
	now := time.Now().UTC()
	st, err := store.OpenSQLite(ctx, filepath.Join(dir, "berth.db"), store.SQLiteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	seedCluster(b, st, synth.Cluster(1, passNodes, passPending, now), now)
	st.Close()
	h := newHarnessCfg(b, dir, "127.0.0.1:0", func(c *Config) { c.ResyncEvery = time.Hour })
	s := h.srv
	connectAll(b, s)
	for c := s.metrics.cycles.Load(); s.metrics.cycles.Load() < c+2; {
		fullPass(s)
		time.Sleep(10 * time.Millisecond)
	}
	// A submission's answer comes once everything queued before it is
	// durable.
	if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(b, "type: task\nresources: {cpu: 1}\ncommands: [\"true\"]\n")}); err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkSubmitDuringPass measures what a submission waits while the
// scheduler runs full passes over bigCluster: each iteration is one
// submission through the HTTP API, timed from the call to its durable
// answer, while a goroutine keeps asking for full passes back to back.
// It reports the submissions' p50, p99 and worst, and the passes' mean
// length. Setting up takes a minute or two; run it with -benchtime 200x.
func BenchmarkSubmitDuringPass(b *testing.B) {
	h := bigCluster(b)
	s := h.srv
	ctx := context.Background()
	t := task(b, "type: task\nresources: {cpu: 1}\ncommands: [\"true\"]\n")
	if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: t}); err != nil { // and whatever is queued before it is durable
		b.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			fullPass(s)
			time.Sleep(time.Millisecond)
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	passes := s.metrics.cycles.Load()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: t}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		time.Sleep(2 * time.Millisecond) // spread the submissions over the passes
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	passes = s.metrics.cycles.Load() - passes
	close(stop)
	<-stopped
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	if passes > 0 {
		b.ReportMetric(ms(elapsed/time.Duration(passes)), "ms/pass")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPassPhases times a full pass over bigCluster step by step: its
// two turns under the state lock (prepare: candidates, holds and the copy;
// apply: the re-check and the plan's application) and what runs without
// the lock (the snapshot's waiting runs copied from their views,
// sched.Schedule, and sorting out which reasons changed). Run it with
// -benchtime 5x.
func BenchmarkPassPhases(b *testing.B) {
	h := bigCluster(b)
	s := h.srv
	// The scheduler loop's last pass (for bigCluster's submission) ends
	// before this benchmark takes passes in hand; nothing wakes it after.
	for c := int64(-1); c != s.metrics.cycles.Load(); time.Sleep(time.Second) {
		c = s.metrics.cycles.Load()
	}
	var prepare, compute, apply time.Duration
	b.ResetTimer()
	for range b.N {
		_, _, _ = s.queue(func() control.Input { return control.ResyncInput{} })
		t0 := time.Now()
		r, _, _ := s.queue(func() control.Input { return control.PassInput{} })
		p := r.(*control.Pass)
		t1 := time.Now()
		plan := p.Schedule()
		reasons := s.NewReasons(plan)
		t2 := time.Now()
		_, _, _ = s.queue(func() control.Input { return control.PlanInput{Pass: p, Plan: plan, Reasons: reasons} })
		t3 := time.Now()
		s.ForgetReasons(p, plan)
		prepare, compute, apply = prepare+t1.Sub(t0), compute+t2.Sub(t1), apply+t3.Sub(t2)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(ms(prepare), "prepare-ms")
	b.ReportMetric(ms(compute), "compute-ms")
	b.ReportMetric(ms(apply), "apply-ms")
}
