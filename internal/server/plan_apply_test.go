package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// passServer is a server on SQLite with its committer but without its
// scheduler loop: a test takes a pass's steps itself, and changes the
// state between them, with no timing involved.
type passServer struct {
	*Server
	user *store.User
}

func newPassServer(t *testing.T) *passServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "berth.db"), store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.committer(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	uid, err := st.EnsureUser(ctx, "admin", true)
	if err != nil {
		t.Fatal(err)
	}
	return &passServer{Server: s, user: &store.User{ID: uid, Name: "admin", Admin: true}}
}

// node adds a connected node of cpus CPUs (its stream goes nowhere).
func (s *passServer) node(name string, cpus int) {
	s.mu.Lock()
	defer s.unlock()
	ns := newNode(api.NodeInfo{Name: name, Addr: "127.0.0.1", CPUs: cpus, Memory: 8 << 30})
	ns.rec.Name = name
	ns.online = true
	s.nodes[name] = ns
	s.freed = true
}

func (s *passServer) submit(t *testing.T, yaml string) int64 {
	t.Helper()
	tk := task(t, yaml)
	ended, err := s.resolveDeps(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Server.submit(s.user, tk, ended, submitOpts{})
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// prepare and apply are a pass's two turns under the lock; between them
// the plan is computed off the lock (plan).
func (s *passServer) prepare(t *testing.T) *pass {
	t.Helper()
	s.mu.Lock()
	defer s.unlock()
	p := s.preparePassLocked(s.clock.Now())
	if p == nil {
		t.Fatal("nothing to schedule")
	}
	return p
}

func plan(p *pass) sched.Plan { return sched.Schedule(p.snapshot(), p.now) }

func (s *passServer) apply(p *pass, plan sched.Plan) { s.applyPlan(p, plan) }

// pass runs a whole pass.
func (s *passServer) pass(t *testing.T) {
	t.Helper()
	p := s.prepare(t)
	s.apply(p, plan(p))
}

// state is what a test asks of a run: its status, whether it waits, where
// its jobs are.
type runView struct {
	Status  string
	Waiting bool
	Fresh   bool
	Nodes   []string
}

func (s *passServer) run(id int64) runView {
	s.mu.Lock()
	defer s.unlock()
	rs, ok := s.runs[id]
	if !ok {
		return runView{Status: "ended"}
	}
	v := runView{Status: rs.rec.Status, Waiting: s.pending[id] != nil, Fresh: s.fresh[id] != nil}
	for _, js := range rs.jobs {
		if js.rec.Node != "" {
			v.Nodes = append(v.Nodes, js.rec.Node)
		}
	}
	return v
}

func (s *passServer) isFreed() bool {
	s.mu.Lock()
	defer s.unlock()
	return s.freed
}

// TestPlanRecheckedAtApply changes the state between a pass's snapshot and
// the application of its plan (one run, asked to start on n1): a start that
// no longer holds is dropped, the run waits, and a full pass follows.
func TestPlanRecheckedAtApply(t *testing.T) {
	const yaml = "type: task\nresources: {cpu: 2}\ncommands: [\"true\"]\n"
	tests := map[string]struct {
		between func(t *testing.T, s *passServer, id int64)
		want    runView
		full    bool // the next pass must be a full one
	}{
		"nothing changed": {
			between: func(*testing.T, *passServer, int64) {},
			want:    runView{Status: string(api.StatusProvisioning), Nodes: []string{"n1"}},
		},
		"run stopped": {
			between: func(t *testing.T, s *passServer, id int64) {
				if err := s.stop(id, false); err != nil {
					t.Fatal(err)
				}
			},
			want: runView{Status: "ended"},
			full: true,
		},
		"run held": {
			between: func(t *testing.T, s *passServer, id int64) {
				if err := s.control(id, api.ControlRequest{Action: "hold"}, true); err != nil {
					t.Fatal(err)
				}
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true, Fresh: true},
			full: true,
		},
		"run updated": {
			between: func(t *testing.T, s *passServer, id int64) {
				p := 90
				if err := s.control(id, api.ControlRequest{Action: "update", Priority: &p}, true); err != nil {
					t.Fatal(err)
				}
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true, Fresh: true},
			full: true,
		},
		"node drained": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.mu.Lock()
				ns := s.nodes["n1"]
				ns.condition().Manual = &api.NodeDrain{Reason: "test"}
				s.saveCondLocked(ns)
				done := s.flushLocked()
				s.unlock()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"node offline": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.mu.Lock()
				s.nodes["n1"].online = false
				s.unlock()
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"node gone": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.mu.Lock()
				delete(s.nodes, "n1")
				s.unlock()
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"node registered again smaller": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.mu.Lock()
				s.nodes["n1"].info.CPUs = 1
				s.unlock()
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"policy reloaded": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.setRules(policy.Empty())
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newPassServer(t)
			s.node("n1", 4)
			id := s.submit(t, yaml)
			p := s.prepare(t)
			pl := plan(p)
			if len(pl.Starts) != 1 || pl.Starts[0].RunID != id || pl.Starts[0].Placements[0].Node != "n1" {
				t.Fatalf("plan %+v: want run %d started on n1", pl.Starts, id)
			}
			tc.between(t, s, id)
			s.apply(p, pl)
			if diff := cmp.Diff(tc.want, s.run(id)); diff != "" {
				t.Errorf("run after the plan (-want +got):\n%s", diff)
			}
			if got := s.isFreed(); got != tc.full {
				t.Errorf("a full pass next: %v, want %v", got, tc.full)
			}
			s.mu.Lock()
			ns := s.nodes["n1"]
			s.unlock()
			if ns != nil && tc.want.Nodes == nil && len(ns.jobs) > 0 {
				t.Errorf("n1 holds %d jobs, want none", len(ns.jobs))
			}
		})
	}
}

