package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
	w    *sql.DB
	r    *sql.DB
	sync string // the writer's synchronous setting: normal or full
	// stmts are the write statements, prepared once on the writer connection.
	stmts map[string]*sql.Stmt
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
	s := &SQLite{w: w, sync: o.Sync}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	s.stmts = map[string]*sql.Stmt{}
	for _, text := range []string{upsertRun, upsertJob, upsertNode, insertEvent, insertLog, upsertStep, insertKey} {
		st, err := w.PrepareContext(ctx, text)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("store: prepare: %w", err)
		}
		s.stmts[text] = st
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
	_, err := s.w.Exec(`UPDATE reserved_ids SET upto = MIN(upto, (SELECT COALESCE(MAX(id), 0) FROM runs)) WHERE name = 'runs'`)
	errs = append(errs, err)
	return errors.Join(append(errs, s.w.Close())...)
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func isActive(status string) int {
	switch status {
	case "done", "failed", "terminated", "aborted":
		return 0
	}
	return 1
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

const (
	upsertRun = `INSERT INTO runs (id, project_id, user_id, name, status, reason, exit_code, priority, spec,
  submitted_at, started_at, finished_at, stop_req, active, estimated_start, array_id, array_index, meta)
  VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET name=excluded.name, status=excluded.status, reason=excluded.reason,
  exit_code=excluded.exit_code, priority=excluded.priority, started_at=excluded.started_at,
  finished_at=excluded.finished_at, stop_req=excluded.stop_req, active=excluded.active,
  estimated_start=excluded.estimated_start, meta=excluded.meta, spec=excluded.spec`
	upsertJob = `INSERT INTO jobs (id, run_id, num, attempt, status, reason, exit_code, node, alloc,
  submitted_at, started_at, finished_at, log_size, active, max_rss) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET status=excluded.status, reason=excluded.reason, exit_code=excluded.exit_code,
  node=excluded.node, alloc=excluded.alloc, started_at=excluded.started_at, finished_at=excluded.finished_at,
  log_size=excluded.log_size, active=excluded.active, max_rss=excluded.max_rss`
	upsertNode = `INSERT INTO nodes (name, info, registered_at, last_seen, drain) VALUES (?,?,?,?,?)
ON CONFLICT (name) DO UPDATE SET info=excluded.info, registered_at=excluded.registered_at, last_seen=excluded.last_seen,
  drain=excluded.drain`
	insertKey   = `INSERT INTO idempotency_keys (user_id, key, run_id, created_at) VALUES (?,?,?,?)`
	insertEvent = `INSERT INTO events (run_id, job_id, time, type, message) VALUES (?,?,?,?,?)`
	insertLog   = `INSERT INTO log_chunks (job_id, off, stream, time, data) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING`
	upsertStep  = `INSERT INTO steps (run_id, step_id, name, argv, ranks, ntasks, nodelist, pty, status, exit_code, exits,
  started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (run_id, step_id) DO UPDATE SET status=excluded.status, exit_code=excluded.exit_code, exits=excluded.exits,
  finished_at=excluded.finished_at`
)

func (s *SQLite) applyBatch(ctx context.Context, tx *sql.Tx, b *Batch) error {
	prep := func(q string, n int) (*sql.Stmt, error) {
		if n == 0 {
			return nil, nil
		}
		return tx.StmtContext(ctx, s.stmts[q]), nil
	}
	for _, k := range b.Keys {
		if _, err := tx.StmtContext(ctx, s.stmts[insertKey]).ExecContext(ctx, k.UserID, k.Key, k.RunID, nanos(k.Created)); err != nil {
			return fmt.Errorf("store: idempotency key: %w", err)
		}
	}
	for _, r := range []struct {
		name string
		upto int64
	}{{"runs", b.Reserve.Runs}, {"jobs", b.Reserve.Jobs}} {
		if r.upto == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO reserved_ids (name, upto) VALUES (?, ?)
  ON CONFLICT (name) DO UPDATE SET upto = MAX(upto, excluded.upto)`, r.name, r.upto); err != nil {
			return fmt.Errorf("store: reserve %s: %w", r.name, err)
		}
	}
	st, err := prep(upsertRun, len(b.Runs))
	if err != nil {
		return err
	}
	for _, r := range b.Runs {
		if _, err := st.ExecContext(ctx, r.ID, r.ProjectID, r.UserID, r.Name, r.Status, r.Reason, r.ExitCode,
			r.Priority, string(r.Spec), nanos(r.SubmittedAt), nanos(r.StartedAt), nanos(r.FinishedAt),
			r.StopReq, isActive(r.Status), nanos(r.EstimatedStart), r.ArrayID, r.ArrayIndex, string(r.Meta)); err != nil {
			return fmt.Errorf("store: run %d: %w", r.ID, err)
		}
	}
	if st, err = prep(upsertJob, len(b.Jobs)); err != nil {
		return err
	}
	for _, j := range b.Jobs {
		alloc := j.Alloc
		if len(alloc) == 0 {
			alloc = []byte("{}")
		}
		if _, err := st.ExecContext(ctx, j.ID, j.RunID, j.Num, j.Attempt, j.Status, j.Reason, j.ExitCode,
			j.Node, string(alloc), nanos(j.SubmittedAt), nanos(j.StartedAt), nanos(j.FinishedAt),
			j.LogSize, isActive(j.Status), j.MaxRSS); err != nil {
			return fmt.Errorf("store: job %d: %w", j.ID, err)
		}
	}
	if st, err = prep(upsertNode, len(b.Nodes)); err != nil {
		return err
	}
	for _, n := range b.Nodes {
		if _, err := st.ExecContext(ctx, n.Name, string(n.Info), nanos(n.RegisteredAt), nanos(n.LastSeen), string(n.Drain)); err != nil {
			return fmt.Errorf("store: node %s: %w", n.Name, err)
		}
	}
	if st, err = prep(insertEvent, len(b.Events)); err != nil {
		return err
	}
	for _, e := range b.Events {
		if _, err := st.ExecContext(ctx, e.RunID, e.JobID, nanos(e.Time), e.Type, e.Message); err != nil {
			return fmt.Errorf("store: event: %w", err)
		}
	}
	if st, err = prep(insertLog, len(b.Logs)); err != nil {
		return err
	}
	for _, l := range b.Logs {
		if _, err := st.ExecContext(ctx, l.JobID, l.Offset, l.Stream, nanos(l.Time), l.Data); err != nil {
			return fmt.Errorf("store: log of job %d: %w", l.JobID, err)
		}
	}
	if st, err = prep(upsertStep, len(b.Steps)); err != nil {
		return err
	}
	for _, p := range b.Steps {
		exits := p.Exits
		if len(exits) == 0 {
			exits = []byte("{}")
		}
		if _, err := st.ExecContext(ctx, p.RunID, p.StepID, p.Name, string(p.Argv), string(p.Ranks), p.NTasks, p.NodeList,
			p.PTY, p.Status, p.ExitCode, string(exits), nanos(p.StartedAt), nanos(p.FinishedAt)); err != nil {
			return fmt.Errorf("store: step %d.%d: %w", p.RunID, p.StepID, err)
		}
	}
	return nil
}

const runCols = `id, project_id, user_id, name, status, reason, exit_code, priority, spec, submitted_at, started_at, finished_at, stop_req, estimated_start, array_id, array_index, meta`
const jobCols = `id, run_id, num, attempt, status, reason, exit_code, node, alloc, submitted_at, started_at, finished_at, log_size, max_rss`

type scanner interface{ Scan(...any) error }

func scanRun(sc scanner) (*Run, error) {
	var r Run
	var spec, meta string
	var ec sql.NullInt64
	var sub, st, fin, est int64
	if err := sc.Scan(&r.ID, &r.ProjectID, &r.UserID, &r.Name, &r.Status, &r.Reason, &ec, &r.Priority, &spec,
		&sub, &st, &fin, &r.StopReq, &est, &r.ArrayID, &r.ArrayIndex, &meta); err != nil {
		return nil, err
	}
	if meta != "" {
		r.Meta = []byte(meta)
	}
	r.EstimatedStart = fromNanos(est)
	if ec.Valid {
		v := int(ec.Int64)
		r.ExitCode = &v
	}
	r.Spec = []byte(spec)
	r.SubmittedAt, r.StartedAt, r.FinishedAt = fromNanos(sub), fromNanos(st), fromNanos(fin)
	return &r, nil
}

// scanBriefRun reads what RunFilter.Brief selects.
func scanBriefRun(sc scanner) (*Run, error) {
	var r Run
	var st int64
	if err := sc.Scan(&r.ID, &r.Status, &st, &r.ArrayID, &r.ArrayIndex); err != nil {
		return nil, err
	}
	r.StartedAt = fromNanos(st)
	return &r, nil
}

func scanJob(sc scanner) (*Job, error) {
	var j Job
	var alloc string
	var ec sql.NullInt64
	var sub, st, fin int64
	if err := sc.Scan(&j.ID, &j.RunID, &j.Num, &j.Attempt, &j.Status, &j.Reason, &ec, &j.Node, &alloc,
		&sub, &st, &fin, &j.LogSize, &j.MaxRSS); err != nil {
		return nil, err
	}
	if ec.Valid {
		v := int(ec.Int64)
		j.ExitCode = &v
	}
	j.Alloc = []byte(alloc)
	j.SubmittedAt, j.StartedAt, j.FinishedAt = fromNanos(sub), fromNanos(st), fromNanos(fin)
	return &j, nil
}

func query[T any](ctx context.Context, db *sql.DB, scan func(scanner) (*T, error), q string, args ...any) ([]*T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: query: %w", err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: scan: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: rows: %w", err)
	}
	return out, nil
}

func scanNode(sc scanner) (*Node, error) {
	var n Node
	var info, drain string
	var reg, seen int64
	if err := sc.Scan(&n.Name, &info, &reg, &seen, &drain); err != nil {
		return nil, err
	}
	n.Info = []byte(info)
	if drain != "" {
		n.Drain = []byte(drain)
	}
	n.RegisteredAt, n.LastSeen = fromNanos(reg), fromNanos(seen)
	return &n, nil
}

// LoadActive reads the state the leader keeps in memory.
func (s *SQLite) LoadActive(ctx context.Context) (*Active, error) {
	a := &Active{}
	var err error
	if a.Runs, err = query(ctx, s.w, scanRun, `SELECT `+runCols+` FROM runs WHERE active = 1 ORDER BY id`); err != nil {
		return nil, err
	}
	if a.Jobs, err = query(ctx, s.w, scanJob, `SELECT `+jobCols+` FROM jobs WHERE active = 1 ORDER BY id`); err != nil {
		return nil, err
	}
	if a.Nodes, err = s.ListNodes(ctx); err != nil {
		return nil, err
	}
	if err := s.w.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM runs`).Scan(&a.MaxRunID); err != nil {
		return nil, fmt.Errorf("store: max run id: %w", err)
	}
	if err := s.w.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM jobs`).Scan(&a.MaxJobID); err != nil {
		return nil, fmt.Errorf("store: max job id: %w", err)
	}
	// IDs reserved may have been handed out in transactions since lost.
	var runs, jobs int64
	if err := s.w.QueryRowContext(ctx, `SELECT COALESCE(MAX(CASE name WHEN 'runs' THEN upto END), 0),
  COALESCE(MAX(CASE name WHEN 'jobs' THEN upto END), 0) FROM reserved_ids`).Scan(&runs, &jobs); err != nil {
		return nil, fmt.Errorf("store: reserved ids: %w", err)
	}
	a.MaxRunID, a.MaxJobID = max(a.MaxRunID, runs), max(a.MaxJobID, jobs)
	return a, nil
}

// KeysSince lists the idempotency keys made at or after since.
func (s *SQLite) KeysSince(ctx context.Context, since time.Time) ([]*IdempotencyKey, error) {
	return query(ctx, s.w, func(r scanner) (*IdempotencyKey, error) {
		var k IdempotencyKey
		var at int64
		if err := r.Scan(&k.UserID, &k.Key, &k.RunID, &at); err != nil {
			return nil, err
		}
		k.Created = time.Unix(0, at).UTC()
		return &k, nil
	}, `SELECT user_id, key, run_id, created_at FROM idempotency_keys WHERE created_at >= ? ORDER BY created_at`, nanos(since))
}

// GetRun returns one run by ID.
func (s *SQLite) GetRun(ctx context.Context, id int64) (*Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: run %d: %w", id, err)
	}
	return r, nil
}

// FindRun returns the newest run of the project with that name.
func (s *SQLite) FindRun(ctx context.Context, projectID int64, name string) (*Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE project_id = ? AND name = ? ORDER BY id DESC LIMIT 1`, projectID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: run %q: %w", name, err)
	}
	return r, nil
}

