package sched_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/sched/synth"
)

// BenchmarkSchedule is one full pass with EASY backfill over a synthetic
// cluster (see internal/sched/synth).
func BenchmarkSchedule(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	for _, size := range []struct{ pending, nodes int }{{1000, 100}, {10000, 1000}, {100000, 10000}} {
		b.Run(fmt.Sprintf("pending=%d/nodes=%d", size.pending, size.nodes), func(b *testing.B) {
			snap := synth.Cluster(1, size.nodes, size.pending, now)
			b.ResetTimer()
			for b.Loop() {
				sched.Schedule(snap, now)
			}
		})
	}
}