// TestPlanStartTakesWhatIsFree applies a crafted plan whose two starts
// both take the whole node: the second no longer fits when its turn comes.
func TestPlanStartTakesWhatIsFree(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	a := s.submit(t, "type: task\nresources: {cpu: 4}\ncommands: [\"true\"]\n")
	b := s.submit(t, "type: task\nresources: {cpu: 4}\ncommands: [\"true\"]\n")
	p := s.prepare(t)
	jobOf := func(id int64) int64 {
		s.mu.Lock()
		defer s.unlock()
		return s.runs[id].jobs[0].rec.ID
	}
	start := func(id int64) sched.Start {
		return sched.Start{RunID: id, Placements: []sched.Placement{{JobID: jobOf(id), Node: "n1", CPUs: 4, Memory: 1 << 20}}}
	}
	s.apply(p, sched.Plan{Starts: []sched.Start{start(a), start(b)}})
	if got := s.run(a); got.Status != string(api.StatusProvisioning) {
		t.Errorf("run a: %+v, want it placed", got)
	}
	if got, want := s.run(b), (runView{Status: string(api.StatusSubmitted), Waiting: true}); !cmp.Equal(got, want) {
		t.Errorf("run b: %+v, want %+v", got, want)
	}
	if !s.isFreed() {
		t.Error("no full pass asked for after a dropped start")
	}
}