// ListRuns lists runs, newest first.
func (s *SQLite) ListRuns(ctx context.Context, f RunFilter) ([]*Run, error) {
	cols, scan := runCols, scanRun
	if f.Brief {
		cols, scan = `id, status, started_at, array_id, array_index`, scanBriefRun
	}
	q := `SELECT ` + cols + ` FROM runs WHERE 1=1`
	var args []any
	if !f.All {
		q += ` AND active = 1`
	}
	if f.ProjectID != 0 {
		// Most runs are of one project: the unary + keeps SQLite from
		// reading them all through runs_name where another condition
		// selects few.
		q += ` AND +project_id = ?`
		args = append(args, f.ProjectID)
	}
	if f.ArrayID != 0 {
		q += ` AND array_id = ?`
		args = append(args, f.ArrayID)
	}
	if f.IDs != nil {
		in := placeholders(len(f.IDs))
		q += ` AND (id IN (` + in + `) OR array_id IN (` + in + `))`
		for range 2 {
			for _, id := range f.IDs {
				args = append(args, id)
			}
		}
	}
	if f.Users != nil {
		q += ` AND user_id IN (SELECT id FROM users WHERE name IN (` + placeholders(len(f.Users)) + `))`
		for _, u := range f.Users {
			args = append(args, u)
		}
	}
	if f.Statuses != nil {
		q += ` AND status IN (` + placeholders(len(f.Statuses)) + `)`
		for _, st := range f.Statuses {
			args = append(args, st)
		}
	}
	if f.BeforeID != 0 {
		q += ` AND id < ?`
		args = append(args, f.BeforeID)
	}
	order := ` ORDER BY id DESC`
	if !f.Since.IsZero() {
		// finished_at is 0 until a run is final. The window is read through
		// runs_finished: a recent Since selects few runs, whereas Until
		// (often now) selects most, and so does reading by id to spare the
		// sort; without statistics SQLite would pick either of those, so
		// the unary + keeps both from its choice.
		q += ` AND (finished_at = 0 OR finished_at >= ?)`
		args = append(args, nanos(f.Since))
		order = ` ORDER BY +id DESC`
	}
	if !f.Until.IsZero() {
		if f.Since.IsZero() {
			q += ` AND submitted_at < ?`
		} else {
			q += ` AND +submitted_at < ?`
		}
		args = append(args, nanos(f.Until))
	}
	q += order
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	return query(ctx, s.r, scan, q, args...)
}

