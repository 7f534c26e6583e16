package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/store"
	"github.com/berth-hq/berth/internal/store/pgtest"
)

// berth admin migrate-store moves a SQLite database into PostgreSQL and
// that back into a new SQLite file, with its runs; it refuses a database
// a server holds.
func TestAdminMigrateStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "berth.db")
	st, err := store.OpenSQLite(ctx, path, store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seedRuns(t, st, 1, 50)
	st.Close()
	url := pgtest.Database(t)

	out := berth(t, "admin", "migrate-store", "--from", "sqlite:"+path, "--to", url)
	if !strings.Contains(out, "counts verified") || !strings.Contains(out, "runs                 50") {
		t.Errorf("migrate-store to PostgreSQL said:\n%s", out)
	}
	pg, err := store.OpenPostgres(ctx, url, store.PostgresOptions{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if runs, err := pg.ListRuns(ctx, store.RunFilter{All: true}); err != nil || len(runs) != 50 {
		t.Errorf("PostgreSQL holds %d runs (%v), want 50", len(runs), err)
	}
	// A server holds it (the same advisory lock): refused.
	var errw bytes.Buffer
	back := filepath.Join(dir, "back", "berth.db")
	if code := Main([]string{"admin", "migrate-store", "--from", url, "--to", back}, strings.NewReader(""), &out2{}, &errw); code == 0 ||
		!strings.Contains(errw.String(), "another berth server") {
		t.Errorf("migrate-store from a held database: exit %d: %s", code, errw.String())
	}
	pg.Close()

	out = berth(t, "admin", "migrate-store", "--from", url, "--to", back)
	if !strings.Contains(out, "runs                 50") {
		t.Errorf("migrate-store back to SQLite said:\n%s", out)
	}
	sq, err := store.OpenSQLite(ctx, back, store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	if runs, err := sq.ListRuns(ctx, store.RunFilter{All: true}); err != nil || len(runs) != 50 {
		t.Errorf("the SQLite copy holds %d runs (%v), want 50", len(runs), err)
	}
	// Again into the copy, which has rows now: refused.
	errw.Reset()
	if code := Main([]string{"admin", "migrate-store", "--from", "sqlite:" + path, "--to", back}, strings.NewReader(""), &out2{}, &errw); code == 0 ||
		!strings.Contains(errw.String(), "not empty") {
		t.Errorf("migrate-store into a database with rows: exit %d: %s", code, errw.String())
	}
}
