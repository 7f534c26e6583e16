package sched_test

import (
	"fmt"
	"hash/fnv"
	"os"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/sched/synth"
)

func TestZZSynthDigest(t *testing.T) {
	out := os.Getenv("DIGEST_OUT")
	if out == "" {
		t.Skip()
	}
	f, _ := os.OpenFile(out+".synth", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	defer f.Close()
	now := time.Unix(1_700_000_000, 0)
	for _, pol := range []sched.Policy{sched.EASY, sched.Berth, sched.Conservative, sched.FCFS} {
		snap := synth.Cluster(3, 300, 3000, now)
		snap.Policy = pol
		plan := sched.Schedule(snap, now)
		h := fnv.New64a()
		fmt.Fprintf(h, "%v|%v|%v|%v", plan.Starts, plan.Reserved, plan.Estimates, plan.Reasons)
		fmt.Fprintf(f, "%v %016x %d %d\n", pol, h.Sum64(), len(plan.Starts), len(plan.Reserved))
	}
}
