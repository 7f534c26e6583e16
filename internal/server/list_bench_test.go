package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/store"
)

// historyRuns is the size of the history BenchmarkListRuns lists from;
// historyToday of them (the newest) were submitted today.
const (
	historyRuns  = 100_000
	historyToday = 100
)

// seedHistory stores n finished runs of one job each, an hour apart and
// ending now, so that the newest today ran since midnight.
func seedHistory(b *testing.B, h *harness, n, today int) time.Time {
	b.Helper()
	ctx := context.Background()
	uid, err := h.st.EnsureUser(ctx, "admin", true)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := json.Marshal(task(b, "type: task\nmax_duration: 1h\ntags: {slurm.tool: sbatch, slurm.user: alice}\ncommands: [\"true\"]\n"))
	now := time.Now()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	step := now.Sub(midnight) / time.Duration(today+1)
	exit := 0
	batch := &store.Batch{}
	for i := 1; i <= n; i++ {
		// The last `today` runs fall after midnight, the others an hour
		// apart before it.
		sub := midnight.Add(-time.Duration(n-today-i+1) * time.Hour)
		if k := i - (n - today); k > 0 {
			sub = midnight.Add(time.Duration(k) * step)
		}
		r := &store.Run{ID: int64(i), ProjectID: h.srv.projectID, UserID: uid, Name: fmt.Sprintf("run-%d", i), Status: string(api.StatusDone),
			ExitCode: &exit, Spec: body, SubmittedAt: sub, StartedAt: sub.Add(time.Second), FinishedAt: sub.Add(time.Minute), ArrayIndex: -1}
		j := &store.Job{ID: int64(i), RunID: int64(i), Status: string(api.StatusDone), ExitCode: &exit, Node: "n1",
			Alloc: []byte(`{"cpus":1}`), SubmittedAt: sub, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
		batch.Runs, batch.Jobs = append(batch.Runs, r), append(batch.Jobs, j)
		if len(batch.Runs) == 5000 || i == n {
			if err := h.st.Apply(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = &store.Batch{}
		}
	}
	return midnight
}

// BenchmarkListRuns lists runs with their jobs and configurations, as the
// Slurm commands do, from a history of 100,000 runs: everything (what sacct
// fetched before the server could filter), today's runs only (sacct's
// default window) and a hundred runs by ID (sacct -j). Run it with
// -bench ListRuns -benchtime 3x: the whole listing takes seconds.
func BenchmarkListRuns(b *testing.B) {
	h := newHarness(b, b.TempDir())
	midnight := seedHistory(b, h, historyRuns, historyToday)
	ctx := context.Background()
	list := func(b *testing.B, o client.ListOptions, want int) {
		for i := 0; i < b.N; i++ {
			runs, err := h.c.Runs(ctx, o)
			if err != nil {
				b.Fatal(err)
			}
			if len(runs) != want {
				b.Fatalf("listed %d runs, want %d", len(runs), want)
			}
		}
	}
	b.Run("all", func(b *testing.B) {
		list(b, client.ListOptions{All: true, Jobs: true, Spec: true}, historyRuns)
	})
	// sacct's default window, as sacct now asks for it.
	b.Run("today", func(b *testing.B) {
		list(b, client.ListOptions{All: true, Jobs: true, Spec: true, Since: midnight, Until: time.Now().Add(time.Second)}, historyToday)
	})
	// sacct -j: a hundred runs by ID.
	b.Run("ids", func(b *testing.B) {
		ids := make([]int64, 100)
		for i := range ids {
			ids[i] = int64(1 + i*997)
		}
		list(b, client.ListOptions{All: true, Jobs: true, Spec: true, IDs: ids}, len(ids))
	})
}
