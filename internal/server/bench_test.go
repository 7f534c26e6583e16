package server

import (
	"context"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

// BenchmarkSubmit measures submissions through the HTTP API into SQLite,
// from concurrent clients (GOMAXPROCS x -cpu goroutines), no agent.
func BenchmarkSubmit(b *testing.B) {
	h := newHarness(b, b.TempDir())
	t := task(b, "type: task\ncommands: [\"true\"]\n")
	ctx := context.Background()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: t}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
