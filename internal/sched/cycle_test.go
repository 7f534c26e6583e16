package sched

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// cycleWorld drives a Cycle with random changes, the way a server or the
// simulator does: runs queued, changed, cancelled, started as plans say,
// preempted, ended with their usage, nodes changing, and time moving on
// (or not) between passes.
type cycleWorld struct {
	rng   *rand.Rand
	c     *Cycle
	now   time.Time
	next  int64
	nodes []Node
	rich  bool // QOS with preemption, limits, users, array throttles
}

func newCycleWorld(seed uint64, policy Policy, weights, rich bool) *cycleWorld {
	rng := rand.New(rand.NewPCG(seed, 99))
	cfg := CycleConfig{Policy: policy, HalfLife: time.Hour, StartsOnly: seed%5 == 2}
	if weights {
		w := DefaultWeights
		cfg.Weights = &w
	}
	if rich {
		cfg.QOS = map[string]QOS{"high": {Priority: 100, Preempt: []string{"low"}, Mode: Requeue}, "low": {}, "normal": {Priority: 10}}
		cfg.Limits = map[LimitKey]Limits{{ScopeUser, "u1"}: {Jobs: 2}, {ScopeQOSUser, "normal"}: {TRES: TRES{CPUs: 6}}}
		if rng.IntN(2) == 0 {
			cfg.Shares = &Shares{Projects: map[string]int{"p": 3, "q": 1}, Users: map[string]map[string]int{"p": {"u1": 2}}}
		}
		if rng.IntN(2) == 0 {
			topo, err := NewTopology([]Switch{{Name: "a", Nodes: []string{"n0", "n1"}}, {Name: "b", Nodes: []string{"n2", "n3"}}, {Name: "top", Switches: []string{"a", "b"}}})
			if err != nil {
				panic(err)
			}
			cfg.Topology = topo
		}
	}
	w := &cycleWorld{rng: rng, c: NewCycle(cfg), now: t0, next: 1, rich: rich}
	for i := range 1 + rng.IntN(4) {
		var gpus []GPU
		for g := range rng.IntN(3) {
			gpus = append(gpus, t4(g))
		}
		n := aNode(fmt.Sprintf("n%d", i), 2+rng.IntN(7), Bytes(8+rng.IntN(8))*gb, gpus...)
		if rich && rng.IntN(3) == 0 {
			n.Blocks = 2
		}
		w.nodes = append(w.nodes, n)
		w.c.SetNode(n)
	}
	return w
}

func (w *cycleWorld) pending() Pending {
	rng := w.rng
	p := aRun(w.next, 1+rng.IntN(4)).limit(1 + rng.IntN(120))
	w.next++
	p.SubmittedAt = w.now.Add(-time.Duration(rng.IntN(3)) * time.Second)
	p.Priority = rng.IntN(3)
	if rng.IntN(4) == 0 {
		p = p.nodes(2)
	}
	if rng.IntN(4) == 0 {
		p = p.gpu(GPURequest{Count: 1 + rng.IntN(2)})
	}
	if rng.IntN(10) == 0 {
		p.Limit = 0
	}
	users := []string{"u1", "u2", "u3"}
	p.User, p.Project = users[rng.IntN(3)], []string{"p", "q"}[rng.IntN(2)]
	if w.rich {
		p.QOS = []string{"high", "low", "normal"}[rng.IntN(3)]
		if rng.IntN(5) == 0 {
			p.Array = "a1"
		}
		if rng.IntN(10) == 0 {
			p.Hold = "Dependency"
		}
		p.Request = p.req()
		p.Request.Exclusive = rng.IntN(6) == 0
		if rng.IntN(8) == 0 {
			g := []Group{{Nodes: 1, Request: Request{CPUs: 1}}, {Nodes: 1, Request: *p.Request}}
			p = p.nodes(2)
			p.Groups = g
		}
	}
	return p
}

