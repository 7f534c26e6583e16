package store

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// Reserved IDs count in LoadActive's highest IDs, a mark never comes down
// while the store is open (a lower one is ignored), and a clean Close
// brings the run mark down to the runs stored, so run IDs go on without a
// gap; the job mark stays (a waiting run's jobs have IDs, no rows).
func TestReservedIDs(t *testing.T) { forEachStore(t, testReservedIDs) }

func testReservedIDs(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "u", false)
	b := &Batch{Reserve: Reserve{Runs: 1000, Jobs: 2000},
		Runs: []*Run{{ID: 1, ProjectID: pid, UserID: uid, Name: "a", Status: "submitted", Spec: []byte(`{}`), SubmittedAt: ts(1)}},
		Jobs: []*Job{{ID: 1, RunID: 1, Status: "submitted", SubmittedAt: ts(1)}}}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, &Batch{Reserve: Reserve{Runs: 500}}); err != nil {
		t.Fatal(err)
	}
	a, err := s.LoadActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxRunID != 1000 || a.MaxJobID != 2000 {
		t.Errorf("highest IDs %d, %d; want the reserved 1000, 2000", a.MaxRunID, a.MaxJobID)
	}
	s.Close()
	s = open()
	if a, err = s.LoadActive(ctx); err != nil {
		t.Fatal(err)
	}
	if a.MaxRunID != 1 || a.MaxJobID != 2000 {
		t.Errorf("after a clean close: highest IDs %d, %d; want 1, 2000", a.MaxRunID, a.MaxJobID)
	}
}

// Idempotency keys read back from a time on, oldest first.
func TestKeysSince(t *testing.T) { forEachStore(t, testKeysSince) }

func testKeysSince(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	keys := []*IdempotencyKey{
		{UserID: 1, Key: "late", RunID: 3, Created: ts(30)},
		{UserID: 1, Key: "old", RunID: 1, Created: ts(10)},
		{UserID: 2, Key: "mid", RunID: 2, Created: ts(20)},
	}
	if err := s.Apply(ctx, &Batch{Keys: keys}); err != nil {
		t.Fatal(err)
	}
	got, err := s.KeysSince(ctx, ts(20))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*IdempotencyKey{keys[2], keys[0]}, got); diff != "" {
		t.Errorf("KeysSince (-want +got):\n%s", diff)
	}
}

// Steps are upserted by (run, step): the end overwrites status, exit and
// finish; they list by run and step ID; a PTY flag and a missing exit code
// read back as written.
func TestSteps(t *testing.T) { forEachStore(t, testSteps) }

