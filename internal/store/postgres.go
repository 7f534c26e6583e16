package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the pure-Go "pgx" driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/postgres/*.sql
var postgresMigrations embed.FS

// Postgres is the Store on a PostgreSQL database, through pgx's
// database/sql driver. The tables and the statements are SQLite's (see
// sqlDB): times in Unix nanoseconds, JSON as TEXT. Every commit is durable
// when Apply returns (PostgreSQL's synchronous_commit, on by default), so
// a batch that reserves IDs needs nothing more.
type Postgres struct {
	sqlDB
	// owner holds the session advisory lock of PostgresOptions.Exclusive,
	// or a replica's lease (lease.go); leaseMu guards it for the latter.
	owner   *sql.Conn
	leaseMu sync.Mutex
	// fence is the epoch every Apply checks (0: none; lease.go); refused
	// counts the batches refused for it.
	fence, refused atomic.Int64
	// replica: several servers share the database (PostgresOptions).
	replica bool
}

var _ Store = (*Postgres)(nil)

// PostgresOptions tune how the store is opened.
type PostgresOptions struct {
	// Exclusive takes a session advisory lock on a connection of its own
	// (serverLockID) and refuses to open when another process holds it:
	// one berth server per database, as the lock file next to a SQLite
	// database. It is a guard, not a lease; replicas (Replica) take the
	// same lock as their lease instead (lease.go).
	Exclusive bool
	// MaxConns bounds the connections (0: 16).
	MaxConns int
	// Replica: one of several servers on this database, which take the
	// lead by TryLease and TakeOver (lease.go). Close then leaves the
	// shared ID reservations alone (another replica may lead).
	Replica bool
}

// serverLockID is the advisory lock a berth server holds on its database
// (goose's migration lock is another: 5887940537704921958).
const serverLockID int64 = 0x6265727468_737276 // "berth" "srv"

// ErrLocked is returned when another server holds the database.
var ErrLocked = errors.New("store: another berth server uses this database")

// OpenPostgres connects to the database named by dsn (a postgres:// URL or
// libpq's key=value form) and migrates it.
func OpenPostgres(ctx context.Context, dsn string, o PostgresOptions) (*Postgres, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	p := &Postgres{sqlDB: sqlDB{w: db, r: db, d: postgresDialect}, replica: o.Replica}
	if o.Exclusive {
		if err := p.lockOwner(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := p.migrate(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Postgres) lockOwner(ctx context.Context) error {
	c, err := p.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: postgres: %w", err)
	}
	// A server killed a moment ago may hold the lock until PostgreSQL
	// sees its connection close: try for a few seconds, as lockDir does.
	for deadline := time.Now().Add(5 * time.Second); ; {
		var ok bool
		if err := c.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, serverLockID).Scan(&ok); err != nil {
			c.Close()
			return fmt.Errorf("store: postgres: lock: %w", err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			c.Close()
			return ErrLocked
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.owner = c
	return nil
}

func (p *Postgres) migrate(ctx context.Context) error {
	sub, err := fs.Sub(postgresMigrations, "migrations/postgres")
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	// Migrations run under an advisory lock of goose's: two processes
	// starting on one new database do not both create the tables.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	pr, err := goose.NewProvider(goose.DialectPostgres, p.w, sub, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := pr.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// Apply commits b in one transaction.
func (p *Postgres) Apply(ctx context.Context, b *Batch) error {
	tx, err := p.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := p.checkFence(ctx, tx); err != nil {
		return err
	}
	if err := p.applyBatch(ctx, tx, b); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// Close brings the run-ID mark down to the runs in the table, as
// SQLite's does, releases the server's lock and closes the pool.
func (p *Postgres) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Only the run mark comes down (see SQLite's Close: a waiting run's
	// jobs have IDs but no rows).
	var errs []error
	if !p.replica {
		_, err := p.w.ExecContext(ctx, `UPDATE reserved_ids SET upto = LEAST(upto, (SELECT `+maxRunID+`)) WHERE name = 'runs'`)
		errs = append(errs, err)
	}
	if p.owner != nil {
		// Closing the connection ends the session, and its lock with it.
		errs = append(errs, p.owner.Close())
		p.owner = nil
	}
	return errors.Join(append(errs, p.w.Close())...)
}

// Where a store is: SQLite's file or PostgreSQL's database.
const (
	KindSQLite   = "sqlite"
	KindPostgres = "postgres"
)

var schemeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*):`) })

// ParseLocation tells what --db names: postgres://… or postgresql://… is
// a PostgreSQL database, sqlite:PATH or a bare path a SQLite file. target
// is what the store's Open takes (the URL, the path).
func ParseLocation(loc string) (kind, target string, err error) {
	m := schemeRE().FindStringSubmatch(loc)
	if m == nil || !strings.HasPrefix(loc[len(m[0]):], "//") && m[1] != "sqlite" {
		// No scheme: a path (a colon later in it, as in "a:b/berth.db",
		// is part of the name).
		return KindSQLite, loc, nil
	}
	switch strings.ToLower(m[1]) {
	case "postgres", "postgresql":
		return KindPostgres, loc, nil
	case "sqlite":
		path := strings.TrimPrefix(loc[len(m[0]):], "//")
		if path == "" {
			return "", "", fmt.Errorf("store: %q names no file", loc)
		}
		return KindSQLite, path, nil
	}
	return "", "", fmt.Errorf("store: %q: unknown scheme %q (want a path, sqlite:PATH or postgres://…)", Redact(loc), m[1])
}

// Redact hides the password of a database URL, for messages and logs.
func Redact(loc string) string {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme == "" {
		if strings.Contains(loc, "password=") {
			return regexp.MustCompile(`password=\S*`).ReplaceAllString(loc, "password=xxxxx")
		}
		return loc
	}
	return u.Redacted()
}
