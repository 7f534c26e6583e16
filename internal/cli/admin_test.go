package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/store"
	"github.com/berth-hq/berth/internal/store/pgtest"
)

// seedRuns writes n runs from ID first into st.
func seedRuns(t *testing.T, st store.Store, first, n int) {
	t.Helper()
	ctx := context.Background()
	pid, _ := st.EnsureProject(ctx, "main")
	uid, _ := st.EnsureUser(ctx, "admin", true)
	b := &store.Batch{}
	for i := first; i < first+n; i++ {
		b.Runs = append(b.Runs, &store.Run{ID: int64(i), ProjectID: pid, UserID: uid, Name: fmt.Sprintf("r%d", i), Status: "submitted",
			Spec: []byte(`{"type":"task","commands":["true"]}`), SubmittedAt: time.Unix(int64(i), 0).UTC(), ArrayIndex: -1})
	}
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// A backup of a SQLite database taken while it is written is a database
// of its own, whole and private; a backup never overwrites a file.
func TestAdminBackupSQLite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "berth.db")
	st, err := store.OpenSQLite(context.Background(), path, store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedRuns(t, st, 1, 100)
	// Writes go on while the copy is made.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range 20 {
			seedRuns(t, st, 1000+k*10, 10)
		}
	}()
	to := filepath.Join(dir, "copy.db")
	out := berth(t, "admin", "backup", to, "--db", path)
	wg.Wait()
	if !strings.HasPrefix(out, "Backed up "+path+" to "+to+" (") {
		t.Errorf("backup said %q", out)
	}
	fi, err := os.Stat(to)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the copy: %v %v", fi, err)
	}
	cp, err := store.OpenSQLite(context.Background(), to, store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	runs, err := cp.ListRuns(context.Background(), store.RunFilter{All: true})
	if err != nil || len(runs) < 100 || len(runs)%10 != 0 {
		t.Errorf("the copy holds %d runs (%v): want the first 100 and whole batches of the others", len(runs), err)
	}
	var errw bytes.Buffer
	if code := Main([]string{"admin", "backup", to, "--db", path}, strings.NewReader(""), &out2{}, &errw); code == 0 || !strings.Contains(errw.String(), "exists") {
		t.Errorf("a backup over an existing file: exit %d, %s", code, errw.String())
	}
}

// out2 discards what is written to it.
type out2 struct{}

func (out2) Write(p []byte) (int, error) { return len(p), nil }

// A PostgreSQL database is backed up by pg_dump, in the custom format
// pg_restore reads.
func TestAdminBackupPostgres(t *testing.T) {
	if _, err := exec.LookPath("pg_dump"); err != nil {
		t.Skip("no pg_dump here: run `make test-deps`")
	}
	url := pgtest.Database(t)
	st, err := store.OpenPostgres(context.Background(), url, store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedRuns(t, st, 1, 10)
	to := filepath.Join(t.TempDir(), "copy.dump")
	berth(t, "admin", "backup", to, "--db", url)
	b, err := os.ReadFile(to)
	if err != nil || !bytes.HasPrefix(b, []byte("PGDMP")) {
		t.Fatalf("the dump: %d bytes, %v", len(b), err)
	}
	list, err := exec.Command("pg_restore", "--list", to).CombinedOutput()
	if err != nil || !strings.Contains(string(list), "TABLE DATA public runs") {
		t.Errorf("pg_restore --list: %v\n%s", err, list)
	}
}
