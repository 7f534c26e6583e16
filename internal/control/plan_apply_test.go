package control

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// passServer is a cluster fed inputs one at a time, at a fixed time: a
// test takes a pass's steps itself, and changes the state between them.
// What the cluster emits is dropped (nothing is persisted).
type passServer struct {
	*Cluster
	now time.Time
}

func newPassServer(t *testing.T) *passServer {
	t.Helper()
	return &passServer{Cluster: New(Config{StopGrace: time.Second}), now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

// feed steps the cluster with in and drops what it emitted.
func (s *passServer) feed(in Input) (any, error) {
	r, err := s.Step(s.now, in)
	s.Take()
	return r, err
}

// node adds a connected node of cpus CPUs.
func (s *passServer) node(name string, cpus int) {
	info := api.NodeInfo{Name: name, Addr: "127.0.0.1", CPUs: cpus, Memory: 8 << 30}
	body, _ := json.Marshal(info)
	if _, err := s.feed(RegisterInput{Info: info, Body: body}); err != nil {
		panic(err)
	}
	if _, err := s.feed(ConnectInput{Node: name}); err != nil {
		panic(err)
	}
}

// submit submits yaml as the admin; its dependencies name runs by ID.
func (s *passServer) submit(t *testing.T, yaml string) int64 {
	t.Helper()
	tk, err := spec.Parse("test.yml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for i := range tk.DependsOn {
		d := &tk.DependsOn[i]
		d.IDs = make([]int64, len(d.Runs))
		for k, ref := range d.Runs {
			d.IDs[k], _ = ParseRef(ref)
		}
	}
	body, _ := json.Marshal(tk)
	r, err := s.feed(SubmitInput{UserID: 1, User: "admin", ProjectID: 1, Project: "main", Task: tk, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return r.(store.Run).ID
}

func (s *passServer) stop(id int64, abort bool) error {
	_, err := s.feed(StopInput{ID: id, Abort: abort})
	return err
}

func (s *passServer) control(id int64, req api.ControlRequest, admin bool) error {
	_, err := s.feed(ControlInput{ID: id, Req: req, Admin: admin})
	return err
}

func (s *passServer) agentEvents(node string, evs []api.AgentEvent) (*api.AgentAck, error) {
	r, err := s.feed(ReportInput{Node: node, Events: evs})
	if err != nil {
		return nil, err
	}
	return r.(Report).Ack, nil
}

func (s *passServer) setRules(p *policy.Policy) { _, _ = s.feed(RulesInput{Rules: p}) }

// prepare and apply are a pass's two steps; between them the plan is
// computed (plan).
func (s *passServer) prepare(t *testing.T) *Pass {
	t.Helper()
	r, _ := s.feed(PassInput{})
	p, _ := r.(*Pass)
	if p == nil {
		t.Fatal("nothing to schedule")
	}
	return p
}

func plan(p *Pass) sched.Plan { return p.Schedule() }

func (s *passServer) apply(p *Pass, plan sched.Plan) {
	reasons := s.NewReasons(plan)
	_, _ = s.feed(PlanInput{Pass: p, Plan: plan, Reasons: reasons})
	s.ForgetReasons(p, plan)
}

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

// isFreed tells whether the Cycle's next pass is a full one (a Round
// prepared and never committed changes nothing).
func (s *passServer) isFreed() bool {
	full, _ := s.cycle.Prepare(s.now).Full()
	return full
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
				if _, err := s.feed(DrainInput{Node: "n1", Drain: &api.DrainRequest{Reason: "test"}, By: "admin"}); err != nil {
					t.Fatal(err)
				}
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"node offline": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.nodes["n1"].online = false
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"node gone": {
			between: func(t *testing.T, s *passServer, id int64) {
				delete(s.nodes, "n1")
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"node registered again smaller": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.nodes["n1"].info.CPUs = 1
			},
			want: runView{Status: string(api.StatusSubmitted), Waiting: true},
			full: true,
		},
		"policy reloaded": {
			between: func(t *testing.T, s *passServer, id int64) {
				s.setRules(policy.Empty())
			},
			// Queued again at the next pass, under the new policy.
			want: runView{Status: string(api.StatusSubmitted), Waiting: true, Fresh: true},
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
			ns := s.nodes["n1"]
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
		return s.jobsLocked(s.runs[id])[0].rec.ID
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
		jid := s.jobsLocked(s.runs[first])[0].rec.ID
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

// TestCycleFollowsChanges checks the waiting runs the scheduler's Cycle
// holds against entries built anew, after every kind of change to a
// waiting run.
func TestCycleFollowsChanges(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 1)
	blocker := s.submit(t, "type: task\nresources: {cpu: 1}\ncommands: [\"sleep 60\"]\n")
	s.pass(t)
	if got := s.run(blocker); got.Status != string(api.StatusProvisioning) {
		t.Fatalf("blocker: %+v, want it placed", got)
	}
	id := s.submit(t, "type: task\nresources: {cpu: 1}\nmax_duration: 1h\ncommands: [\"true\"]\n")
	dep := s.submit(t, "type: task\nresources: {cpu: 1}\ncommands: [\"true\"]\ndepends_on: [{afterok: \""+itoa(id)+"\"}]\n")
	// What the Cycle holds of the waiting runs once a pass has queued the
	// changes, and what they are, built anew (holds aside).
	queued := func(t *testing.T) map[int64]sched.Pending {
		if r, _ := s.feed(PassInput{}); r != nil {
			if p := r.(*Pass); p != nil {
				s.apply(p, plan(p))
			}
		}
		out := map[int64]sched.Pending{}
		for _, p := range s.cycle.Snapshot(s.now).Pending {
			p.Hold = ""
			out[p.RunID] = p
		}
		return out
	}
	built := func() map[int64]sched.Pending {
		out := map[int64]sched.Pending{}
		for id, rs := range s.pending {
			out[id] = s.pendingOf(rs, "")
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
		{"a full pass", func(t *testing.T) { _, _ = s.feed(ResyncInput{}) }},
	}
	for _, st := range steps {
		st.change(t)
		got := queued(t)
		if diff := cmp.Diff(built(), got); diff != "" {
			t.Errorf("after %s: the Cycle's waiting runs differ from new ones (-new +queued):\n%s", st.name, diff)
		}
		if err := s.Check(); err != nil {
			t.Errorf("after %s: %v", st.name, err)
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
	jid := s.jobsLocked(s.runs[r])[0].rec.ID
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

// TestCycleFollowsQueue changes the queue at random between passes —
// submissions, stops, holds, releases, updates, ends — and checks that
// every pass the Cycle prepares holds exactly the waiting runs, each as an
// entry built anew would show it, and the cluster's nodes and running runs
// (Check).
func TestCycleFollowsQueue(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	s.node("n2", 4)
	rng := rand.New(rand.NewPCG(1, 2))
	var runs []int64
	pick := func(waiting bool) (int64, bool) {
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
				js := s.runs[id].jobs[0]
				if _, err := s.agentEvents(js.rec.Node, []api.AgentEvent{{Type: "exited", JobID: js.rec.ID}}); err != nil {
					t.Fatal(err)
				}
			}
		case 6:
			_, _ = s.feed(ResyncInput{})
			fallthrough
		default:
			r, _ := s.feed(PassInput{})
			p, _ := r.(*Pass)
			if p == nil {
				continue
			}
			want := map[int64]sched.Pending{}
			for id, rs := range s.pending {
				want[id] = s.pendingOf(rs, "")
			}
			got := map[int64]sched.Pending{}
			for _, pd := range s.cycle.Snapshot(s.now).Pending {
				pd.Hold = ""
				got[pd.RunID] = pd
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("step %d: the Cycle's waiting runs (-waiting +queued):\n%s", step, diff)
			}
			s.apply(p, plan(p))
			if p.Full() {
				fullPasses++
			}
			if err := s.Check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	if fullPasses < 20 {
		t.Errorf("only %d full passes", fullPasses)
	}
}
