package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pressly/goose/v3"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// Arrays' and schedules' records are written whole with a batch, read
// back by ID, and the active ones come with LoadActive.
func TestArrayAndScheduleRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		a := &Array{ID: 5, ProjectID: 1, UserID: 2, Indices: "1-10%2", Throttle: 2, Next: 4, Cancel: []int{7, 9}, Done: 1, Failed: 1, Active: true}
		c := &Schedule{ID: 6, ProjectID: 1, UserID: 2, Head: Head{Name: "nightly", Status: "scheduled", Spec: []byte(`{"schedule":{}}`)}, Cron: []string{"15 23 * * *", "0 6 * * 1"}, NextFire: ts(100), LastRun: 40, Runs: 3, Active: true}
		ended := &Array{ID: 8, ProjectID: 1, UserID: 2, Indices: "0-1", Next: 2, Done: 2}
		if err := s.Apply(ctx, &Batch{Arrays: []*Array{a, ended}, Schedules: []*Schedule{c}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetArray(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("array (-put +got):\n%s", diff)
		}
		gotc, err := s.GetSchedule(ctx, 6)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c, gotc); diff != "" {
			t.Errorf("schedule (-put +got):\n%s", diff)
		}
		if _, err := s.GetArray(ctx, 6); err != ErrNotFound {
			t.Errorf("a schedule's ID as an array: %v, want ErrNotFound", err)
		}
		// A second write replaces what changes.
		a2 := *a
		a2.Next, a2.Stopped, a2.Cancel, a2.Active = 10, true, nil, false
		c2 := *c
		c2.Active, c2.NextFire = false, ts(0)
		if err := s.Apply(ctx, &Batch{Arrays: []*Array{&a2}, Schedules: []*Schedule{&c2}}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetArray(ctx, 5); err != nil || !cmp.Equal(&a2, got) {
			t.Errorf("array after update: %+v (%v), want %+v", got, err, a2)
		}
		act, err := s.LoadActive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(act.Arrays) != 0 || len(act.Schedules) != 0 {
			t.Errorf("active after both ended: %+v %+v", act.Arrays, act.Schedules)
		}
		if err := s.Apply(ctx, &Batch{Arrays: []*Array{a}, Schedules: []*Schedule{c}}); err != nil {
			t.Fatal(err)
		}
		if act, err = s.LoadActive(ctx); err != nil || len(act.Arrays) != 1 || act.Arrays[0].ID != 5 || len(act.Schedules) != 1 || act.Schedules[0].ID != 6 {
			t.Errorf("active: %+v %+v (%v)", act.Arrays, act.Schedules, err)
		}
	})
}

// A database made by the migrations before 00027, holding arrays and
// schedules as JSON in their run rows' meta, opens with their state in
// records of their own and the rest of the meta kept; migrating down
// puts it back in the meta.
func TestArraysLeaveRunMeta(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "old.db")
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		sub, _ := fs.Sub(sqliteMigrations, "migrations")
		testArraysLeaveMeta(t, db, goose.DialectSQLite3, sub, sqliteDialect, func() Store { return openTest(t, path) },
			func() *sql.DB { d, _ := sql.Open("sqlite", "file:"+path); return d })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Database(t)
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		sub, _ := fs.Sub(postgresMigrations, "migrations/postgres")
		testArraysLeaveMeta(t, db, goose.DialectPostgres, sub, postgresDialect, func() Store { return openPostgresTest(t, url, PostgresOptions{}) },
			func() *sql.DB { d, _ := sql.Open("pgx", url); return d })
	})
}

