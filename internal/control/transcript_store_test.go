package control

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/control/transcript"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// The transcripts' driver keeps no store: it folds the batches into the
// records they leave (transcriptEnv.take). That fold is the store's: a few
// transcripts run with every batch applied to a real SQLite file as well,
// and at the end every run and job the fold holds is in the store as the
// fold has it (status, reason, exit code, stop, configuration; jobs by
// number and attempt, with their node), and the store holds no other. Five
// transcripts; one under the race detector.
func TestTranscriptRecordsAreTheStore(t *testing.T) {
	names := []string{"preempt_requeue", "aftercorr", "schedule", "retry", "multinode"}
	if raceEnabled {
		// SQLite under the race detector is slow (a store's migrations
		// alone take seconds), and the driver is single-threaded: one.
		names = names[:1]
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sq, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "berth.db"), store.SQLiteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sq.Close() })
			// As the server starts: the main project and the admin first.
			pid, err := sq.EnsureProject(ctx, "main")
			if err != nil {
				t.Fatal(err)
			}
			uid, err := sq.EnsureUser(ctx, "admin", true)
			if err != nil || pid != 1 || uid != 1 {
				t.Fatalf("project %d, admin %d (%v): the driver submits as 1 and 1", pid, uid, err)
			}
			e := newTranscriptEnv("testdata")
			e.st = sq
			runTranscriptOn(t, filepath.Join("testdata", name+".txt"), e)

			runs, err := sq.ListRuns(ctx, store.RunFilter{All: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != len(e.durable.runs) {
				t.Errorf("the store holds %d runs, the fold %d", len(runs), len(e.durable.runs))
			}
			type runView struct {
				Status, Reason string
				Exit           *int
				Stop           int
				Spec           spec.Task
			}
			view := func(r *store.Run) runView {
				v := runView{Status: r.Status, Reason: r.Reason, Exit: r.ExitCode, Stop: int(r.StopReq)}
				if err := json.Unmarshal(r.Spec, &v.Spec); err != nil {
					t.Fatalf("run %d: %v", r.ID, err)
				}
				return v
			}
			jobView := func(jobs []*store.Job) []string {
				var out []string
				for _, j := range jobs {
					out = append(out, e.n.Job(j)+" "+transcript.Status(j.Status, j.Reason, j.ExitCode)+" on "+j.Node)
				}
				slices.Sort(out)
				return out
			}
			for _, r := range runs {
				f, ok := e.durable.runs[r.ID]
				if !ok {
					t.Errorf("run %s (%d) is in the store, not in the fold", e.names[r.ID], r.ID)
					continue
				}
				if d := cmp.Diff(view(f), view(r)); d != "" {
					t.Errorf("run %s (-fold +store):\n%s", e.names[r.ID], d)
				}
				stored, err := sq.ListJobs(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				var folded []*store.Job
				for _, j := range e.durable.jobs {
					if j.RunID == r.ID {
						folded = append(folded, j)
					}
				}
				if d := cmp.Diff(jobView(folded), jobView(stored)); d != "" {
					t.Errorf("run %s's jobs (-fold +store):\n%s", e.names[r.ID], strings.TrimSpace(d))
				}
			}
		})
	}
}
