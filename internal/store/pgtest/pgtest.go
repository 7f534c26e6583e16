// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb
// and pg_ctl in a temporary directory of its own, listening on a free port
// of 127.0.0.1 with its Unix socket in that directory, run as an
// unprivileged user when the tests run as root (PostgreSQL refuses root),
// and stopped and removed at the end. A test package starts one cluster
// (lazily, at its first test that asks, through Shared) and stops it in
// its TestMain (StopShared); each test gets a fresh database (Database).
//
// Where PostgreSQL's binaries are missing the tests that need them skip,
// saying to run `make test-deps` (scripts/test-postgres.sh installs
// Debian's postgresql).
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// ErrMissing is why a cluster cannot start on this machine.
var ErrMissing = errors.New("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin, nor $BERTH_PG_BIN): run `make test-deps`")

// Options tune a cluster.
type Options struct {
	// Durable keeps PostgreSQL's fsync and synchronous commit (a
	// benchmark's figures); tests run without them.
	Durable bool
}

// Cluster is a running throwaway PostgreSQL.
type Cluster struct {
	dir      string // owned by the cluster's user; data/, the socket, the log
	bin      string
	port     int
	cred     *syscall.Credential // nil: run as ourselves
	admin    *sql.DB
	watchdog *exec.Cmd
	n        atomic.Int64
}

// binDir finds PostgreSQL's server binaries: $BERTH_PG_BIN, else the
// newest /usr/lib/postgresql/N/bin (Debian's layout), else initdb on PATH.
func binDir() (string, error) {
	if d := os.Getenv("BERTH_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%w ($BERTH_PG_BIN: %v)", ErrMissing, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrMissing
}

// Start makes and starts a cluster.
func Start(o Options) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "berth-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL will not run as root: Debian's postgres user, or nobody.
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: no user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := c.start(o); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		cmd.Env = append(cmd.Env, "HOME="+c.dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w\n%s", name, err, out)
	}
	return nil
}

func (c *Cluster) start(o Options) error {
	data := filepath.Join(c.dir, "data")
	if err := c.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"); err != nil {
		return err
	}
	settings := "-c shared_buffers=32MB -c max_connections=200 -c max_wal_size=1GB"
	if !o.Durable {
		settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	var err error
	for range 3 { // a free port may be taken between finding and binding it
		if c.port, err = freePort(); err != nil {
			return err
		}
		err = c.run("pg_ctl", "start", "-D", data, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "-o",
			fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 %s", c.port, c.dir, settings))
		if err == nil {
			break
		}
	}
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("%w\nlog: %s", err, log)
	}
	c.startWatchdog()
	if c.admin, err = sql.Open("pgx", c.URL("postgres")); err != nil {
		return err
	}
	return c.admin.Ping()
}

// startWatchdog starts a process of its own session that stops the
// cluster and removes its directory if this process dies without doing
// it (a panicking test, a timeout): nothing is left on a shared machine.
func (c *Cluster) startWatchdog() {
	// SIGQUIT is PostgreSQL's immediate shutdown; the postmaster's PID is
	// the first line of postmaster.pid.
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; ` +
		`pid=$(head -n 1 "$2/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null; ` +
		`for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done; rm -rf "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, "watchdog", strconv.Itoa(os.Getpid()), c.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		c.watchdog = cmd
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is a postgres:// URL of database db, over the cluster's socket.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", db, c.dir, c.port)
}

// Port is the TCP port the cluster listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// CreateDatabase makes a new empty database t_N and returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t_%d", c.n.Add(1))
	if _, err := c.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return c.URL(name), nil
}

// Stop stops the cluster at once (pg_ctl stop -m immediate) and removes
// its directory.
func (c *Cluster) Stop() error {
	if c.admin != nil {
		c.admin.Close()
	}
	var err error
	if c.port != 0 {
		err = c.run("pg_ctl", "stop", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w")
	}
	if c.watchdog != nil {
		_ = c.watchdog.Process.Kill()
		_ = c.watchdog.Wait()
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

var shared struct {
	sync.Mutex
	c   *Cluster
	err error
}

// Shared returns the test binary's cluster, starting it at the first call.
func Shared() (*Cluster, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.c == nil && shared.err == nil {
		shared.c, shared.err = Start(Options{})
	}
	return shared.c, shared.err
}

// StopShared stops the shared cluster if one was started (TestMain's job,
// after m.Run).
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
		shared.c = nil
	}
}

// Database returns the URL of a fresh database in the shared cluster,
// skipping tb where PostgreSQL is not installed.
func Database(tb testing.TB) string {
	tb.Helper()
	c, err := Shared()
	if errors.Is(err, ErrMissing) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := c.CreateDatabase(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return url
}

// Available reports whether PostgreSQL's binaries are here.
func Available() bool {
	_, err := binDir()
	return err == nil
}