// placeholders is "?, ?, …" for n values ("NULL" for none, so that IN ()
// matches nothing and stays valid SQL).
func placeholders(n int) string {
	if n == 0 {
		return "NULL"
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// FindArrayTask returns the run of an array's task, or ErrNotFound when
// it does not exist (yet).
func (s *SQLite) FindArrayTask(ctx context.Context, arrayID int64, index int) (*Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE array_id = ? AND array_index = ?`, arrayID, index))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return r, err
}

// ListJobs lists a run's jobs by number and attempt.
func (s *SQLite) ListJobs(ctx context.Context, runID int64) ([]*Job, error) {
	return query(ctx, s.r, scanJob, `SELECT `+jobCols+` FROM jobs WHERE run_id = ? ORDER BY num, attempt`, runID)
}

// ListSteps lists the steps of the runs by run and step ID.
func (s *SQLite) ListSteps(ctx context.Context, runIDs []int64) ([]*Step, error) {
	var out []*Step
	for len(runIDs) > 0 {
		n := min(len(runIDs), jobsChunk)
		args := make([]any, n)
		for i, id := range runIDs[:n] {
			args[i] = id
		}
		got, err := query(ctx, s.r, scanStep, `SELECT run_id, step_id, name, argv, ranks, ntasks, nodelist, pty, status, exit_code, exits,
  started_at, finished_at FROM steps WHERE run_id IN (`+placeholders(n)+`) ORDER BY run_id, step_id`, args...)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		runIDs = runIDs[n:]
	}
	return out, nil
}

// jobsChunk bounds the run IDs of one ListJobsOf query (SQLite allows
// 32,766 parameters; PostgreSQL 65,535).
const jobsChunk = 1000

// ListJobsOf lists the jobs of the given runs by run, number and attempt.
func (s *SQLite) ListJobsOf(ctx context.Context, runIDs []int64) ([]*Job, error) {
	ids := slices.Sorted(slices.Values(runIDs))
	ids = slices.Compact(ids)
	var out []*Job
	for len(ids) > 0 {
		n := min(len(ids), jobsChunk)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		jobs, err := query(ctx, s.r, scanJob, `SELECT `+jobCols+` FROM jobs WHERE run_id IN (`+placeholders(n)+`) ORDER BY run_id, num, attempt`, args...)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
		ids = ids[n:]
	}
	return out, nil
}

func scanStep(sc scanner) (*Step, error) {
	var p Step
	var argv, ranks, exits string
	var started, finished int64
	if err := sc.Scan(&p.RunID, &p.StepID, &p.Name, &argv, &ranks, &p.NTasks, &p.NodeList, &p.PTY, &p.Status, &p.ExitCode,
		&exits, &started, &finished); err != nil {
		return nil, err
	}
	p.Argv, p.Ranks, p.Exits = []byte(argv), []byte(ranks), []byte(exits)
	p.StartedAt, p.FinishedAt = fromNanos(started), fromNanos(finished)
	return &p, nil
}

// ListNodes lists every registered node by name.
func (s *SQLite) ListNodes(ctx context.Context) ([]*Node, error) {
	return query(ctx, s.r, scanNode, `SELECT name, info, registered_at, last_seen, drain FROM nodes ORDER BY name`)
}

// ReadLogs returns a job's chunks from offset on, in order.
func (s *SQLite) ReadLogs(ctx context.Context, jobID int64, offset int64, limit int) ([]*LogChunk, error) {
	if limit <= 0 {
		limit = 1000
	}
	return query(ctx, s.r, func(sc scanner) (*LogChunk, error) {
		var l LogChunk
		var t int64
		if err := sc.Scan(&l.JobID, &l.Offset, &l.Stream, &t, &l.Data); err != nil {
			return nil, err
		}
		l.Time = fromNanos(t)
		return &l, nil
	}, `SELECT job_id, off, stream, time, data FROM log_chunks WHERE job_id = ? AND off >= ? ORDER BY off LIMIT ?`, jobID, offset, limit)
}

// ListEvents returns a run's history in order.
func (s *SQLite) ListEvents(ctx context.Context, runID int64) ([]*Event, error) {
	return query(ctx, s.r, func(sc scanner) (*Event, error) {
		var e Event
		var t int64
		if err := sc.Scan(&e.RunID, &e.JobID, &t, &e.Type, &e.Message); err != nil {
			return nil, err
		}
		e.Time = fromNanos(t)
		return &e, nil
	}, `SELECT run_id, job_id, time, type, message FROM events WHERE run_id = ? ORDER BY id`, runID)
}

// EnsureProject creates the project when missing.
func (s *SQLite) EnsureProject(ctx context.Context, name string) (int64, error) {
	return s.ensure(ctx, `INSERT INTO projects (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
		`SELECT id FROM projects WHERE name = ?`, name, time.Now().UnixNano())
}

// EnsureUser creates the user when missing.
func (s *SQLite) EnsureUser(ctx context.Context, name string, admin bool) (int64, error) {
	a := 0
	if admin {
		a = 1
	}
	return s.ensure(ctx, `INSERT INTO users (name, created_at, admin) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		`SELECT id FROM users WHERE name = ?`, name, time.Now().UnixNano(), a)
}

func (s *SQLite) ensure(ctx context.Context, insert, sel string, name string, extra ...any) (int64, error) {
	if _, err := s.w.ExecContext(ctx, insert, append([]any{name}, extra...)...); err != nil {
		return 0, fmt.Errorf("store: create %q: %w", name, err)
	}
	var id int64
	if err := s.w.QueryRowContext(ctx, sel, name).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: look up %q: %w", name, err)
	}
	return id, nil
}

// AddToken stores the hash of a new token of the user.
func (s *SQLite) AddToken(ctx context.Context, userID int64, hash, name string) error {
	return s.CreateToken(ctx, &Token{ID: NewTokenID(), Hash: hash, Name: name, UserID: userID})
}

// NewTokenID is a random public ID for a token.
func NewTokenID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// UserByToken resolves a token hash to its (live) user.
func (s *SQLite) UserByToken(ctx context.Context, hash string) (*User, error) {
	_, u, err := s.TokenByHash(ctx, hash)
	if err == nil && u == nil {
		err = fmt.Errorf("token: a node's: %w", ErrNotFound)
	}
	return u, err
}

const userCols = `id, name, admin, created_at, deleted_at`

func scanUser(sc scanner) (*User, error) {
	var u User
	var admin int
	var created, deleted int64
	if err := sc.Scan(&u.ID, &u.Name, &admin, &created, &deleted); err != nil {
		return nil, err
	}
	u.Admin, u.CreatedAt, u.Deleted = admin == 1, fromNanos(created), deleted != 0
	return &u, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CreateUser makes a user, or revives a deleted one.
func (s *SQLite) CreateUser(ctx context.Context, name string, admin bool) (*User, error) {
	now := time.Now().UnixNano()
	res, err := s.w.ExecContext(ctx, `UPDATE users SET deleted_at = 0, admin = ?, created_at = ? WHERE name = ? AND deleted_at <> 0`,
		boolInt(admin), now, name)
	if err != nil {
		return nil, fmt.Errorf("store: create user %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		res, err = s.w.ExecContext(ctx, `INSERT INTO users (name, created_at, admin) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			name, now, boolInt(admin))
		if err != nil {
			return nil, fmt.Errorf("store: create user %q: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, fmt.Errorf("user %q: %w", name, ErrExists)
		}
	}
	return scanUser(s.w.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE name = ?`, name))
}

// UserByName returns a user, deleted or not.
func (s *SQLite) UserByName(ctx context.Context, name string) (*User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: user %q: %w", name, err)
	}
	return u, nil
}

// ListUsers lists the live users by name.
func (s *SQLite) ListUsers(ctx context.Context) ([]*User, error) {
	return query(ctx, s.r, scanUser, `SELECT `+userCols+` FROM users WHERE deleted_at = 0 ORDER BY name`)
}

// DeleteUser marks the user deleted and removes its tokens, in one transaction.
func (s *SQLite) DeleteUser(ctx context.Context, name string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete user: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE users SET deleted_at = ? WHERE name = ? AND deleted_at = 0`, time.Now().UnixNano(), name)
	if err != nil {
		return fmt.Errorf("store: delete user %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE user_id = (SELECT id FROM users WHERE name = ?)`, name); err != nil {
		return fmt.Errorf("store: delete user %q: %w", name, err)
	}
	return tx.Commit()
}

// CreateToken stores a user's or a node's token.
func (s *SQLite) CreateToken(ctx context.Context, t *Token) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now().UTC()
	}
	var err error
	if t.Node != "" {
		_, err = s.w.ExecContext(ctx, `INSERT INTO node_tokens (hash, id, node, name, assert_users, created_at, expires_at) VALUES (?,?,?,?,?,?,?)`,
			t.Hash, t.ID, t.Node, t.Name, boolInt(t.AssertUsers), nanos(t.CreatedAt), nanos(t.ExpiresAt))
	} else {
		_, err = s.w.ExecContext(ctx, `INSERT INTO tokens (hash, id, user_id, name, created_at, expires_at) VALUES (?,?,?,?,?,?)`,
			t.Hash, t.ID, t.UserID, t.Name, nanos(t.CreatedAt), nanos(t.ExpiresAt))
	}
	if err != nil {
		return fmt.Errorf("store: add token: %w", err)
	}
	return nil
}

func scanToken(sc scanner) (*Token, error) {
	var t Token
	var assert int
	var created, expires int64
	if err := sc.Scan(&t.ID, &t.Hash, &t.Name, &t.UserID, &t.User, &t.Node, &assert, &created, &expires); err != nil {
		return nil, err
	}
	t.AssertUsers, t.CreatedAt, t.ExpiresAt = assert == 1, fromNanos(created), fromNanos(expires)
	return &t, nil
}

// tokenRows is every token as one relation: users' and nodes'.
const tokenRows = `SELECT t.id, t.hash, t.name, t.user_id, u.name AS user_name, '' AS node, 0 AS assert_users, t.created_at, t.expires_at
  FROM tokens t JOIN users u ON u.id = t.user_id WHERE u.deleted_at = 0
UNION ALL
SELECT id, hash, name, 0, '', node, assert_users, created_at, expires_at FROM node_tokens`

// ListTokens lists a user's tokens, or every token (userID 0), without hashes.
func (s *SQLite) ListTokens(ctx context.Context, userID int64) ([]*Token, error) {
	q, args := `SELECT * FROM (`+tokenRows+`) a ORDER BY created_at, id`, []any{}
	if userID != 0 {
		q, args = `SELECT * FROM (`+tokenRows+`) a WHERE user_id = ? ORDER BY created_at, id`, []any{userID}
	}
	ts, err := query(ctx, s.r, scanToken, q, args...)
	for _, t := range ts {
		t.Hash = ""
	}
	return ts, err
}

// RevokeToken removes a token by ID and returns it.
func (s *SQLite) RevokeToken(ctx context.Context, id string) (*Token, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: revoke token: %w", err)
	}
	defer tx.Rollback()
	t, err := scanToken(tx.QueryRowContext(ctx, `SELECT * FROM (`+tokenRows+`) a WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: revoke token: %w", err)
	}
	table := "tokens"
	if t.Node != "" {
		table = "node_tokens"
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE id = ?`, id); err != nil {
		return nil, fmt.Errorf("store: revoke token: %w", err)
	}
	return t, tx.Commit()
}

// TokenByHash resolves a token hash: the token and, for a user's, the user.
func (s *SQLite) TokenByHash(ctx context.Context, hash string) (*Token, *User, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, `SELECT * FROM (`+tokenRows+`) a WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: token: %w", err)
	}
	if t.Node != "" {
		return t, nil, nil
	}
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, t.UserID))
	if err != nil {
		return nil, nil, fmt.Errorf("store: token's user: %w", err)
	}
	return t, u, nil
}

// EnsureKey returns the key of that name, storing value when there is none.
func (s *SQLite) EnsureKey(ctx context.Context, name, value string) (string, error) {
	if _, err := s.w.ExecContext(ctx, `INSERT INTO server_keys (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		name, value, time.Now().UnixNano()); err != nil {
		return "", fmt.Errorf("store: key %q: %w", name, err)
	}
	var v string
	if err := s.w.QueryRowContext(ctx, `SELECT value FROM server_keys WHERE name = ?`, name).Scan(&v); err != nil {
		return "", fmt.Errorf("store: key %q: %w", name, err)
	}
	return v, nil
}

// ProjectName returns a project's name.
func (s *SQLite) ProjectName(ctx context.Context, id int64) (string, error) {
	return s.nameOf(ctx, "projects", id)
}

// UserName returns a user's name.
func (s *SQLite) UserName(ctx context.Context, id int64) (string, error) {
	return s.nameOf(ctx, "users", id)
}

func (s *SQLite) nameOf(ctx context.Context, table string, id int64) (string, error) {
	var name string
	err := s.r.QueryRowContext(ctx, `SELECT name FROM `+table+` WHERE id = ?`, id).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%s %d: %w", table, id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: %s %d: %w", table, id, err)
	}
	return name, nil
}

// UsageSince lists the jobs that ended at or after since, with their run's user.
func (s *SQLite) UsageSince(ctx context.Context, since time.Time) ([]*JobUsage, error) {
	return query(ctx, s.r, func(sc scanner) (*JobUsage, error) {
		var u JobUsage
		var alloc string
		var st, fin int64
		if err := sc.Scan(&u.ProjectID, &u.UserID, &alloc, &st, &fin); err != nil {
			return nil, err
		}
		u.Alloc, u.StartedAt, u.FinishedAt = []byte(alloc), fromNanos(st), fromNanos(fin)
		return &u, nil
	}, `SELECT r.project_id, r.user_id, j.alloc, j.started_at, j.finished_at FROM jobs j JOIN runs r ON r.id = j.run_id
 WHERE j.active = 0 AND j.started_at > 0 AND j.finished_at >= ? ORDER BY j.finished_at`, nanos(since))
}
