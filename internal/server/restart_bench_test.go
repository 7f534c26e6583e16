package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// BenchmarkRestartArray times a server's start (its state loaded from
// SQLite) with one active array of 100,000 tasks of which all but the
// last window have run: what a restart costs an array that has mostly
// run.
func BenchmarkRestartArray(b *testing.B) {
	const tasks = 100_000
	dir := b.TempDir()
	h := newHarness(b, dir)
	ctx := context.Background()
	arr, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(b, fmt.Sprintf("type: task\nname: big\narray: \"0-%d\"\ncommands: [\"echo $BERTH_ARRAY_INDEX\"]\n", tasks-1))})
	if err != nil {
		b.Fatal(err)
	}
	parent, err := h.st.GetRun(ctx, arr.ID)
	if err != nil {
		b.Fatal(err)
	}
	// The tasks that have run, as the server writes them.
	now := time.Now().UTC()
	next := arr.ID + 1_000
	batch := &store.Batch{}
	for i := 300; i < tasks; i++ {
		next++
		code := 0
		batch.Runs = append(batch.Runs, &store.Run{ID: next, ProjectID: parent.ProjectID, UserID: parent.UserID, Name: fmt.Sprintf("big_%d", i),
			Status: string(api.StatusDone), Reason: api.ReasonDone, ExitCode: &code, Spec: parent.Spec, SubmittedAt: now, StartedAt: now,
			FinishedAt: now, ArrayID: arr.ID, ArrayIndex: i})
		if len(batch.Runs) == 5_000 {
			if err := h.st.Apply(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = &store.Batch{}
		}
	}
	if err := h.st.Apply(ctx, batch); err != nil {
		b.Fatal(err)
	}
	h.close()
	st, err := store.OpenSQLite(ctx, filepath.Join(dir, "berth.db"), store.SQLiteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ResetTimer()
	for range b.N {
		sctx, cancel := context.WithCancel(ctx)
		srv, err := New(sctx, Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		srv.mu.Lock()
		_, _, ok := srv.ActiveRun(arr.ID)
		runs, _, _, _ := srv.Counts()
		srv.unlock()
		if !ok || runs < 2 {
			b.Fatalf("after a restart the array is active: %v, with %d runs", ok, runs)
		}
		cancel()
	}
}