// change makes one random change.
func (w *cycleWorld) change() {
	rng, c := w.rng, w.c
	switch k := rng.IntN(20); {
	case k < 8:
		c.Queue(w.pending())
	case k < 10 && c.Waiting() > 0: // a change of a waiting run
		p := *c.pending[rng.IntN(c.Waiting())]
		switch rng.IntN(3) {
		case 0:
			p.Priority = rng.IntN(3)
		case 1:
			p.Hold = map[bool]string{true: "JobHeldUser"}[p.Hold == ""]
		case 2:
			p.Limit = time.Duration(1+rng.IntN(120)) * time.Second
		}
		c.Queue(p)
	case k < 11 && c.Waiting() > 0:
		c.Dequeue(c.pending[rng.IntN(c.Waiting())].RunID)
	case k < 15 && c.Holding() > 0: // a run ends, early or late
		r := c.running[rng.IntN(c.Holding())]
		cpus := 0
		for _, pl := range r.Placements {
			cpus += pl.CPUs
		}
		c.AddUsage(Account{r.Project, r.User}, float64(cpus)*float64(1+rng.IntN(100)), w.now)
		c.End(r.RunID)
	case k < 16 && c.Holding() > 0:
		c.Stopping(c.running[rng.IntN(c.Holding())].RunID, w.now.Add(time.Duration(rng.IntN(30))*time.Second))
	case k < 17:
		n := w.nodes[rng.IntN(len(w.nodes))]
		n.Online = rng.IntN(4) > 0
		c.SetNode(n)
	case k < 18 && w.rich:
		c.SetArrayLimit("a1", rng.IntN(3))
	default:
		// time moves on, or not
		if rng.IntN(2) == 0 {
			w.now = w.now.Add(time.Duration(1+rng.IntN(40)) * time.Second)
		}
	}
}

// apply applies a plan as a caller would: the starts, and the victims'
// stops.
func (w *cycleWorld) apply(t *testing.T, plan Plan) {
	for _, st := range plan.Starts {
		if err := w.c.Start(st, w.now); err != nil {
			t.Fatal(err)
		}
	}
	for _, pr := range plan.Preemptions {
		w.c.Stopping(pr.Victim, w.now.Add(10*time.Second))
	}
}

