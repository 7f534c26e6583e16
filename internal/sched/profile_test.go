package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// releaseAll must build the very profile that one release per end builds,
// ties and GPUs included.
func TestReleaseAllMatchesRelease(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	now := t0
	for round := range 300 {
		n := aNode("n", 64, 256*gb, a100(0), a100(1), a100(2), a100(3))
		n.FreeCPUs, n.FreeMemory, n.FreeGPUs = rng.IntN(8), Bytes(rng.IntN(8))*gb, []int{3}
		var ends []release
		for range rng.IntN(40) {
			r := release{at: now.Add(time.Duration(1+rng.IntN(20)) * time.Minute), cpus: rng.IntN(8), mem: Bytes(rng.IntN(8)) * gb}
			if rng.IntN(4) == 0 {
				r.gpus = []int{rng.IntN(3)}
			}
			ends = append(ends, r)
		}
		one := newProfile(&n, now)
		for _, r := range ends {
			one.release(r.at, r.cpus, r.mem, r.gpus)
		}
		all := newProfile(&n, now)
		all.ends = slices.Clone(ends)
		all.releaseAll()
		if diff := cmp.Diff(one.segs, all.segs, cmp.AllowUnexported(segment{}), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
			cmp.Transformer("gpus", func(g []int) []int {
				if len(g) == 0 {
					return nil
				}
				return g
			})); diff != "" {
			t.Fatalf("round %d: segments (-release +releaseAll):\n%s", round, diff)
		}
	}
}

// earliestOneJob must find what asking every node at every change of any
// node finds (the general search): the same time, the same node.
func TestEarliestOneJobMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	now := t0
	for round := range 500 {
		var nodes []Node
		for i := range 1 + rng.IntN(6) {
			n := aNode(fmt.Sprintf("n%d", i), 8, 32*gb, a100(0), a100(1))
			n.FreeCPUs, n.FreeMemory, n.FreeGPUs = rng.IntN(9), Bytes(rng.IntN(33))*gb, []int{1}[:rng.IntN(2)]
			if rng.IntN(3) == 0 {
				n.Blocks = 2
			}
			nodes = append(nodes, n)
		}
		var profiles []*profile
		for i := range nodes {
			p := newProfile(&nodes[i], now)
			for range rng.IntN(5) {
				p.ends = append(p.ends, release{at: now.Add(time.Duration(1+rng.IntN(30)) * time.Minute), cpus: rng.IntN(4), mem: Bytes(rng.IntN(8)) * gb})
			}
			p.releaseAll()
			for range rng.IntN(3) { // reservations already taken
				from := now.Add(time.Duration(rng.IntN(40)) * time.Minute)
				p.take(from, from.Add(time.Duration(1+rng.IntN(20))*time.Minute), rng.IntN(3), 0, nil)
			}
			profiles = append(profiles, p)
		}
		pd := aRun(1, 1+rng.IntN(8)).mem(Bytes(rng.IntN(16)) * gb).limit(60 * (1 + rng.IntN(30)))
		pd.Request = pd.req()
		if rng.IntN(3) == 0 {
			pd.Request.GPU = GPURequest{Count: 1}
		}
		pd.Request.Exclusive = rng.IntN(5) == 0

		gotAt, gotPicks, gotOK := earliestOneJob(profiles, now, &pd)
		var times []time.Time
		for _, p := range profiles {
			times = append(times, p.changes()...)
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		wantOK := false
		var wantAt time.Time
		var wantPicks []pick
		for _, at := range times {
			if picks, ok := placeAt(profiles, at, &pd, nil); ok {
				wantAt, wantPicks, wantOK = at, picks, true
				break
			}
		}
		if gotOK != wantOK || !gotAt.Equal(wantAt) || gotOK && gotPicks[0].p != wantPicks[0].p {
			t.Fatalf("round %d: earliestOneJob = %v %v, the general search %v %v", round, gotAt, gotOK, wantAt, wantOK)
		}
	}
}
