package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPriorities(t *testing.T) {
	w := &Weights{Age: 1000, Fairshare: 10000, Size: 1000, QOS: 2000, Priority: 10000, MaxAge: 10 * time.Hour}
	now := at(0)
	p := func(id int64, user string, cpus, nodes int, agoHours float64) Pending {
		r := aRun(id, cpus).nodes(nodes)
		r.User, r.Project = user, user // one project each: the tree is flat
		r.SubmittedAt = now.Add(-time.Duration(agoHours * float64(time.Hour)))
		return r
	}
	heavy := p(1, "alice", 16, 2, 5)
	heavy.QOSPriority, heavy.Priority = 50, 50
	light := p(2, "bob", 8, 1, 20)
	light.QOSPriority, light.Nice = 100, 300
	fresh := p(3, "carol", 64, 1, 0)
	snap := Snapshot{
		Nodes:   []Node{aNode("n", 64, 0)},
		Pending: []Pending{heavy, light, fresh},
		Weights: w,
		Usage:   Usage{{"alice", "alice"}: 30, {"bob", "bob"}: 10},
	}
	got := Priorities(snap, now)
	// Three users share equally (1/3 each); alice used 3/4 of all, bob 1/4,
	// carol nothing.
	want := map[int64]Factors{
		1: {Age: 0.5, Fairshare: math.Pow(2, -0.75*3), Size: 0.5, QOS: 0.5, Priority: 0.5},
		2: {Age: 1, Fairshare: math.Pow(2, -0.25*3), Size: 0.125, QOS: 1, Nice: 300},
		3: {Age: 0, Fairshare: 1, Size: 1, QOS: 0},
	}
	for id, f := range want {
		f.Total = int64(math.Round(1000*f.Age+10000*f.Fairshare+1000*f.Size+2000*f.QOS+10000*f.Priority)) - f.Nice
		want[id] = f
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("factors (-want +got):\n%s", diff)
	}

	// With the weights, the order follows the totals, not the own priority.
	order := priorityOrder(snap, now)
	var ids []int64
	for _, i := range order {
		ids = append(ids, snap.Pending[i].RunID)
	}
	if diff := cmp.Diff([]int64{3, 1, 2}, ids); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	snap.Weights = nil
	order = priorityOrder(snap, now)
	if first := snap.Pending[order[0]].RunID; first != 1 {
		t.Errorf("without weights the own priority decides: first %d, want 1", first)
	}
}

func TestPrioritiesFavorSmall(t *testing.T) {
	snap := Snapshot{Nodes: []Node{aNode("n", 64, 0)}, Pending: []Pending{aRun(1, 8)}, Weights: &Weights{Size: 1, FavorSmall: true}}
	if f := Priorities(snap, at(0))[1]; f.Size != 0.875 || f.Fairshare != 1 || f.Age != 0 {
		t.Errorf("factors %+v", f)
	}
}

// TestFairshareTree checks the two-level formula by hand: project ml holds
// 3 shares and infra 1; in ml, ann holds 2 shares and ben 1.
func TestFairshareTree(t *testing.T) {
	run := func(id int64, project, user string) Pending {
		r := aRun(id, 1)
		r.Project, r.User = project, user
		return r
	}
	snap := Snapshot{
		Nodes:   []Node{aNode("n", 8, 0)},
		Pending: []Pending{run(1, "ml", "ann"), run(2, "ml", "ben"), run(3, "infra", "cid")},
		Weights: &Weights{Fairshare: 1},
		Usage:   Usage{{"ml", "ann"}: 60, {"ml", "ben"}: 20, {"infra", "cid"}: 20},
		Shares:  &Shares{Projects: map[string]int{"ml": 3, "infra": 1}, Users: map[string]map[string]int{"ml": {"ann": 2, "ben": 1}}},
	}
	got := Priorities(snap, at(0))
	// ann: S = 3/4 * 2/3 = 0.5; U = 0.6; Uml = 0.8; UE = 0.6 + 0.2*2/3.
	// ben: S = 3/4 * 1/3 = 0.25; U = 0.2; UE = 0.2 + 0.6/3 = 0.4.
	// cid: S = 1/4; UE = U = 0.2.
	want := map[int64]float64{
		1: math.Pow(2, -(0.6+0.2*2/3)/0.5),
		2: math.Pow(2, -0.4/0.25),
		3: math.Pow(2, -0.2/0.25),
	}
	for id, w := range want {
		if g := got[id].Fairshare; math.Abs(g-w) > 1e-9 {
			t.Errorf("run %d: fairshare %v, want %v", id, g, w)
		}
	}
	// No usage yet: everyone 1. A user with 0 shares: last.
	snap.Usage = nil
	if f := Priorities(snap, at(0))[2].Fairshare; f != 1 {
		t.Errorf("no usage: fairshare %v, want 1", f)
	}
	snap.Usage = Usage{{"ml", "ann"}: 1}
	snap.Shares.Users["ml"]["ben"] = 0
	if f := Priorities(snap, at(0))[2].Fairshare; f != 0 {
		t.Errorf("zero shares: fairshare %v, want 0", f)
	}
}