// TestPlanDropsWhatEnded applies a plan whose reasons, estimates and
// preemptions name runs that ended, or are being stopped, while it was
// computed: nothing of them is applied.
func TestPlanDropsWhatEnded(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	victim := s.submit(t, "type: task\nresources: {cpu: 4}\ncommands: [\"sleep 60\"]\n")
	s.pass(t)
	if got := s.run(victim); got.Status != string(api.StatusProvisioning) {
		t.Fatalf("victim: %+v, want it placed", got)
	}
	waiting := s.submit(t, "type: task\nresources: {cpu: 4}\ncommands: [\"true\"]\n")
	gone := s.submit(t, "type: task\nresources: {cpu: 4}\ncommands: [\"true\"]\n")
	p := s.prepare(t)
	if err := s.stop(gone, false); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour).UTC()
	s.apply(p, sched.Plan{
		Reasons:     map[int64]string{gone: sched.ReasonResources, waiting: sched.ReasonPriority},
		Estimates:   map[int64]time.Time{gone: later, waiting: later},
		BlockedBy:   map[int64][]int64{gone: {victim}, waiting: {victim}},
		Preemptions: []sched.Preemption{{Victim: victim, By: gone, Mode: sched.Requeue}},
	})
	s.mu.Lock()
	defer s.unlock()
	if rs := s.runs[victim]; rs.rec.StopReq != 0 {
		t.Errorf("victim stop_req %d: preempted for a run that had ended", rs.rec.StopReq)
	}
	if rs := s.runs[waiting]; rs.rec.Reason != sched.ReasonPriority || !rs.rec.EstimatedStart.Equal(later) {
		t.Errorf("waiting run: reason %q, estimate %v; want the plan's", rs.rec.Reason, rs.rec.EstimatedStart)
	}
	if _, ok := s.runs[gone]; ok {
		t.Error("the stopped run is active again")
	}
}

// TestPassKeepsWhatHappensMeanwhile submits, and frees, while a pass
// computes: the next pass sees both.
func TestPassKeepsWhatHappensMeanwhile(t *testing.T) {
	t.Run("submission", func(t *testing.T) {
		s := newPassServer(t)
		s.node("n1", 4)
		a := s.submit(t, "type: task\nresources: {cpu: 1}\ncommands: [\"true\"]\n")
		p := s.prepare(t)
		b := s.submit(t, "type: task\nresources: {cpu: 1}\ncommands: [\"true\"]\n")
		s.apply(p, plan(p))
		if got := s.run(a); got.Status != string(api.StatusProvisioning) {
			t.Errorf("a: %+v, want it placed", got)
		}
		if got := s.run(b); !got.Fresh || !got.Waiting {
			t.Fatalf("b, submitted during the pass: %+v, want it fresh", got)
		}
		s.pass(t)
		if got := s.run(b); got.Status != string(api.StatusProvisioning) {
			t.Errorf("b after the next pass: %+v, want it placed", got)
		}
	})
	t.Run("release", func(t *testing.T) {
		s := newPassServer(t)
		s.node("n1", 2)
		first := s.submit(t, "type: task\nresources: {cpu: 2}\ncommands: [\"true\"]\n")
		s.pass(t)
		w := s.submit(t, "type: task\nresources: {cpu: 2}\ncommands: [\"true\"]\n")
		p := s.prepare(t)
		// first ends while the pass computes: its CPUs are free.
		s.mu.Lock()
		jid := s.runs[first].jobs[0].rec.ID
		s.unlock()
		if _, err := s.agentEvents("n1", []api.AgentEvent{{Type: "exited", JobID: jid}}); err != nil {
			t.Fatal(err)
		}
		s.apply(p, plan(p))
		if got := s.run(w); got.Status != string(api.StatusSubmitted) {
			t.Fatalf("w: %+v, want it waiting (the plan saw n1 full)", got)
		}
		if !s.isFreed() {
			t.Fatal("the release during the pass was lost")
		}
		s.pass(t)
		if got := s.run(w); got.Status != string(api.StatusProvisioning) {
			t.Errorf("w after the next pass: %+v, want it placed", got)
		}
	})
}

