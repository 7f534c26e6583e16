package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pressly/goose/v3"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// previousSchema is the schema version of the release before this one
// (the last migration before the identity work).
const previousSchema = 9

// A database made by the previous release's schema, with a user, a token,
// a run and its job in it, opens with this release: it is migrated at
// open, and what it held reads back the same; the old token resolves to
// its user and has an ID.
func TestUpgradeFromPreviousSchema(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "old.db")
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		sub, _ := fs.Sub(sqliteMigrations, "migrations")
		testUpgrade(t, db, goose.DialectSQLite3, sub, sqliteDialect, func() Store { return openTest(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Database(t)
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		sub, _ := fs.Sub(postgresMigrations, "migrations/postgres")
		testUpgrade(t, db, goose.DialectPostgres, sub, postgresDialect, func() Store { return openPostgresTest(t, url, PostgresOptions{}) })
	})
}

func testUpgrade(t *testing.T, db *sql.DB, dialect goose.Dialect, migrations fs.FS, d dialect, open func() Store) {
	ctx := context.Background()
	p, err := goose.NewProvider(dialect, db, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, previousSchema); err != nil {
		t.Fatal(err)
	}
	old := &sqlDB{w: db, r: db, d: d}
	sum := sha256.Sum256([]byte("an old token"))
	hash := hex.EncodeToString(sum[:])
	for _, q := range []struct {
		text string
		args []any
	}{
		{`INSERT INTO projects (id, name, created_at) VALUES (?, ?, ?)`, []any{1, "main", 1}},
		{`INSERT INTO users (id, name, admin, created_at) VALUES (?, ?, ?, ?)`, []any{1, "admin", 1, 1}},
		{`INSERT INTO tokens (hash, user_id, name, created_at) VALUES (?, ?, ?, ?)`, []any{hash, 1, "first", 1}},
	} {
		if _, err := db.ExecContext(ctx, old.q(q.text), q.args...); err != nil {
			t.Fatal(err)
		}
	}
	code := 0
	run := &Run{ID: 7, ProjectID: 1, UserID: 1, Name: "kept", Status: "done", ExitCode: &code, Spec: []byte(`{"type":"task","commands":["true"]}`),
		SubmittedAt: ts(1), StartedAt: ts(2), FinishedAt: ts(3), ArrayIndex: -1}
	job := &Job{ID: 70, RunID: 7, Status: "done", ExitCode: &code, Node: "n1", Alloc: []byte(`{"cpus":1}`), SubmittedAt: ts(1), StartedAt: ts(2), FinishedAt: ts(3), LogSize: 10, MaxRSS: 5}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.applyBatch(ctx, tx, &Batch{Runs: []*Run{run}, Jobs: []*Job{job}, Logs: []*LogChunk{{JobID: 70, Stream: "stdout", Time: ts(2), Data: []byte("0123456789")}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open()
	got, err := s.GetRun(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(run, got); diff != "" {
		t.Errorf("the run after the upgrade (-before +after):\n%s", diff)
	}
	jobs, err := s.ListJobs(ctx, 7)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %v (%v)", jobs, err)
	}
	if diff := cmp.Diff(job, jobs[0]); diff != "" {
		t.Errorf("the job after the upgrade (-before +after):\n%s", diff)
	}
	if logs, err := s.ReadLogs(ctx, 70, 0, 10); err != nil || len(logs) != 1 || string(logs[0].Data) != "0123456789" {
		t.Errorf("logs %v (%v)", logs, err)
	}
	u, err := s.UserByToken(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&User{ID: 1, Name: "admin", Admin: true}, u, cmpopts.IgnoreFields(User{}, "CreatedAt")); diff != "" {
		t.Errorf("the old token's user (-want +got):\n%s", diff)
	}
	toks, err := s.ListTokens(ctx, 1)
	if err != nil || len(toks) != 1 || toks[0].ID != hash[:16] || toks[0].Name != "first" {
		t.Errorf("the old token listed: %+v (%v)", toks, err)
	}
}