func testSteps(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "u", false)
	var b Batch
	for id := int64(1); id <= 2; id++ {
		b.Runs = append(b.Runs, &Run{ID: id, ProjectID: pid, UserID: uid, Name: "r", Status: "running", Spec: []byte(`{}`), SubmittedAt: ts(1)})
	}
	step := func(run int64, id int, pty bool) *Step {
		return &Step{RunID: run, StepID: id, Name: "bash", Argv: []byte(`["bash"]`), Ranks: []byte(`[0]`), NTasks: 1,
			NodeList: "n1", PTY: pty, Status: "running", Exits: []byte(`{}`), StartedAt: ts(2)}
	}
	b.Steps = []*Step{step(2, 0, false), step(1, 1, true), step(1, 0, false)}
	if err := s.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	done := step(1, 1, true)
	done.Status, done.ExitCode, done.Exits, done.FinishedAt = "done", intp(0), []byte(`{"0":0}`), ts(5)
	if err := s.Apply(ctx, &Batch{Steps: []*Step{done}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListSteps(ctx, []int64{2, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []*Step{step(1, 0, false), done, step(2, 0, false)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListSteps (-want +got):\n%s", diff)
	}
}

// Events list in the order they were written; jobs by number and
// attempt; usage is the ended jobs that started, with their run's user.
func TestEventsJobsUsage(t *testing.T) { forEachStore(t, testEventsJobsUsage) }

func testEventsJobsUsage(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "alice", false)
	b := &Batch{
		Runs: []*Run{{ID: 1, ProjectID: pid, UserID: uid, Name: "r", Status: "failed", Spec: []byte(`{}`), SubmittedAt: ts(1), FinishedAt: ts(9)}},
		Jobs: []*Job{
			{ID: 3, RunID: 1, Num: 0, Attempt: 1, Status: "failed", Alloc: []byte(`{"cpus":2}`), SubmittedAt: ts(1), StartedAt: ts(6), FinishedAt: ts(9), MaxRSS: 5 << 30,
				Usage: []byte(`{"cpus":2,"billing":2}`)},
			{ID: 2, RunID: 1, Num: 1, Attempt: 0, Status: "failed", Alloc: []byte(`{"cpus":1}`), SubmittedAt: ts(1), FinishedAt: ts(3)},
			{ID: 1, RunID: 1, Num: 0, Attempt: 0, Status: "failed", Alloc: []byte(`{"cpus":2}`), SubmittedAt: ts(1), StartedAt: ts(2), FinishedAt: ts(4)},
		},
		Events: []*Event{
			{RunID: 1, Time: ts(5), Type: "b", Message: "second"},
			{RunID: 1, JobID: 1, Time: ts(2), Type: "a", Message: "first"},
			{RunID: 2, Time: ts(2), Type: "x", Message: "another run's"},
		},
	}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	events, err := s.ListEvents(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b.Events[:2], events); diff != "" {
		t.Errorf("ListEvents (-want +got):\n%s", diff)
	}
	jobs, err := s.ListJobs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*Job{b.Jobs[2], b.Jobs[0], b.Jobs[1]}, jobs); diff != "" {
		t.Errorf("ListJobs (-want +got):\n%s", diff)
	}
	usage, err := s.UsageSince(ctx, ts(4))
	if err != nil {
		t.Fatal(err)
	}
	want := []*JobUsage{
		{RunID: 1, JobID: 1, ProjectID: pid, UserID: uid, Alloc: []byte(`{"cpus":2}`), StartedAt: ts(2), FinishedAt: ts(4)},
		{RunID: 1, JobID: 3, ProjectID: pid, UserID: uid, Alloc: []byte(`{"cpus":2}`), Usage: []byte(`{"cpus":2,"billing":2}`), StartedAt: ts(6), FinishedAt: ts(9)},
	}
	if diff := cmp.Diff(want, usage); diff != "" {
		t.Errorf("UsageSince (-want +got):\n%s", diff)
	}
	if n, err := s.ProjectName(ctx, pid); err != nil || n != "main" {
		t.Errorf("ProjectName = %q, %v", n, err)
	}
	if _, err := s.UserName(ctx, 99); !errors.Is(err, ErrNotFound) {
		t.Errorf("UserName(99) = %v, want ErrNotFound", err)
	}
}

// An array's task is found by index, and not before it exists.
func TestFindArrayTask(t *testing.T) { forEachStore(t, testFindArrayTask) }

func testFindArrayTask(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "u", false)
	task := &Run{ID: 2, ProjectID: pid, UserID: uid, Name: "arr_7", Status: "submitted", Spec: []byte(`{}`), SubmittedAt: ts(1),
		ArrayID: 1, ArrayIndex: 7, Meta: []byte(`{"m":1}`)}
	b := &Batch{Runs: []*Run{{ID: 1, ProjectID: pid, UserID: uid, Name: "arr", Status: "running", Spec: []byte(`{}`), SubmittedAt: ts(1), ArrayIndex: -1}, task}}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.FindArrayTask(ctx, 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(task, got); diff != "" {
		t.Errorf("FindArrayTask (-want +got):\n%s", diff)
	}
	if _, err := s.FindArrayTask(ctx, 1, 8); !errors.Is(err, ErrNotFound) {
		t.Errorf("a task not made yet: %v, want ErrNotFound", err)
	}
}

// A batch is one transaction: when a row of it fails (here a step of a
// run that does not exist), nothing of it is written, not even the rows
// before.
func TestApplyAllOrNothing(t *testing.T) { forEachStore(t, testApplyAllOrNothing) }

func testApplyAllOrNothing(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "u", false)
	b := &Batch{
		Runs:    []*Run{{ID: 1, ProjectID: pid, UserID: uid, Name: "r", Status: "submitted", Spec: []byte(`{}`), SubmittedAt: ts(1)}},
		Logs:    []*LogChunk{{JobID: 1, Offset: 0, Stream: "stdout", Time: ts(1), Data: []byte("x")}},
		Steps:   []*Step{{RunID: 99, StepID: 0, Name: "x", Argv: []byte(`[]`), Ranks: []byte(`[]`), Status: "running", StartedAt: ts(1)}},
		Reserve: Reserve{Runs: 1000},
	}
	if err := s.Apply(ctx, b); err == nil {
		t.Fatal("a step of no run was accepted")
	}
	if _, err := s.GetRun(ctx, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("the failed batch's run is there: %v", err)
	}
	if logs, err := s.ReadLogs(ctx, 1, 0, 0); err != nil || len(logs) != 0 {
		t.Errorf("the failed batch's log is there: %d chunks, %v", len(logs), err)
	}
	if a, err := s.LoadActive(ctx); err != nil || a.MaxRunID != 0 {
		t.Errorf("the failed batch's reservation is there: %+v, %v", a, err)
	}
	// The store goes on taking batches.
	b.Steps = nil
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// Every SQLite migration has its PostgreSQL counterpart, by number: a
// migration added to one dialect only fails here, naming the file to port.
func TestMigrationsInBothDialects(t *testing.T) {
	versions := func(fsys fs.FS, dir string) map[string]string {
		names, err := fs.Glob(fsys, dir+"/*.sql")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, n := range names {
			base := n[len(dir)+1:]
			num, _, _ := strings.Cut(base, "_")
			out[num] = base
		}
		return out
	}
	lite, pg := versions(sqliteMigrations, "migrations"), versions(postgresMigrations, "migrations/postgres")
	if len(lite) == 0 {
		t.Fatal("no SQLite migrations found")
	}
	for num, name := range lite {
		if _, ok := pg[num]; !ok {
			t.Errorf("internal/store/migrations/%s has no PostgreSQL counterpart: write internal/store/migrations/postgres/%s in PostgreSQL's dialect", name, name)
		}
	}
	for num, name := range pg {
		if _, ok := lite[num]; !ok {
			t.Errorf("internal/store/migrations/postgres/%s has no SQLite counterpart", name)
		}
	}
}

func TestParseLocation(t *testing.T) {
	tests := map[string]struct {
		loc, kind, target string
		err               bool
	}{
		"path":             {loc: "/var/lib/berth/berth.db", kind: KindSQLite, target: "/var/lib/berth/berth.db"},
		"relative path":    {loc: "berth.db", kind: KindSQLite, target: "berth.db"},
		"colon in a path":  {loc: "data:1/berth.db", kind: KindSQLite, target: "data:1/berth.db"},
		"sqlite: prefix":   {loc: "sqlite:/x/berth.db", kind: KindSQLite, target: "/x/berth.db"},
		"sqlite:// prefix": {loc: "sqlite:///x/berth.db", kind: KindSQLite, target: "/x/berth.db"},
		"postgres":         {loc: "postgres://u:p@db:5432/berth", kind: KindPostgres, target: "postgres://u:p@db:5432/berth"},
		"postgresql":       {loc: "postgresql://db/berth?sslmode=require", kind: KindPostgres, target: "postgresql://db/berth?sslmode=require"},
		"other scheme":     {loc: "mysql://u:secret@db/berth", err: true},
		"sqlite, no file":  {loc: "sqlite:", err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kind, target, err := ParseLocation(tc.loc)
			if tc.err {
				if err == nil {
					t.Fatalf("ParseLocation(%q) = %s %s, want an error", tc.loc, kind, target)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil || kind != tc.kind || target != tc.target {
				t.Errorf("ParseLocation(%q) = %s %q %v, want %s %q", tc.loc, kind, target, err, tc.kind, tc.target)
			}
		})
	}
	if got := Redact("postgres://berth:secret@db/berth"); strings.Contains(got, "secret") {
		t.Errorf("Redact = %q", got)
	}
}

// One server per PostgreSQL database: a second exclusive open is refused
// while the first holds the database, and succeeds once it is closed.
func TestPostgresExclusive(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	first := openPostgresTest(t, url, PostgresOptions{Exclusive: true})
	if _, err := OpenPostgres(ctx, url, PostgresOptions{Exclusive: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second server: %v, want ErrLocked", err)
	}
	// A store that is not a server (a migration, a report) may open it.
	openPostgresTest(t, url, PostgresOptions{})
	first.Close()
	openPostgresTest(t, url, PostgresOptions{Exclusive: true})
}

// A bad URL fails at open, with the driver's reason.
func TestPostgresUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	_, err := OpenPostgres(ctx, "postgres://berth:secret@/none?host=/nonexistent-dir&connect_timeout=2", PostgresOptions{})
	if err == nil {
		t.Fatal("opened a database that is not there")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the error shows the password: %v", err)
	}
}
