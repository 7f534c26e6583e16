package server

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
	"github.com/berth-hq/berth/internal/store/pgtest"
)

const testToken = "test-token"

// harness is a real server on a real database, served over real HTTP: a
// SQLite file in the test's directory, or a PostgreSQL database (harnessStore).
type harness struct {
	srv    *Server
	st     store.Store
	http   *httptest.Server
	c      *client.Client
	cancel context.CancelFunc
	done   chan error
}

func newHarness(tb testing.TB, dir string) *harness {
	return newHarnessAt(tb, dir, "127.0.0.1:0")
}

// newHarnessAt serves on addr, so that a restarted server keeps its URL.
func newHarnessAt(tb testing.TB, dir, addr string) *harness {
	tb.Helper()
	return newHarnessWith(tb, dir, addr, nil)
}

// newHarnessWith serves with a scheduling policy file's rules.
func newHarnessWith(tb testing.TB, dir, addr string, rules *policy.Policy) *harness {
	tb.Helper()
	return newHarnessCfg(tb, dir, addr, func(c *Config) { c.Rules = rules })
}

// newHarnessCfg serves with a configuration the test adjusts.
func newHarnessCfg(tb testing.TB, dir, addr string, adjust func(*Config)) *harness {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := harnessStore(tb, ctx, dir)
	cfg := Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StopGrace: 1e9, PingEvery: 2e8}
	adjust(&cfg)
	srv, err := New(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.EnsureAdmin(ctx, testToken); err != nil && !isDup(err) {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	// A restart listens where the last server did: a client's connection
	// elsewhere on this machine may hold that port a moment.
	for end := time.Now().Add(10 * time.Second); err != nil && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	h := &harness{srv: srv, st: st, http: hs, cancel: cancel, done: make(chan error, 1)}
	h.c = client.New(h.http.URL, testToken)
	go func() { h.done <- srv.Run(ctx) }()
	tb.Cleanup(h.close)
	return h
}

// pgDatabases are the PostgreSQL databases of the harnesses' directories,
// so that a restarted harness (the same dir) opens its predecessor's.
var pgDatabases sync.Map // dir → URL

// onPostgres reports whether tb's harnesses keep their state in
// PostgreSQL: the tests TestOnPostgres runs, or every test when
// BERTH_TEST_DB=postgres.
func onPostgres(tb testing.TB) bool {
	return os.Getenv("BERTH_TEST_DB") == "postgres" || strings.HasPrefix(tb.Name(), "TestOnPostgres/")
}

// harnessStore opens the store of a harness on dir: dir's SQLite file,
// or, on PostgreSQL, dir's database (a fresh one the first time), held
// exclusively as berth server holds it.
func harnessStore(tb testing.TB, ctx context.Context, dir string) store.Store {
	tb.Helper()
	if !onPostgres(tb) {
		st, err := store.OpenSQLite(ctx, filepath.Join(dir, "berth.db"), store.SQLiteOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		return st
	}
	url, ok := pgDatabases.Load(dir)
	if !ok {
		url = pgtest.Database(tb)
		pgDatabases.Store(dir, url)
	}
	st, err := store.OpenPostgres(ctx, url.(string), store.PostgresOptions{Exclusive: true})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// execRaw runs q on the database of the harnesses of dir behind the
// store's back (a test that deletes rows as a lost transaction would): the
// SQLite file, or the PostgreSQL database, its ? placeholders made $1, $2…
func execRaw(tb testing.TB, dir, q string, args ...any) {
	tb.Helper()
	driver, dsn := "sqlite", filepath.Join(dir, "berth.db")
	if url, ok := pgDatabases.Load(dir); ok {
		driver, dsn = "pgx", url.(string)
		for i := 1; strings.Contains(q, "?"); i++ {
			q = strings.Replace(q, "?", "$"+strconv.Itoa(i), 1)
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q, args...); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
}

func isDup(err error) bool {
	return err != nil && (contains(err.Error(), "UNIQUE") || contains(err.Error(), "constraint"))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func (h *harness) close() {
	if h.cancel == nil {
		return
	}
	h.http.CloseClientConnections()
	h.http.Close()
	h.cancel()
	<-h.done
	h.st.Close()
	h.cancel = nil
}

func task(tb testing.TB, yaml string) *spec.Task {
	tb.Helper()
	t, err := spec.Parse("test.yml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}
