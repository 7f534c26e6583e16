package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// fillForCopy writes a little of every kind into s: users (generated
// IDs), a token, projects, runs, jobs, events (generated IDs), log chunks
// (bytes), steps (a BOOLEAN on PostgreSQL), nodes, reservations.
func fillForCopy(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	pid, _ := s.EnsureProject(ctx, "main")
	if _, err := s.EnsureProject(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	uid, err := s.EnsureUser(ctx, "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureUser(ctx, "bob", true); err != nil {
		t.Fatal(err)
	}
	if err := s.AddToken(ctx, uid, "hash-of-a-token", "laptop"); err != nil {
		t.Fatal(err)
	}
	b := &Batch{
		Runs: []*Run{{ID: 1, ProjectID: pid, UserID: uid, Name: "r", Status: "running", Spec: []byte(`{"type":"task"}`), SubmittedAt: ts(1)}},
		Jobs: []*Job{{ID: 1, RunID: 1, Num: 0, Status: "running", Alloc: []byte(`{"cpus":2}`), SubmittedAt: ts(1), StartedAt: ts(2)}},
		Events: []*Event{
			{RunID: 1, Time: ts(1), Type: "submitted", Message: "one"},
			{RunID: 1, JobID: 1, Time: ts(2), Type: "started", Message: "two"},
		},
		Logs:    []*LogChunk{{JobID: 1, Offset: 0, Stream: "stdout", Time: ts(3), Data: []byte("hello\x00\xff\n")}},
		Steps:   []*Step{{RunID: 1, StepID: 0, Name: "bash", Argv: []byte(`["bash"]`), Ranks: []byte(`[0]`), NTasks: 1, NodeList: "n1", PTY: true, Status: "running", Exits: []byte(`{}`), StartedAt: ts(2)}},
		Nodes:   []*Node{{Name: "n1", Info: []byte(`{"name":"n1"}`), RegisteredAt: ts(0), LastSeen: ts(5)}},
		Reserve: Reserve{Runs: 100, Jobs: 100},
	}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// snapshotForCopy is what a copy must keep, read through the Store.
func snapshotForCopy(t *testing.T, s Store) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	var err error
	if out["runs"], err = s.ListRuns(ctx, RunFilter{All: true}); err != nil {
		t.Fatal(err)
	}
	if out["jobs"], err = s.ListJobs(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if out["events"], err = s.ListEvents(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if out["logs"], err = s.ReadLogs(ctx, 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	if out["steps"], err = s.ListSteps(ctx, []int64{1}); err != nil {
		t.Fatal(err)
	}
	if out["nodes"], err = s.ListNodes(ctx); err != nil {
		t.Fatal(err)
	}
	return out
}

// berth admin migrate-store's copy, both ways: SQLite to PostgreSQL and
// that back to a new SQLite file; what the Store reads is the same each
// time, the counts are verified, new generated IDs come after the
// copied ones (sequences reset), and a destination with rows is refused.
func TestCopyBothWays(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sq := openTest(t, filepath.Join(dir, "a.db"))
	fillForCopy(t, sq)
	want := snapshotForCopy(t, sq)

	url := pgtest.Database(t)
	pg := openPostgresTest(t, url, PostgresOptions{})
	counts, err := Copy(ctx, pg, sq)
	if err != nil {
		t.Fatalf("copy SQLite to PostgreSQL: %v", err)
	}
	var tables []string
	for _, c := range counts {
		tables = append(tables, c.Table)
		if c.From != c.To {
			t.Errorf("%s: %d rows from, %d to", c.Table, c.From, c.To)
		}
	}
	if !strings.Contains(strings.Join(tables, " "), "log_chunks") || tables[0] != "users" {
		t.Errorf("tables copied: %v", tables)
	}
	if diff := cmp.Diff(want, snapshotForCopy(t, pg)); diff != "" {
		t.Errorf("PostgreSQL copy (-SQLite +PostgreSQL):\n%s", diff)
	}
	// The sequences are past the copied IDs.
	alice, _ := pg.EnsureUser(ctx, "alice", false)
	carol, err := pg.EnsureUser(ctx, "carol", false)
	if err != nil || carol <= alice+1 {
		t.Errorf("a new user on the copy: ID %d (%v); want past alice's %d and bob's", carol, err, alice)
	}
	if err := pg.Apply(ctx, &Batch{Events: []*Event{{RunID: 1, Time: ts(9), Type: "x", Message: "three"}}}); err != nil {
		t.Errorf("a new event on the copy: %v", err)
	}

	back := openTest(t, filepath.Join(dir, "b.db"))
	if _, err := Copy(ctx, back, pg); err != nil {
		t.Fatalf("copy PostgreSQL to SQLite: %v", err)
	}
	got := snapshotForCopy(t, back)
	wantBack := snapshotForCopy(t, pg)
	if diff := cmp.Diff(wantBack, got); diff != "" {
		t.Errorf("SQLite copy back (-PostgreSQL +SQLite):\n%s", diff)
	}
	if dave, err := back.EnsureUser(ctx, "dave", false); err != nil || dave <= carol {
		t.Errorf("a new user on the copy back: ID %d (%v); want past %d", dave, err, carol)
	}

	// Into a database with rows: refused, nothing written.
	if _, err := Copy(ctx, back, sq); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("copy into a database with rows: %v; want refused", err)
	}
}
