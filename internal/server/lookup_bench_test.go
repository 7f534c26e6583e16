package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// lookupPending is how many waiting runs BenchmarkNamedJob looks one up
// among.
const lookupPending = 20_000

// BenchmarkNamedJob is the server's side of squeue -j N and scontrol show
// job N with many runs waiting: each request they make for one job, which
// should cost what it costs with an empty queue. Run it with -bench
// NamedJob -benchtime 20x (seeding takes a while).
func BenchmarkNamedJob(b *testing.B) {
	h := newHarness(b, b.TempDir())
	// One node, which the first run takes whole: the rest wait for it.
	startAgent(b, h, agentOpts{name: "n1", cpus: 2})
	ctx := context.Background()
	t := task(b, "type: task\nresources: {cpu: 2}\ncommands: [\"sleep 3600\"]\n")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < lookupPending; i += 8 {
				if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: t}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	id := int64(lookupPending / 2)
	b.Run("runs", func(b *testing.B) {
		for range b.N {
			// As squeue -j and scontrol ask: the runs still in memory.
			since := time.Now().Add(-5 * time.Minute)
			if runs, err := h.c.Runs(ctx, client.ListOptions{All: true, Jobs: true, Spec: true, Lean: true, IDs: []int64{id}, Since: since}); err != nil || len(runs) != 1 {
				b.Fatal(len(runs), err)
			}
		}
	})
	// A whole squeue: every active run with its jobs and configuration.
	b.Run("queue", func(b *testing.B) {
		for range b.N {
			n := 0
			if err := h.c.EachRun(ctx, client.ListOptions{Jobs: true, Spec: true, Lean: true}, func(*api.Run) error { n++; return nil }); err != nil || n != lookupPending {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("priorities", func(b *testing.B) {
		for range b.N {
			if ps, err := h.c.PrioritiesOf(ctx, []int64{id}); err != nil || len(ps) != 1 {
				b.Fatal(len(ps), err)
			}
		}
	})
	b.Run("nodes", func(b *testing.B) {
		for range b.N {
			if _, err := h.c.Nodes(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("policy", func(b *testing.B) {
		for range b.N {
			if _, err := h.c.Policy(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
