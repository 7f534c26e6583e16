package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func openTest(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(context.Background(), path, SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSyncOption(t *testing.T) {
	if _, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "b.db"), SQLiteOptions{Sync: "sometimes"}); err == nil {
		t.Fatal("an unknown sync mode was accepted")
	}
}

func TestWALMode(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "b.db"))
	var mode string
	if err := s.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal_mode = %q, want wal", mode)
	}
}

// A '#' or '?' in the path names a directory, not a URI fragment or query.
func TestOddPath(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "home#1?x=%20")
	s := openTest(t, filepath.Join(dir, "b.db"))
	if _, err := s.EnsureProject(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.db")); err != nil {
		t.Fatalf("the database is not where it was asked to be: %v", err)
	}
}
