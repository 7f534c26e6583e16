package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// TestMain stops the PostgreSQL cluster the tests started, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

// forEachStore runs f on each backend, as the subtests sqlite and
// postgres, each on a database of its own; open opens that database (again,
// after a Close: what was committed must be there) and closes it when the
// test ends. The postgres subtest skips where PostgreSQL is not installed.
func forEachStore(t *testing.T, f func(t *testing.T, open func() Store)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "b.db")
		f(t, func() Store { return openTest(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Database(t)
		f(t, func() Store { return openPostgresTest(t, url, PostgresOptions{}) })
	})
}

func openPostgresTest(t *testing.T, url string, o PostgresOptions) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