// An incremental pass decides what a full pass over the same state
// decides: the same starts, preemptions and reservations (when, where),
// and the same reason and blockers for every run it considers. The full
// pass is Schedule of the Cycle's whole snapshot; a Cycle that plans
// starts only (one seed in five) makes the same starts, preemptions and
// reservations. 300 seeds (30 under the race detector);
// BERTH_PROPERTY_SEEDS for more.
func TestCycleIncrementalIsFull(t *testing.T) {
	seeds := uint64(300)
	if raceEnabled {
		seeds = 30
	}
	if n, err := strconv.ParseUint(os.Getenv("BERTH_PROPERTY_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	incremental, passes := 0, 0
	for seed := range seeds {
		for _, policy := range []Policy{FCFS, EASY, Conservative, Berth} {
			weights, rich := seed%3 == 0, seed%2 == 1
			w := newCycleWorld(seed, policy, weights, rich)
			for step := range 60 {
				for range 1 + w.rng.IntN(4) {
					w.change()
				}
				snap := w.c.Snapshot(w.now)
				want := Schedule(snap, w.now)
				r := w.c.Prepare(w.now)
				got := r.Compute()
				w.c.Commit(r)
				passes++
				if full, _ := r.Full(); !full {
					incremental++
				}
				ctx := fmt.Sprintf("seed %d policy %v weights %v rich %v step %d (full %v)", seed, policy, weights, rich, step, r.full)
				if diff := cmp.Diff(want.Starts, got.Starts); diff != "" {
					t.Fatalf("%s: starts (-full +cycle):\n%s", ctx, diff)
				}
				if diff := cmp.Diff(want.Preemptions, got.Preemptions); diff != "" {
					t.Fatalf("%s: preemptions (-full +cycle):\n%s", ctx, diff)
				}
				if diff := cmp.Diff(want.Reserved, got.Reserved); diff != "" {
					t.Fatalf("%s: reserved (-full +cycle):\n%s", ctx, diff)
				}
				if w.c.cfg.StartsOnly {
					if len(got.Reasons)+len(got.Estimates)+len(got.BlockedBy) > 0 {
						t.Fatalf("%s: a plan of starts only has reasons, estimates or blockers", ctx)
					}
					w.apply(t, got)
					continue
				}
				if diff := cmp.Diff(want.Estimates, got.Estimates); diff != "" {
					t.Fatalf("%s: estimates (-full +cycle):\n%s", ctx, diff)
				}
				for id, reason := range got.Reasons {
					if want.Reasons[id] != reason || !slices.Equal(want.BlockedBy[id], got.BlockedBy[id]) {
						t.Fatalf("%s: run %d: %s behind %v, a full pass says %s behind %v", ctx, id, reason, got.BlockedBy[id], want.Reasons[id], want.BlockedBy[id])
					}
				}
				if r.full && len(got.Reasons) != len(want.Reasons) {
					t.Fatalf("%s: a full pass gives %d reasons, Schedule %d", ctx, len(got.Reasons), len(want.Reasons))
				}
				w.apply(t, got)
			}
		}
	}
	t.Logf("%d passes, %d incremental", passes, incremental)
	if incremental < passes/5 {
		t.Errorf("only %d of %d passes were incremental", incremental, passes)
	}
}

// The Cycle's fairshare, kept change by change, is newFairshare's over the
// same usage and queue, to the last bit.
func TestCycleFairshareIsRebuilt(t *testing.T) {
	for seed := range uint64(200) {
		w := newCycleWorld(seed, Berth, true, true)
		for range 80 {
			w.change()
			snap := w.c.Snapshot(w.now)
			base := w.c.orderBase()
			fs := newFairshare(&snap)
			for _, e := range base.fair {
				if want := fs.factor(e.w.a); e.factor != want {
					t.Fatalf("seed %d: %v: factor %v, rebuilt %v", seed, e.w.a, e.factor, want)
				}
			}
		}
	}
}

// The Cycle's usage decays with its half-life however far apart its uses
// are, and survives moving its base (every 512 half-lives).
func TestCycleUsageDecays(t *testing.T) {
	c := NewCycle(CycleConfig{Policy: Berth, HalfLife: time.Hour})
	a, b := Account{User: "a"}, Account{User: "b"}
	c.AddUsage(a, 100, t0)
	c.AddUsage(b, 100, t0.Add(time.Hour))
	u := c.Usage(t0.Add(2 * time.Hour))
	if u[a] != 25 || u[b] != 50 {
		t.Errorf("usage %v, want a 25 and b 50", u)
	}
	far := t0.Add(600 * time.Hour)
	c.AddUsage(a, 8, far)
	u = c.Usage(far)
	if u[a] != 8 || u[b] != 100*0x1p-599 {
		t.Errorf("usage after 600 half-lives %v, want a 8 and b %v", u, 100*0x1p-599)
	}
	c = NewCycle(CycleConfig{Policy: Berth})
	c.AddUsage(a, 3, t0)
	c.AddUsage(a, 4, far)
	if u := c.Usage(far.Add(time.Hour)); u[a] != 7 {
		t.Errorf("usage without decay %v, want 7", u)
	}
}

// A Round computed after more changes came in still commits only what it
// saw: the runs queued meanwhile are considered by the next pass.
func TestCycleRoundSeesItsOwnChanges(t *testing.T) {
	c := NewCycle(CycleConfig{Policy: EASY})
	c.SetNode(aNode("n", 4, 0))
	c.Queue(aRun(1, 4).limit(10))
	plan := c.Pass(at(0))
	if err := c.Start(plan.Starts[0], at(0)); err != nil {
		t.Fatal(err)
	}
	c.Queue(aRun(2, 2).limit(10)) // waits: run 1 holds the node
	r := c.Prepare(at(1))
	c.Queue(aRun(3, 1).limit(10)) // after Prepare
	if plan := r.Compute(); len(plan.Starts) != 0 || plan.Reasons[2] != ReasonResources {
		t.Fatalf("plan %+v", plan)
	}
	c.Commit(r)
	c.End(1)
	plan = c.Pass(at(2))
	var started []int64
	for _, st := range plan.Starts {
		started = append(started, st.RunID)
	}
	if !slices.Equal(started, []int64{2, 3}) {
		t.Errorf("started %v, want [2 3]", started)
	}
}

// With Drift, a pass at another time than the last full one is still
// incremental while the drift lasts (the server's rule today), and full
// after; without it, a pass under multifactor priority at another time is
// full.
func TestCycleDrift(t *testing.T) {
	for drift, want := range map[time.Duration][]bool{0: {true, true, true}, time.Minute: {true, false, true}} {
		w := DefaultWeights
		c := NewCycle(CycleConfig{Policy: Berth, Weights: &w, Drift: drift})
		c.SetNode(aNode("n", 4, 0))
		c.Queue(aRun(1, 4).limit(600))
		c.Queue(aRun(2, 4).limit(600))
		var got []bool
		for i, sec := range []int{0, 10, 70} {
			if i > 0 {
				c.Queue(aRun(int64(10+i), 1).limit(60))
			}
			r := c.Prepare(at(sec))
			plan := r.Compute()
			c.Commit(r)
			for _, st := range plan.Starts {
				if err := c.Start(st, at(sec)); err != nil {
					t.Fatal(err)
				}
			}
			full, _ := r.Full()
			got = append(got, full)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("drift %v: full passes (-want +got):\n%s", drift, diff)
		}
	}
}
