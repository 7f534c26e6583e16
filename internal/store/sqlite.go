package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

//go:embed migrations/*.sql
var sqliteMigrations embed.FS

// SQLite is the Store on one SQLite file in WAL mode. Writes go through one
// connection (SQLite has one writer anyway); reads use a pool that WAL lets
// run beside the writer.
type SQLite struct {
	sqlDB
	sync string // the writer's synchronous setting: normal or full
	// ckpt runs WAL checkpoints off the commit path (see checkpointer).
	ckpt     *sql.DB
	stopCkpt chan struct{}
	ckptDone chan struct{}
}

var _ Store = (*SQLite)(nil)

// SQLiteOptions tune durability. Sync "normal" (the default) survives any
// crash of the process; "full" also survives a power loss, at a cost per commit.
type SQLiteOptions struct {
	Sync string
}

// OpenSQLite opens (creating if needed) the database at path and migrates it.
func OpenSQLite(ctx context.Context, path string, o SQLiteOptions) (*SQLite, error) {
	if o.Sync == "" {
		o.Sync = "normal"
	}
	if o.Sync != "normal" && o.Sync != "full" {
		return nil, fmt.Errorf("store: sqlite sync %q: want normal or full", o.Sync)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := private(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+o.Sync+")")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	// A 16 MB cache keeps hot index pages in memory (SQLite's default is
	// 2 MB; 64 MB cost 60-100 MB of RSS with 100,000 waiting runs and no
	// measurable submission speed: the OS caches the file). Commits never
	// checkpoint (a checkpoint in the commit path stalls every writer
	// behind it): a connection of its own does, in the background.
	q.Add("_pragma", "cache_size(-16384)")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	q.Add("_txlock", "immediate")
	dsn := "file:" + dsnPath(path) + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	s := &SQLite{sqlDB: sqlDB{w: w, d: sqliteDialect}, sync: o.Sync}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		w.Close()
		return nil, err
	}
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", "file:"+dsnPath(path)+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	s.r = r
	cq := url.Values{}
	cq.Add("_pragma", "busy_timeout(10000)")
	if s.ckpt, err = sql.Open("sqlite", "file:"+dsnPath(path)+"?"+cq.Encode()); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s.ckpt.SetMaxOpenConns(1)
	s.stopCkpt, s.ckptDone = make(chan struct{}), make(chan struct{})
	go s.checkpointer(time.Second)
	return s, nil
}

// private makes the database file, and the WAL and shared-memory files
// beside it, readable by their owner only (0600): they hold every run's
// configuration and the tokens' hashes. SQLite gives the files it creates
// the database file's mode, so a new file is created 0600 before SQLite
// opens it.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("store: %w", err)
		}
	}
	return nil
}

// checkpointer copies the WAL back into the database file every period
// while writes go on (PASSIVE: it never blocks readers or the writer).
func (s *SQLite) checkpointer(period time.Duration) {
	defer close(s.ckptDone)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-s.stopCkpt:
			_, _ = s.ckpt.Exec("PRAGMA wal_checkpoint(PASSIVE)")
			return
		case <-t.C:
			if _, err := s.ckpt.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
				// Not fatal: the next tick tries again; the WAL only grows.
				continue
			}
		}
	}
}

// dsnPath escapes what a file: URI would read as its query or fragment, so
// that "/data/a#1/berth.db" is that file and not "/data/a".
func dsnPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
}

func (s *SQLite) migrate(ctx context.Context) error {
	sub, err := fs.Sub(sqliteMigrations, "migrations")
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.w, sub)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// Close stops the checkpointer and closes the connections.
func (s *SQLite) Close() error {
	var errs []error
	if s.stopCkpt != nil {
		close(s.stopCkpt)
		<-s.ckptDone
		s.stopCkpt = nil
		errs = append(errs, s.ckpt.Close())
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	// Closed cleanly, every run ID handed out is in the table: its mark
	// comes down to them, so that run IDs (Slurm's job IDs) go on without
	// a gap after a restart (after a crash they skip what was reserved).
	// The job mark stays: a waiting run's jobs have IDs but no rows until
	// it is placed, and those IDs, shown by the API, must not be reissued;
	// a gap in job IDs is harmless.
	_, err := s.w.Exec(`UPDATE reserved_ids SET upto = MIN(upto, (SELECT ` + maxRunID + `)) WHERE name = 'runs'`)
	errs = append(errs, err)
	return errors.Join(append(errs, s.w.Close())...)
}

// Apply commits b in one transaction.
func (s *SQLite) Apply(ctx context.Context, b *Batch) error {
	if b.Reserve != (Reserve{}) && s.sync != "full" {
		// A reservation is synced to disk: IDs above the old mark may be
		// acknowledged from now on, and must never be given again.
		if _, err := s.w.ExecContext(ctx, "PRAGMA synchronous=FULL"); err != nil {
			return fmt.Errorf("store: sync: %w", err)
		}
		defer s.w.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous="+s.sync)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := s.applyBatch(ctx, tx, b); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}