// TestPrioritiesDeterministic runs the same pass many times over one snapshot
// whose usage is spread over many accounts: float sums taken in map order
// differ in their last bits from one run to the next, and a priority that
// differs in its last bit can reorder two runs. Every pass must give the
// very same factors, bit for bit, and the very same plan.
func TestPrioritiesDeterministic(t *testing.T) {
	w := DefaultWeights
	snap := Snapshot{Nodes: []Node{aNode("n", 16, 0)}, Policy: Berth, Weights: &w, Usage: Usage{},
		Shares: &Shares{Projects: map[string]int{"p0": 3, "p1": 2}}}
	for i := range 40 {
		a := Account{Project: fmt.Sprintf("p%d", i%5), User: fmt.Sprintf("u%02d", i)}
		// Values of very different magnitudes, none exact in binary, so
		// that the order of the sum shows in the result.
		snap.Usage[a] = math.Pow(10, float64(i%9)) / 3 * (1 + float64(i)/7)
		r := aRun(int64(i+1), 1+i%7)
		r.Project, r.User, r.Limit = a.Project, a.User, time.Duration(1+i%5)*time.Hour
		snap.Pending = append(snap.Pending, r)
	}
	now := t0.Add(2 * time.Hour)
	first, plan := Priorities(snap, now), Schedule(snap, now)
	for range 300 {
		if diff := cmp.Diff(first, Priorities(snap, now)); diff != "" {
			t.Fatalf("priorities differ between two passes over one snapshot (-first +again):\n%s", diff)
		}
		if diff := cmp.Diff(plan, Schedule(snap, now)); diff != "" {
			t.Fatalf("plans differ between two passes over one snapshot (-first +again):\n%s", diff)
		}
	}
}

// exactSum's result must not depend on the order of its values, down to the
// last bit, and must be the sum, correct to float64's precision.
func TestExactSumOrderFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n := 1 + rng.IntN(300)
		vs := make([]float64, n)
		for i := range vs {
			// Magnitudes over 60 orders of ten, a few zeros.
			vs[i] = math.Ldexp(rng.Float64(), rng.IntN(200)-100)
			if rng.IntN(20) == 0 {
				vs[i] = 0
			}
		}
		sum := func() float64 {
			var e exactSum
			for _, v := range vs {
				e.add(v)
			}
			return e.value()
		}
		first := sum()
		var want float64
		sorted := slices.Clone(vs)
		slices.Sort(sorted)
		for _, v := range sorted {
			want += v
		}
		if math.Abs(first-want) > 1e-15*want {
			t.Fatalf("round %d: sum %v, want %v", round, first, want)
		}
		for range 5 {
			rng.Shuffle(n, func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
			if got := sum(); math.Float64bits(got) != math.Float64bits(first) {
				t.Fatalf("round %d: %v in one order, %v in another", round, first, got)
			}
		}
	}
	var e exactSum
	if e.value() != 0 {
		t.Errorf("empty sum %v", e.value())
	}
	// The ends of float64's range: subnormals, the largest, +Inf.
	e.add(0x1p-1074)
	e.add(0x1p-1050)
	if got, want := e.value(), 0x1p-1074+0x1p-1050; got != want {
		t.Errorf("subnormal sum %v, want %v", got, want)
	}
	e = exactSum{}
	e.add(math.MaxFloat64)
	e.add(1)
	if got := e.value(); got != math.MaxFloat64 {
		t.Errorf("largest sum %v, want %v", got, math.MaxFloat64)
	}
	e.add(math.MaxFloat64)
	if got := e.value(); !math.IsInf(got, 1) {
		t.Errorf("sum over float64's range %v, want +Inf", got)
	}
	e = exactSum{}
	e.add(math.Inf(1))
	e.add(math.NaN())
	e.add(-3)
	if got := e.value(); !math.IsInf(got, 1) {
		t.Errorf("sum with +Inf %v", got)
	}
	// Exact where float64 sums are not: 1e16 + 1 + 1 is 1e16+2.
	e = exactSum{}
	for _, v := range []float64{1e16, 1, 1} {
		e.add(v)
	}
	if got := e.value(); got != 1e16+2 {
		t.Errorf("1e16 + 1 + 1 = %v, want %v", got, 1e16+2)
	}
}
