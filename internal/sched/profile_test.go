package sched

import (
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