// TestViewsFollowChanges checks the waiting runs' kept views against
// views built anew, after every kind of change to a waiting run.
func TestViewsFollowChanges(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 1)
	blocker := s.submit(t, "type: task\nresources: {cpu: 1}\ncommands: [\"sleep 60\"]\n")
	s.pass(t)
	if got := s.run(blocker); got.Status != string(api.StatusProvisioning) {
		t.Fatalf("blocker: %+v, want it placed", got)
	}
	id := s.submit(t, "type: task\nresources: {cpu: 1}\nmax_duration: 1h\ncommands: [\"true\"]\n")
	dep := s.submit(t, "type: task\nresources: {cpu: 1}\ncommands: [\"true\"]\ndepends_on: [{afterok: \""+itoa(id)+"\"}]\n")
	fresh := func() sched.Snapshot {
		s.mu.Lock()
		defer s.unlock()
		for _, rs := range s.pending {
			rs.view = nil
		}
		return s.snapshotLocked(s.pending, nil, s.clock.Now())
	}
	kept := func() sched.Snapshot {
		s.mu.Lock()
		defer s.unlock()
		return s.snapshotLocked(s.pending, nil, s.clock.Now())
	}
	byID := func(snap sched.Snapshot) map[int64]sched.Pending {
		out := map[int64]sched.Pending{}
		for _, p := range snap.Pending {
			out[p.RunID] = p
		}
		return out
	}
	ctl := func(req api.ControlRequest) func(t *testing.T) {
		return func(t *testing.T) {
			if err := s.control(id, req, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	prio, nice, limit := 77, int64(5), int64(600)
	steps := []struct {
		name   string
		change func(t *testing.T)
	}{
		{"hold", ctl(api.ControlRequest{Action: "hold"})},
		{"release", ctl(api.ControlRequest{Action: "release"})},
		{"priority", ctl(api.ControlRequest{Action: "update", Priority: &prio})},
		{"nice", ctl(api.ControlRequest{Action: "update", Nice: &nice})},
		{"time limit", ctl(api.ControlRequest{Action: "update", TimeLimit: &limit})},
		{"policy", func(*testing.T) { s.setRules(policy.Empty()) }},
		{"a pass", func(t *testing.T) { s.pass(t) }},
	}
	for _, st := range steps {
		st.change(t)
		got := byID(kept())
		if diff := cmp.Diff(byID(fresh()), got); diff != "" {
			t.Errorf("after %s: kept views differ from new ones (-new +kept):\n%s", st.name, diff)
		}
		if _, ok := got[dep]; !ok {
			t.Errorf("after %s: run %d missing", st.name, dep)
		}
	}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// TestHeldArrayIsNotARun holds an array (its own run goes in fresh with
// its tasks): the pass schedules the tasks, never the array's own run.
func TestHeldArrayIsNotARun(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 1)
	arr := s.submit(t, "type: task\narray: \"0-3\"\nresources: {cpu: 1}\ncommands: [\"true\"]\n")
	for _, action := range []string{"hold", "release"} {
		if err := s.control(arr, api.ControlRequest{Action: action}, true); err != nil {
			t.Fatal(err)
		}
		s.pass(t)
		if got := s.run(arr); got.Status == "ended" || got.Waiting {
			t.Fatalf("array after %s and a pass: %+v", action, got)
		}
	}
}

// TestReasonAfterRequeue: a run waits held (JobHeldUser), is released and
// starts, is requeued and held again: it gets its reason again, although
// the plans said the same of it before it started.
func TestReasonAfterRequeue(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 1)
	control := func(id int64, action string) {
		t.Helper()
		if err := s.control(id, api.ControlRequest{Action: action}, true); err != nil {
			t.Fatal(err)
		}
	}
	reason := func(id int64) string {
		s.mu.Lock()
		defer s.unlock()
		return s.runs[id].rec.Reason
	}
	r := s.submit(t, "type: task\nresources: {cpu: 1}\ncommands: [\"sleep 60\"]\n")
	control(r, "hold")
	s.pass(t)
	if got := reason(r); got != string(lifecycle.ReasonHeldUser) {
		t.Fatalf("r waits with reason %q, want %q", got, string(lifecycle.ReasonHeldUser))
	}
	control(r, "release")
	s.pass(t)
	if got := s.run(r); got.Status != string(api.StatusProvisioning) {
		t.Fatalf("r: %+v, want it placed", got)
	}
	control(r, "requeue")
	s.mu.Lock()
	jid := s.runs[r].jobs[0].rec.ID
	s.unlock()
	if _, err := s.agentEvents("n1", []api.AgentEvent{{Type: "exited", JobID: jid, Reason: "stopped"}}); err != nil {
		t.Fatal(err)
	}
	if got := s.run(r); !got.Waiting || reason(r) != "" {
		t.Fatalf("r after its requeue: %+v, reason %q", got, reason(r))
	}
	control(r, "hold")
	s.pass(t)
	if got := reason(r); got != string(lifecycle.ReasonHeldUser) {
		t.Errorf("r held again waits with reason %q, want %q", got, string(lifecycle.ReasonHeldUser))
	}
}

// TestWaitingIndexFollowsQueue changes the queue at random between passes
// — submissions, stops, holds, releases, updates, ends — and checks that
// every full pass schedules exactly the waiting runs, each as a view built
// anew would show it.
func TestWaitingIndexFollowsQueue(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	s.node("n2", 4)
	rng := rand.New(rand.NewPCG(1, 2))
	var runs []int64
	pick := func(waiting bool) (int64, bool) {
		s.mu.Lock()
		defer s.unlock()
		var ids []int64
		for _, id := range runs {
			if rs, ok := s.runs[id]; ok && (s.pending[id] != nil) == waiting && (waiting || len(rs.jobs) > 0 && rs.jobs[0].rec.Node != "") {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return 0, false
		}
		return ids[rng.IntN(len(ids))], true
	}
	fullPasses := 0
	for step := range 400 {
		switch rng.IntN(8) {
		case 0, 1:
			runs = append(runs, s.submit(t, fmt.Sprintf("type: task\nresources: {cpu: %d}\ncommands: [\"true\"]\n", 1+rng.IntN(3))))
		case 2:
			if id, ok := pick(true); ok {
				if err := s.stop(id, false); err != nil {
					t.Fatal(err)
				}
			}
		case 3:
			if id, ok := pick(true); ok {
				_ = s.control(id, api.ControlRequest{Action: []string{"hold", "release"}[rng.IntN(2)]}, true)
			}
		case 4:
			if id, ok := pick(true); ok {
				p := rng.IntN(101)
				if err := s.control(id, api.ControlRequest{Action: "update", Priority: &p}, true); err != nil {
					t.Fatal(err)
				}
			}
		case 5:
			if id, ok := pick(false); ok {
				s.mu.Lock()
				js := s.runs[id].jobs[0]
				s.unlock()
				if _, err := s.agentEvents(js.rec.Node, []api.AgentEvent{{Type: "exited", JobID: js.rec.ID}}); err != nil {
					t.Fatal(err)
				}
			}
		case 6:
			s.mu.Lock()
			s.freed = true
			s.unlock()
			fallthrough
		default:
			s.mu.Lock()
			p := s.preparePassLocked(s.clock.Now())
			var want map[int64]sched.Pending
			if p != nil && p.full {
				fullPasses++
				want = map[int64]sched.Pending{}
				for id, rs := range s.pending {
					v := newView(rs, p.rules)
					want[id] = v.pending(make([]int64, v.nodes))
				}
			}
			s.unlock()
			if p == nil {
				continue
			}
			snap := p.snapshot()
			if want != nil {
				got := map[int64]sched.Pending{}
				for _, pd := range snap.Pending {
					pd.Hold = ""
					got[pd.RunID] = pd
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("step %d: the full pass's waiting runs (-waiting +scheduled):\n%s", step, diff)
				}
			}
			s.apply(p, sched.Schedule(snap, p.now))
		}
	}
	if fullPasses < 20 {
		t.Errorf("only %d full passes", fullPasses)
	}
}
