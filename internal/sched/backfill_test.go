package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func (p Pending) limit(sec int) Pending { p.Limit = time.Duration(sec) * time.Second; return p }

func holding(id int64, node string, cpus int, endSec int, gpus ...int) Running {
	return Running{RunID: id, End: at(endSec), Placements: []Placement{{JobID: id * 10, Node: node, CPUs: cpus, GPUs: gpus}}}
}

// busy is a node with some of its CPUs (and GPUs) held by runs.
func busy(n Node, held ...Running) Node {
	for _, r := range held {
		for _, p := range r.Placements {
			if p.Node == n.Name {
				n.FreeCPUs -= p.CPUs
				n.FreeGPUs = without(n.FreeGPUs, p.GPUs)
			}
		}
	}
	return n
}

func TestPolicies(t *testing.T) {
	// An 8-CPU node, 4 CPUs held until t=10. A (5 CPUs, 100 s) waits for
	// t=10; C (3 CPUs, 200 s) fits beside A's reservation; B (6 CPUs, 50 s)
	// can only go at t=110, and a reservation for it leaves C no room then.
	r1 := holding(1, "n", 4, 10)
	snap := Snapshot{
		Nodes:   []Node{busy(aNode("n", 8, 0), r1)},
		Running: []Running{r1},
		Pending: []Pending{aRun(2, 5).limit(100), aRun(3, 6).limit(50), aRun(4, 3).limit(200)},
	}
	startC := []Start{{RunID: 4, Placements: []Placement{{JobID: 40, Node: "n", CPUs: 3}}}}
	tests := map[Policy]struct {
		starts    []Start
		reasons   map[int64]string
		estimates map[int64]time.Time
		reserved  []int64
		blockedBy map[int64][]int64
	}{
		FCFS: {
			reasons:   map[int64]string{2: ReasonResources, 3: ReasonPriority, 4: ReasonPriority},
			estimates: map[int64]time.Time{2: at(10)},
			reserved:  []int64{2},
			blockedBy: map[int64][]int64{2: {1}, 3: {2}, 4: {2}},
		},
		EASY: {
			starts:    startC,
			reasons:   map[int64]string{2: ReasonResources, 3: ReasonPriority},
			estimates: map[int64]time.Time{2: at(10)},
			reserved:  []int64{2},
			blockedBy: map[int64][]int64{2: {1}, 3: {2}},
		},
		Conservative: {
			reasons:   map[int64]string{2: ReasonResources, 3: ReasonPriority, 4: ReasonPriority},
			estimates: map[int64]time.Time{2: at(10), 3: at(110), 4: at(160)},
			reserved:  []int64{2, 3, 4},
			blockedBy: map[int64][]int64{2: {1}, 3: {1, 2}, 4: {1, 2, 3}},
		},
	}
	for policy, tc := range tests {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			s := snap
			s.Policy = policy
			got := Schedule(s, at(0))
			if diff := cmp.Diff(tc.starts, got.Starts); diff != "" {
				t.Errorf("starts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.reasons, got.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.estimates, got.Estimates); diff != "" {
				t.Errorf("estimates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.reserved, got.Reserved); diff != "" {
				t.Errorf("reserved (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.blockedBy, got.BlockedBy); diff != "" {
				t.Errorf("blocked by (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackfillRespectsReservations(t *testing.T) {
	tests := map[string]struct {
		snap       Snapshot
		wantStarts []int64
		estimates  map[int64]time.Time
	}{
		"a multi-node run waits for both nodes; a small run takes the third": {
			snap: func() Snapshot {
				r1, r2 := holding(1, "n1", 2, 20), holding(2, "n2", 2, 30)
				return Snapshot{
					Nodes:   []Node{busy(aNode("n1", 2, 0), r1), busy(aNode("n2", 2, 0), r2), aNode("n3", 2, 0)},
					Running: []Running{r1, r2},
					Pending: []Pending{aRun(3, 2).nodes(2).limit(10), aRun(4, 2).limit(15)},
				}
			}(),
			wantStarts: []int64{4},
			estimates:  map[int64]time.Time{3: at(20)},
		},
		"GPUs reserved by index: a short run may use the free GPU, a long one may not": {
			snap: func() Snapshot {
				r1 := holding(1, "g", 1, 50, 0)
				return Snapshot{
					Nodes:   []Node{busy(aNode("g", 8, 0, t4(0), t4(1)), r1)},
					Running: []Running{r1},
					Pending: []Pending{
						aRun(2, 1).gpu(GPURequest{Count: 2}).limit(10),
						aRun(3, 1).gpu(GPURequest{Count: 1}).limit(100),
						aRun(4, 1).gpu(GPURequest{Count: 1}).limit(40),
					},
				}
			}(),
			wantStarts: []int64{4},
			estimates:  map[int64]time.Time{2: at(50)},
		},
		"a run without a time limit never ends for planning: no estimate behind it": {
			snap: func() Snapshot {
				r1 := Running{RunID: 1, Placements: []Placement{{Node: "n", CPUs: 2}}}
				return Snapshot{
					Nodes:   []Node{busy(aNode("n", 2, 0), r1)},
					Running: []Running{r1},
					Pending: []Pending{aRun(2, 1).limit(10)},
				}
			}(),
			estimates: map[int64]time.Time{},
		},
		"an overdue run is expected to end at once": {
			snap: func() Snapshot {
				r1 := holding(1, "n", 2, -5)
				return Snapshot{
					Nodes:   []Node{busy(aNode("n", 2, 0), r1)},
					Running: []Running{r1},
					Pending: []Pending{aRun(2, 2).limit(10), aRun(3, 1).limit(1)},
				}
			}(),
			estimates: map[int64]time.Time{2: at(0).Add(time.Nanosecond)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Schedule(tc.snap, at(0))
			var ids []int64
			for _, st := range got.Starts {
				ids = append(ids, st.RunID)
			}
			if diff := cmp.Diff(tc.wantStarts, ids); diff != "" {
				t.Errorf("started (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.estimates, got.Estimates); diff != "" {
				t.Errorf("estimates (-want +got):\n%s", diff)
			}
		})
	}
}

// randomSnapshot builds a small random cluster with running and pending runs.
func randomSnapshot(rng *rand.Rand, policy Policy) Snapshot {
	s := Snapshot{Policy: policy}
	nodes := 1 + rng.IntN(4)
	for i := range nodes {
		var gpus []GPU
		for g := range rng.IntN(3) {
			gpus = append(gpus, t4(g))
		}
		s.Nodes = append(s.Nodes, aNode(fmt.Sprintf("n%d", i), 2+rng.IntN(7), Bytes(8+rng.IntN(8))*gb, gpus...))
	}
	id := int64(1)
	for i := range s.Nodes {
		n := &s.Nodes[i]
		for n.FreeCPUs > 0 && rng.IntN(3) > 0 {
			c := 1 + rng.IntN(n.FreeCPUs)
			var g []int
			if len(n.FreeGPUs) > 0 && rng.IntN(2) == 0 {
				g = []int{n.FreeGPUs[0]}
			}
			r := holding(id, n.Name, c, 1+rng.IntN(100), g...)
			*n = busy(*n, r)
			s.Running = append(s.Running, r)
			id++
		}
	}
	for range rng.IntN(12) {
		p := aRun(id, 1+rng.IntN(4)).limit(1 + rng.IntN(120))
		p.Priority = rng.IntN(3)
		if rng.IntN(4) == 0 {
			p = p.nodes(2)
		}
		if rng.IntN(4) == 0 {
			p = p.gpu(GPURequest{Count: 1 + rng.IntN(2)})
		}
		s.Pending = append(s.Pending, p)
		id++
	}
	return s
}

// richSnapshot adds what the scheduler core grew after backfill: blocks,
// exclusive runs, QOS with preemption, limits and a switch tree.
func richSnapshot(rng *rand.Rand, policy Policy) Snapshot {
	s := randomSnapshot(rng, policy)
	qos := []string{"high", "low", "normal"}
	s.QOS = map[string]QOS{"high": {Priority: 100, Preempt: []string{"low"}, Mode: PreemptMode(rng.IntN(2))}, "low": {}, "normal": {Priority: 10}}
	users := []string{"u1", "u2", "u3"}
	for i := range s.Running {
		r := &s.Running[i]
		r.QOS, r.User, r.Project = qos[rng.IntN(3)], users[rng.IntN(3)], "p"
		r.Priority = int64(rng.IntN(5))
		r.Ending = rng.IntN(8) == 0
	}
	for i := range s.Pending {
		p := &s.Pending[i]
		p.QOS, p.User, p.Project = qos[rng.IntN(3)], users[rng.IntN(3)], "p"
		p.Request = p.req()
		p.Request.Exclusive = rng.IntN(6) == 0
		if rng.IntN(8) == 0 {
			g := []Group{{Nodes: 1, Request: Request{CPUs: 1}}, {Nodes: 1, Request: *p.Request}}
			*p = p.nodes(2)
			p.Groups = g
		}
	}
	for i := range s.Nodes {
		if n := &s.Nodes[i]; rng.IntN(3) == 0 && n.FreeCPUs == n.CPUs {
			n.Blocks = 2
		}
	}
	s.Limits = map[LimitKey]Limits{
		{ScopeUser, "u1"}:          {Jobs: 1 + rng.IntN(2)},
		{ScopeQOSUser, "normal"}:   {TRES: TRES{CPUs: 2 + rng.IntN(6)}},
		{ScopeProject, "p"}:        {TRES: TRES{GPUs: 1 + rng.IntN(3)}},
		{ScopeQOS, "high"}:         {Wall: time.Duration(30+rng.IntN(100)) * time.Second},
		{ScopeQOSUser, "no-runs"}:  {Jobs: 1},
		{ScopeProject, "no-where"}: {Jobs: 1},
	}
	if len(s.Nodes) > 2 && rng.IntN(2) == 0 {
		topo, err := NewTopology([]Switch{{Name: "a", Nodes: []string{"n0", "n1"}}, {Name: "b", Nodes: []string{"n2", "n3"}}, {Name: "top", Switches: []string{"a", "b"}}})
		if err != nil {
			panic(err)
		}
		s.Topology = topo
	}
	return s
}

// Properties of the richer snapshots: no over-allocation (CPUs, memory,
// GPUs), limits never exceeded by what the plan starts, whole blocks on
// split nodes, victims only of a QOS the preemptor may preempt, each once.
func TestRichProperties(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 11))
		for _, policy := range []Policy{FCFS, EASY, Conservative, Berth} {
			snap := richSnapshot(rng, policy)
			before := cloneSnapshot(snap)
			plan := Schedule(snap, at(0))
			if diff := cmp.Diff(before, cloneSnapshot(snap), cmp.AllowUnexported(Topology{})); diff != "" {
				t.Fatalf("seed %d: Schedule changed its input", seed)
			}
			if again := Schedule(snap, at(0)); !cmp.Equal(plan, again) {
				t.Fatalf("seed %d policy %d: not deterministic", seed, policy)
			}
			checkNoOverAllocation(t, seed, snap, plan)
			checkRich(t, seed, snap, plan)
		}
	}
}

func checkRich(t *testing.T, seed uint64, s Snapshot, plan Plan) {
	t.Helper()
	nodes := map[string]*Node{}
	for i := range s.Nodes {
		nodes[s.Nodes[i].Name] = &s.Nodes[i]
	}
	byID := map[int64]*Pending{}
	for i := range s.Pending {
		byID[s.Pending[i].RunID] = &s.Pending[i]
	}
	mem := map[string]Bytes{}
	acct := newAccounts(&s, nodes)
	for _, st := range plan.Starts {
		pd := byID[st.RunID]
		for _, p := range st.Placements {
			mem[p.Node] += p.Memory
			n := nodes[p.Node]
			if n.Blocks > 1 && p.CPUs != n.CPUs && p.CPUs%(n.CPUs/n.Blocks) != 0 {
				t.Fatalf("seed %d: run %d takes %d CPUs of %s, not whole blocks of %d", seed, st.RunID, p.CPUs, n.Name, n.CPUs/n.Blocks)
			}
			if pd.Request.Exclusive && len(pd.Groups) == 0 && (p.CPUs != n.CPUs || p.Memory != n.Memory) {
				t.Fatalf("seed %d: exclusive run %d does not hold all of %s", seed, st.RunID, n.Name)
			}
		}
		if why := acct.blocked(pd); why != "" {
			t.Fatalf("seed %d: run %d started past a limit: %s", seed, st.RunID, why)
		}
		acct.charge(keysOf(pd.User, pd.Project, pd.QOS, pd.Array), startTRES(st, nodes), 1)
	}
	for name, m := range mem {
		if m > nodes[name].FreeMemory {
			t.Fatalf("seed %d: %s has %d bytes free, the plan starts %d", seed, name, nodes[name].FreeMemory, m)
		}
	}
	running := map[int64]*Running{}
	for i := range s.Running {
		running[s.Running[i].RunID] = &s.Running[i]
	}
	seen := map[int64]bool{}
	for _, p := range plan.Preemptions {
		v, by := running[p.Victim], byID[p.By]
		if v == nil || by == nil || seen[p.Victim] || v.Ending {
			t.Fatalf("seed %d: bad preemption %+v", seed, p)
		}
		seen[p.Victim] = true
		if !slices.Contains(s.QOS[by.QOS].Preempt, v.QOS) {
			t.Fatalf("seed %d: %s run %d preempts %s run %d", seed, by.QOS, by.RunID, v.QOS, v.RunID)
		}
	}
}

// Properties over many random clusters: nothing is over-allocated, the plan
// is deterministic and leaves its input alone, and what starts now never
// delays a reservation.
func TestScheduleProperties(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for _, policy := range []Policy{FCFS, EASY, Conservative, Berth} {
			snap := randomSnapshot(rng, policy)
			before := cloneSnapshot(snap)
			plan := Schedule(snap, at(0))
			if diff := cmp.Diff(before, cloneSnapshot(snap)); diff != "" {
				t.Fatalf("seed %d: Schedule changed its input", seed)
			}
			if again := Schedule(snap, at(0)); !cmp.Equal(plan, again) {
				t.Fatalf("seed %d policy %d: not deterministic", seed, policy)
			}
			checkNoOverAllocation(t, seed, snap, plan)
			checkReservationsKept(t, seed, snap, plan)
		}
	}
}

func checkNoOverAllocation(t *testing.T, seed uint64, s Snapshot, plan Plan) {
	t.Helper()
	cpus := map[string]int{}
	gpus := map[string]map[int]bool{}
	for _, st := range plan.Starts {
		for _, p := range st.Placements {
			cpus[p.Node] += p.CPUs
			if gpus[p.Node] == nil {
				gpus[p.Node] = map[int]bool{}
			}
			for _, g := range p.GPUs {
				if gpus[p.Node][g] {
					t.Fatalf("seed %d: GPU %d of %s given twice", seed, g, p.Node)
				}
				gpus[p.Node][g] = true
			}
		}
	}
	for _, n := range s.Nodes {
		if cpus[n.Name] > n.FreeCPUs {
			t.Fatalf("seed %d: %s has %d CPUs free, the plan starts %d", seed, n.Name, n.FreeCPUs, cpus[n.Name])
		}
		for g := range gpus[n.Name] {
			free := false
			for _, f := range n.FreeGPUs {
				free = free || f == g
			}
			if !free {
				t.Fatalf("seed %d: GPU %d of %s is not free", seed, g, n.Name)
			}
		}
	}
}

// checkReservationsKept: with everything the plan starts running, each
// reserved run (alone with the runs reserved before it) still gets its
// estimate, i.e. the starts delayed none of them.
func checkReservationsKept(t *testing.T, seed uint64, s Snapshot, plan Plan) {
	t.Helper()
	after := cloneSnapshot(s)
	byID := map[int64]Pending{}
	for _, p := range s.Pending {
		byID[p.RunID] = p
	}
	for _, st := range plan.Starts {
		r := Running{RunID: st.RunID, Placements: st.Placements, End: end(at(0), byID[st.RunID].Limit)}
		after.Running = append(after.Running, r)
		for i := range after.Nodes {
			after.Nodes[i] = busy(after.Nodes[i], r)
		}
	}
	after.Policy = Conservative
	for k, id := range plan.Reserved {
		after.Pending = nil
		for _, prev := range plan.Reserved[:k+1] {
			p := byID[prev]
			p.Priority = 1000 - len(after.Pending) // keep the reservations' order
			after.Pending = append(after.Pending, p)
		}
		again := Schedule(after, at(0))
		if got, want := again.Estimates[id], plan.Estimates[id]; !got.Equal(want) {
			t.Fatalf("seed %d policy %d: run %d reserved for %v, but the plan's starts push it to %v", seed, s.Policy, id, want, got)
		}
	}
}

// Berth reserves for every run that cannot start, as conservative backfill
// does, where EASY reserves for the first only; and its aging lets a run
// that has waited long go before a fresher one that ranks higher otherwise.
func TestBerthReservesAllAndAges(t *testing.T) {
	r1 := holding(1, "n", 3, 100)
	snap := Snapshot{
		Nodes:   []Node{busy(aNode("n", 4, 0), r1)},
		Running: []Running{r1},
		Pending: []Pending{aRun(2, 4).limit(10), aRun(3, 2).limit(60), aRun(4, 1).limit(5)},
		Weights: &Weights{},
	}
	for policy, want := range map[Policy][]int64{EASY: {2}, Berth: {2, 3}} {
		snap.Policy = policy
		plan := Schedule(snap, at(0))
		if diff := cmp.Diff(want, plan.Reserved); diff != "" {
			t.Errorf("%v: reserved (-want +got):\n%s", policy, diff)
		}
		if len(plan.Starts) != 1 || plan.Starts[0].RunID != 4 {
			t.Errorf("%v started %+v, want run 4", policy, plan.Starts)
		}
	}

	// Run 6 ranks higher by its own priority (0.5 x 10,000), but run 5 has
	// waited two hours longer: 6,000 points of aging.
	old, fresh := aRun(5, 4).limit(10), aRun(6, 4).limit(10).prio(50)
	old.SubmittedAt, fresh.SubmittedAt = at(0).Add(-3*time.Hour), at(0).Add(-time.Hour)
	snap = Snapshot{Nodes: []Node{aNode("n", 4, 0)}, Pending: []Pending{fresh, old}, Weights: &Weights{Priority: 10000}}
	for policy, want := range map[Policy]int64{EASY: 6, Berth: 5} {
		snap.Policy = policy
		if plan := Schedule(snap, at(0)); len(plan.Starts) != 1 || plan.Starts[0].RunID != want {
			t.Errorf("%v started %+v, want run %d", policy, plan.Starts, want)
		}
	}
}

func TestDepth(t *testing.T) {
	snap := Snapshot{Nodes: []Node{aNode("n", 8, 0)}, Pending: []Pending{aRun(1, 1), aRun(2, 1), aRun(3, 1)}, Depth: 2}
	plan := Schedule(snap, at(0))
	if len(plan.Starts) != 2 || plan.Reasons[3] != ReasonPriority {
		t.Errorf("depth 2 started %d runs, reasons %v", len(plan.Starts), plan.Reasons)
	}
	snap.Depth = 0
	if plan := Schedule(snap, at(0)); len(plan.Starts) != 3 {
		t.Errorf("full depth started %d of 3", len(plan.Starts))
	}
}
