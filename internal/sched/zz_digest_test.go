package sched

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// temporary: digests of plans, to compare before/after a refactor.
func TestZZDigest(t *testing.T) {
	out := os.Getenv("DIGEST_OUT")
	if out == "" {
		t.Skip()
	}
	f, _ := os.Create(out)
	defer f.Close()
	dump := func(name string, plan Plan) {
		h := fnv.New64a()
		fmt.Fprintf(h, "%v|%v|%v|%v|%v", plan.Starts, plan.Reserved, plan.Preemptions, len(plan.Reasons), len(plan.Estimates))
		for _, id := range sortedKeys(plan.Reasons) {
			fmt.Fprintf(h, "%d:%s:%v:%v;", id, plan.Reasons[id], plan.Estimates[id], plan.BlockedBy[id])
		}
		fmt.Fprintf(f, "%s %016x\n", name, h.Sum64())
	}
	for seed := range uint64(3000) {
		for _, policy := range []Policy{FCFS, EASY, Conservative, Berth} {
			rng := rand.New(rand.NewPCG(seed, 7))
			s := randomSnapshot(rng, policy)
			if seed%2 == 0 {
				w := DefaultWeights
				s.Weights = &w
				s.Usage = Usage{{"p", "u1"}: float64(seed), {"", ""}: 3}
			}
			dump(fmt.Sprintf("r%d/%v", seed, policy), Schedule(s, at(int(seed%50))))
			rng = rand.New(rand.NewPCG(seed, 11))
			s = richSnapshot(rng, policy)
			if seed%3 == 0 {
				w := DefaultWeights
				s.Weights = &w
				s.Depth = int(seed % 7)
			}
			dump(fmt.Sprintf("R%d/%v", seed, policy), Schedule(s, at(int(seed%50))))
		}
	}
	_ = time.Second
}

func sortedKeys(m map[int64]string) []int64 {
	var ks []int64
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}