func testArraysLeaveMeta(t *testing.T, db *sql.DB, dialect goose.Dialect, migrations fs.FS, d dialect, open func() Store, reopen func() *sql.DB) {
	ctx := context.Background()
	p, err := goose.NewProvider(dialect, db, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 26); err != nil {
		t.Fatal(err)
	}
	old := &sqlDB{w: db, r: db, d: d}
	for _, q := range []string{`INSERT INTO projects (id, name, created_at) VALUES (1, 'main', 1)`,
		`INSERT INTO users (id, name, admin, created_at) VALUES (2, 'ann', 0, 1)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	runs := []*Run{
		// A held array with two tasks made, one cancelled, one failed.
		{ID: 10, ProjectID: 1, UserID: 2, Name: "arr", Status: "running", Spec: []byte(`{"type":"task","array":"0-9%3","commands":["true"]}`),
			SubmittedAt: ts(1), StartedAt: ts(2), Meta: []byte(`{"array":{"next":3,"throttle":3,"cancel":[5],"failed":1},"held":true}`)},
		{ID: 11, ProjectID: 1, UserID: 2, Name: "arr_0", Status: "done", Spec: []byte(`{}`), SubmittedAt: ts(1), ArrayID: 10, ArrayIndex: 0},
		{ID: 12, ProjectID: 1, UserID: 2, Name: "arr_1", Status: "failed", Spec: []byte(`{}`), SubmittedAt: ts(1), ArrayID: 10, ArrayIndex: 1},
		{ID: 13, ProjectID: 1, UserID: 2, Name: "arr_2", Status: "running", Spec: []byte(`{}`), SubmittedAt: ts(1), ArrayID: 10, ArrayIndex: 2},
		// A stopped array, ended.
		{ID: 20, ProjectID: 1, UserID: 2, Name: "gone", Status: "terminated", Spec: []byte(`{"type":"task","array":"1-4"}`),
			SubmittedAt: ts(1), FinishedAt: ts(5), Meta: []byte(`{"array":{"next":1,"throttle":0,"stopped":true,"failed":1}}`)},
		// A schedule that submitted run 31, and one stopped.
		{ID: 30, ProjectID: 1, UserID: 2, Name: "nightly", Status: "scheduled", Spec: []byte(`{"type":"task","schedule":{"cron":["15 23 * * *"]}}`),
			SubmittedAt: ts(1), EstimatedStart: ts(900), Meta: []byte(`{"schedule":{"next":"1970-01-01T00:15:00Z","runs":2}}`)},
		{ID: 31, ProjectID: 1, UserID: 2, Name: "nightly", Status: "done", Spec: []byte(`{"type":"task"}`), SubmittedAt: ts(3)},
		{ID: 40, ProjectID: 1, UserID: 2, Name: "weekly", Status: "terminated", Spec: []byte(`{"type":"task","schedule":{"cron":["0 6 * * 1"]}}`),
			SubmittedAt: ts(1), FinishedAt: ts(4), Meta: []byte(`{"schedule":{"next":"1970-01-01T00:15:00Z","runs":0}}`)},
		// A plain retried run keeps its meta as it was.
		{ID: 50, ProjectID: 1, UserID: 2, Name: "plain", Status: "submitted", Spec: []byte(`{"type":"task"}`), SubmittedAt: ts(1),
			Meta: []byte(`{"retry":{"attempts":1}}`)},
	}
	events := []*Event{{RunID: 30, Time: ts(2), Type: "scheduled", Message: "submitted run 29"}, {RunID: 30, Time: ts(3), Type: "scheduled", Message: "submitted run 31"}}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.applyBatch(ctx, tx, &Batch{Runs: runs, Events: events}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open()
	// Their run rows moved into the records' heads (00037; the meta is
	// checked below, as GetRun reads it).
	head := func(r *Run) Head {
		return Head{Name: r.Name, Status: r.Status, Reason: r.Reason, Priority: r.Priority, Spec: r.Spec, SubmittedAt: r.SubmittedAt,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, StopReq: r.StopReq, EstimatedStart: r.EstimatedStart}
	}
	noMeta := cmpopts.IgnoreFields(Head{}, "Meta")
	wantArrays := []*Array{
		{ID: 10, ProjectID: 1, UserID: 2, Head: head(runs[0]), Indices: "0-9%3", Throttle: 3, Next: 3, Cancel: []int{5}, Done: 1, Failed: 1, Active: true},
		{ID: 20, ProjectID: 1, UserID: 2, Head: head(runs[4]), Indices: "1-4", Next: 1, Stopped: true, Failed: 1},
	}
	for _, want := range wantArrays {
		got, err := s.GetArray(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, noMeta); diff != "" {
			t.Errorf("array %d after the upgrade (-want +got):\n%s", want.ID, diff)
		}
	}
	wantSchedules := []*Schedule{
		{ID: 30, ProjectID: 1, UserID: 2, Head: head(runs[5]), Cron: []string{"15 23 * * *"}, NextFire: ts(900), LastRun: 31, Runs: 2, Active: true},
		{ID: 40, ProjectID: 1, UserID: 2, Head: head(runs[7]), Cron: []string{"0 6 * * 1"}},
	}
	for _, want := range wantSchedules {
		got, err := s.GetSchedule(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, noMeta); diff != "" {
			t.Errorf("schedule %d after the upgrade (-want +got):\n%s", want.ID, diff)
		}
	}
	meta := func(id int64) map[string]any {
		r, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Meta) == 0 {
			return nil
		}
		var m map[string]any
		if err := json.Unmarshal(r.Meta, &m); err != nil {
			t.Fatalf("run %d: meta %q: %v", id, r.Meta, err)
		}
		return m
	}
	if diff := cmp.Diff(map[string]any{"held": true}, meta(10)); diff != "" {
		t.Errorf("the array's run meta (-want +got):\n%s", diff)
	}
	for _, id := range []int64{20, 30, 40} {
		if m := meta(id); m != nil {
			t.Errorf("run %d keeps meta %v", id, m)
		}
	}
	if diff := cmp.Diff(map[string]any{"retry": map[string]any{"attempts": 1.0}}, meta(50)); diff != "" {
		t.Errorf("a plain run's meta (-want +got):\n%s", diff)
	}
	act, err := s.LoadActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(act.Arrays) != 1 || act.Arrays[0].ID != 10 || len(act.Schedules) != 1 || act.Schedules[0].ID != 30 {
		t.Errorf("active records: %+v %+v", act.Arrays, act.Schedules)
	}
	// The runs table holds no row of theirs (00037); the readers of runs
	// list them from the records as before.
	var rows int
	sq, err := sqlOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := sq.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE id IN (10, 20, 30, 40)`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("run rows of arrays and schedules after the upgrade: %d (%v)", rows, err)
	}
	all, err := s.ListRuns(ctx, RunFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range all {
		ids = append(ids, r.ID)
	}
	if want := []int64{50, 40, 31, 30, 20, 13, 12, 11, 10}; !cmp.Equal(ids, want) {
		t.Errorf("listed after the upgrade: %v, want %v", ids, want)
	}
	for _, r := range all {
		if r.ID == 30 && (r.Name != "nightly" || r.Status != "scheduled" || !r.EstimatedStart.Equal(ts(900))) {
			t.Errorf("the schedule as a run: %+v", r)
		}
	}
	s.Close()

	// Down again: the state is back in the meta.
	db = reopen()
	defer db.Close()
	if p, err = goose.NewProvider(dialect, db, migrations); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 26); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := db.QueryRowContext(ctx, old.q(`SELECT meta FROM runs WHERE id = ?`), 10).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Array struct {
			Next, Throttle, Failed int
			Cancel                 []int
			Stopped                bool
		}
		Held bool
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m.Array.Next != 3 || m.Array.Throttle != 3 || m.Array.Failed != 1 ||
		!cmp.Equal(m.Array.Cancel, []int{5}) || m.Array.Stopped || !m.Held {
		t.Errorf("meta after going down: %s (%v)", raw, err)
	}
	if err := db.QueryRowContext(ctx, old.q(`SELECT meta FROM runs WHERE id = ?`), 30).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var back struct{ Schedule scheduleMeta }
	if err := json.Unmarshal([]byte(raw), &back); err != nil || !back.Schedule.Next.Equal(ts(900)) || back.Schedule.Runs != 2 {
		t.Errorf("schedule meta after going down: %s", raw)
	}
}

// scheduleMeta is how the server kept a schedule's state in its run's meta
// before migration 00027.
type scheduleMeta struct {
	Next time.Time `json:"next"`
	Runs int       `json:"runs"`
}

// Batch.Add keeps every kind of change: each slice field of a batch added
// to an empty one comes through (a field Add forgets is never written,
// since the committer merges batches before Apply).
func TestBatchAddKeepsEveryField(t *testing.T) {
	var o Batch
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice {
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		}
	}
	var b Batch
	b.Add(&o)
	got := reflect.ValueOf(b)
	for i := range got.NumField() {
		if f := got.Field(i); f.Kind() == reflect.Slice && f.Len() != 1 {
			t.Errorf("Batch.Add drops %s", got.Type().Field(i).Name)
		}
	}
}

// A run written again with no spec keeps the one stored (an array's task
// holds none in memory once written).
func TestRunWriteWithoutSpecKeepsIt(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		pid, err := s.EnsureProject(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		uid, err := s.EnsureUser(ctx, "admin", true)
		if err != nil {
			t.Fatal(err)
		}
		r := &Run{ID: 3, ProjectID: pid, UserID: uid, Name: "a_0", Status: "submitted", Spec: []byte(`{"type":"task"}`), SubmittedAt: ts(1), ArrayID: 2}
		if err := s.Apply(ctx, &Batch{Runs: []*Run{r}}); err != nil {
			t.Fatal(err)
		}
		again := *r
		again.Spec, again.Status = nil, "running"
		if err := s.Apply(ctx, &Batch{Runs: []*Run{&again}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRun(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Spec) != `{"type":"task"}` || got.Status != "running" {
			t.Errorf("after a write without spec: spec %s, status %s", got.Spec, got.Status)
		}
	})
}

// An array and a schedule have no run row (migration 00037): the readers
// of runs answer their IDs from their records, in a run's shape, merged
// with the runs by ID (pages, windows, names, filters), and their IDs
// count in the runs' ID space after a restart.
func TestRecordsReadAsRuns(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		pid, err := s.EnsureProject(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		uid, err := s.EnsureUser(ctx, "ann", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(ctx, &Batch{Runs: []*Run{
			{ID: 1, ProjectID: pid, UserID: uid, Name: "a", Status: "done", Spec: []byte(`{}`), SubmittedAt: ts(1), FinishedAt: ts(2)},
			{ID: 3, ProjectID: pid, UserID: uid, Name: "arr_0", Status: "running", Spec: []byte(`{}`), SubmittedAt: ts(2), ArrayID: 2},
			{ID: 5, ProjectID: pid, UserID: uid, Name: "nightly", Status: "done", Spec: []byte(`{}`), SubmittedAt: ts(5), FinishedAt: ts(6)},
			{ID: 6, ProjectID: pid, UserID: uid, Name: "arr", Status: "submitted", Spec: []byte(`{}`), SubmittedAt: ts(7)},
		}, Arrays: []*Array{
			{ID: 2, ProjectID: pid, UserID: uid, Indices: "0-3", Next: 1, Active: true,
				Head: Head{Name: "arr", Status: "running", Priority: 4, Spec: []byte(`{"array":"0-3"}`), SubmittedAt: ts(2), StartedAt: ts(3), Meta: []byte(`{"held":true}`)}},
			{ID: 8, ProjectID: pid, UserID: uid, Indices: "0", Next: 1,
				Head: Head{Name: "old", Status: "done", Spec: []byte(`{"array":"0"}`), SubmittedAt: ts(1), FinishedAt: ts(3)}},
		}, Schedules: []*Schedule{
			{ID: 4, ProjectID: pid, UserID: uid, Cron: []string{"@daily"}, NextFire: ts(100), LastRun: 5, Runs: 1, Active: true,
				Head: Head{Name: "nightly", Status: "scheduled", Spec: []byte(`{"schedule":{}}`), SubmittedAt: ts(4), EstimatedStart: ts(100)}},
		}}); err != nil {
			t.Fatal(err)
		}
		r, err := s.GetRun(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := &Run{ID: 2, ProjectID: pid, UserID: uid, Name: "arr", Status: "running", Priority: 4, Spec: []byte(`{"array":"0-3"}`),
			SubmittedAt: ts(2), StartedAt: ts(3), Meta: []byte(`{"held":true}`)}
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("the array as a run (-want +got):\n%s", diff)
		}
		if _, err := s.GetRun(ctx, 7); !errors.Is(err, ErrNotFound) {
			t.Errorf("no run 7: %v", err)
		}
		ids := func(f RunFilter) []int64 {
			t.Helper()
			runs, err := s.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []int64
			for _, r := range runs {
				out = append(out, r.ID)
			}
			return out
		}
		for _, c := range []struct {
			f    RunFilter
			want []int64
		}{
			{RunFilter{}, []int64{6, 4, 3, 2}},
			{RunFilter{All: true}, []int64{8, 6, 5, 4, 3, 2, 1}},
			{RunFilter{All: true, Limit: 3}, []int64{8, 6, 5}},
			{RunFilter{All: true, Limit: 2, BeforeID: 5}, []int64{4, 3}},
			{RunFilter{All: true, Brief: true, ArrayID: 2}, []int64{3}},
			{RunFilter{All: true, IDs: []int64{2}}, []int64{3, 2}},
			{RunFilter{All: true, Name: "arr"}, []int64{6, 2}},
			{RunFilter{All: true, Statuses: []string{"scheduled", "done"}}, []int64{8, 5, 4, 1}},
			{RunFilter{All: true, Since: ts(4)}, []int64{6, 5, 4, 3, 2}},
			{RunFilter{All: true, Since: ts(2), Until: ts(3)}, []int64{8, 3, 2, 1}},
			{RunFilter{All: true, ProjectID: pid + 1}, nil},
		} {
			if got := ids(c.f); !cmp.Equal(got, c.want) {
				t.Errorf("ListRuns(%+v) = %v, want %v", c.f, got, c.want)
			}
		}
		if r, err := s.FindRun(ctx, pid, "arr"); err != nil || r.ID != 6 {
			t.Errorf("newest named arr: %+v (%v), want run 6", r, err)
		}
		if r, err := s.FindRun(ctx, pid, "old"); err != nil || r.ID != 8 {
			t.Errorf("named old: %+v (%v), want array 8", r, err)
		}
		if r, err := s.FindActiveRun(ctx, pid, "nightly"); err != nil || r.ID != 4 {
			t.Errorf("active nightly: %+v (%v), want schedule 4 before its runs", r, err)
		}
		if r, err := s.FindActiveRun(ctx, pid, "arr"); err != nil || r.ID != 6 {
			t.Errorf("active arr: %+v (%v), want run 6, the newest", r, err)
		}
		// A record's ID is the highest: it is not handed out again.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open()
		act, err := s.LoadActive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if act.MaxRunID != 8 {
			t.Errorf("max run ID after a clean restart: %d, want 8 (the ended array's)", act.MaxRunID)
		}
		for _, r := range act.Runs {
			if r.ID == 2 || r.ID == 4 {
				t.Errorf("LoadActive lists record %d as a run row", r.ID)
			}
		}
	})
}
