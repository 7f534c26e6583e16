package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sqlDB is what SQLite and PostgreSQL share: the tables are the same, times
// are Unix nanoseconds in BIGINT columns (0: unset), JSON is TEXT, so one
// set of statements and one set of row scanners serve both. The statements
// are written with SQLite's ? placeholders; q rewrites them as $1, $2, …
// for PostgreSQL. Where the dialects differ (the planner hints of ListRuns,
// MAX against GREATEST) the dialect holds the two variants.
type sqlDB struct {
	// w takes the writes (SQLite: its one writer connection), r the reads;
	// on PostgreSQL both are the same pool.
	w, r *sql.DB
	d    dialect
	// stmts are the write statements, prepared once on w (SQLite; nil on
	// PostgreSQL, whose driver caches the statements it is sent).
	stmts map[string]*sql.Stmt
}

// dialect is what differs between the two databases' SQL.
type dialect struct {
	// dollar: placeholders are $1, $2, … (PostgreSQL) rather than ?.
	dollar bool
	// hint is SQLite's unary + that keeps a column's index out of the
	// planner's choice in ListRuns; empty on PostgreSQL, which has
	// statistics and would read +id as an expression no index serves.
	hint string
	// reserve raises reserved_ids' mark, never lowering it.
	reserve string
	// logRows is how many log chunks one INSERT carries. SQLite runs its
	// prepared statement per row in-process; PostgreSQL would pay a round
	// trip per row, which a job's output multiplies (docs/design.md,
	// "Logs at scale").
	logRows int
}

var (
	sqliteDialect = dialect{hint: "+", reserve: `INSERT INTO reserved_ids (name, upto) VALUES (?, ?)
  ON CONFLICT (name) DO UPDATE SET upto = MAX(upto, excluded.upto)`, logRows: 1}
	postgresDialect = dialect{dollar: true, reserve: `INSERT INTO reserved_ids (name, upto) VALUES (?, ?)
  ON CONFLICT (name) DO UPDATE SET upto = GREATEST(reserved_ids.upto, excluded.upto)`, logRows: 100}
)

// q returns the statement in the dialect's placeholders.
func (s *sqlDB) q(text string) string {
	if !s.d.dollar {
		return text
	}
	return dollars(text)
}

// dollars rewrites each ? outside quotes as $1, $2, …
func dollars(text string) string {
	var b strings.Builder
	b.Grow(len(text) + 16)
	n, quote := 0, byte(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
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

const (
	upsertRun = `INSERT INTO runs (id, project_id, user_id, name, status, reason, exit_code, priority, spec,
  submitted_at, started_at, finished_at, stop_req, active, estimated_start, array_id, array_index, meta)
  VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET name=excluded.name, status=excluded.status, reason=excluded.reason,
  exit_code=excluded.exit_code, priority=excluded.priority, started_at=excluded.started_at,
  finished_at=excluded.finished_at, stop_req=excluded.stop_req, active=excluded.active,
  estimated_start=excluded.estimated_start, meta=excluded.meta,
  spec=CASE WHEN excluded.spec = '' THEN runs.spec ELSE excluded.spec END`
	upsertJob = `INSERT INTO jobs (id, run_id, num, attempt, status, reason, exit_code, node, alloc,
  submitted_at, started_at, finished_at, log_size, active, max_rss) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET status=excluded.status, reason=excluded.reason, exit_code=excluded.exit_code,
  node=excluded.node, alloc=excluded.alloc, started_at=excluded.started_at, finished_at=excluded.finished_at,
  log_size=excluded.log_size, active=excluded.active, max_rss=excluded.max_rss`
	// setJobUsage records an ended job's usage (migration 00020), apart from
	// the upsert so that a job without one writes what it wrote before.
	setJobUsage = `UPDATE jobs SET usage = ? WHERE id = ?`
	upsertNode  = `INSERT INTO nodes (name, info, registered_at, last_seen, drain) VALUES (?,?,?,?,?)
ON CONFLICT (name) DO UPDATE SET info=excluded.info, registered_at=excluded.registered_at, last_seen=excluded.last_seen,
  drain=excluded.drain`
	insertKey    = `INSERT INTO idempotency_keys (user_id, key, run_id, created_at) VALUES (?,?,?,?)`
	insertSample = `INSERT INTO metric_samples (job_id, level, time, data) VALUES (?,?,?,?) ON CONFLICT DO NOTHING`
	insertEvent  = `INSERT INTO events (run_id, job_id, time, type, message) VALUES (?,?,?,?,?)`
	insertLog    = `INSERT INTO log_chunks (job_id, off, stream, time, data) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING`
	upsertStep   = `INSERT INTO steps (run_id, step_id, name, argv, ranks, ntasks, nodelist, pty, status, exit_code, exits,
  started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (run_id, step_id) DO UPDATE SET status=excluded.status, exit_code=excluded.exit_code, exits=excluded.exits,
  finished_at=excluded.finished_at`
)

// writeStatements are the statements Apply runs for each row.
var writeStatements = []string{upsertRun, upsertJob, upsertNode, insertEvent, insertLog, upsertStep, insertKey, insertSample,
	upsertArray, upsertSchedule}

// prepare prepares the write statements on w.
func (s *sqlDB) prepare(ctx context.Context) error {
	s.stmts = map[string]*sql.Stmt{}
	for _, text := range writeStatements {
		st, err := s.w.PrepareContext(ctx, s.q(text))
		if err != nil {
			return fmt.Errorf("store: prepare: %w", err)
		}
		s.stmts[text] = st
	}
	return nil
}

// execer runs one write statement of the transaction for each row.
type execer func(ctx context.Context, args ...any) (sql.Result, error)

// stmt returns how to run the write statement text in tx: the prepared
// statement where there is one.
func (s *sqlDB) stmt(ctx context.Context, tx *sql.Tx, text string) execer {
	if st := s.stmts[text]; st != nil {
		return tx.StmtContext(ctx, st).ExecContext
	}
	text = s.q(text)
	return func(ctx context.Context, args ...any) (sql.Result, error) { return tx.ExecContext(ctx, text, args...) }
}

func (s *sqlDB) applyBatch(ctx context.Context, tx *sql.Tx, b *Batch) error {
	prep := func(q string, n int) (execer, error) {
		if n == 0 {
			return nil, nil
		}
		return s.stmt(ctx, tx, q), nil
	}
	for _, k := range b.Keys {
		if _, err := s.stmt(ctx, tx, insertKey)(ctx, k.UserID, k.Key, k.RunID, nanos(k.Created)); err != nil {
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
		if _, err := tx.ExecContext(ctx, s.q(s.d.reserve), r.name, r.upto); err != nil {
			return fmt.Errorf("store: reserve %s: %w", r.name, err)
		}
	}
	st, err := prep(upsertRun, len(b.Runs))
	if err != nil {
		return err
	}
	for _, r := range b.Runs {
		if _, err := st(ctx, r.ID, r.ProjectID, r.UserID, r.Name, r.Status, r.Reason, r.ExitCode,
			r.Priority, string(r.Spec), nanos(r.SubmittedAt), nanos(r.StartedAt), nanos(r.FinishedAt),
			r.StopReq, isActive(r.Status), nanos(r.EstimatedStart), r.ArrayID, r.ArrayIndex, string(r.Meta)); err != nil {
			return fmt.Errorf("store: run %d: %w", r.ID, err)
		}
	}
	if err := s.applyArrays(ctx, tx, b); err != nil {
		return err
	}
	if st, err = prep(upsertJob, len(b.Jobs)); err != nil {
		return err
	}
	for _, j := range b.Jobs {
		alloc := j.Alloc
		if len(alloc) == 0 {
			alloc = []byte("{}")
		}
		if _, err := st(ctx, j.ID, j.RunID, j.Num, j.Attempt, j.Status, j.Reason, j.ExitCode,
			j.Node, string(alloc), nanos(j.SubmittedAt), nanos(j.StartedAt), nanos(j.FinishedAt),
			j.LogSize, isActive(j.Status), j.MaxRSS); err != nil {
			return fmt.Errorf("store: job %d: %w", j.ID, err)
		}
	}
	used := 0
	for _, j := range b.Jobs {
		if len(j.Usage) > 0 {
			used++
		}
	}
	if st, err = prep(setJobUsage, used); err != nil {
		return err
	}
	for _, j := range b.Jobs {
		if len(j.Usage) == 0 {
			continue
		}
		if _, err := st(ctx, string(j.Usage), j.ID); err != nil {
			return fmt.Errorf("store: job %d's usage: %w", j.ID, err)
		}
	}
	if st, err = prep(upsertNode, len(b.Nodes)); err != nil {
		return err
	}
	for _, n := range b.Nodes {
		if _, err := st(ctx, n.Name, string(n.Info), nanos(n.RegisteredAt), nanos(n.LastSeen), string(n.Drain)); err != nil {
			return fmt.Errorf("store: node %s: %w", n.Name, err)
		}
	}
	for _, name := range b.DeleteNodes {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM nodes WHERE name = ?`), name); err != nil {
			return fmt.Errorf("store: delete node %s: %w", name, err)
		}
	}
	if st, err = prep(insertEvent, len(b.Events)); err != nil {
		return err
	}
	for _, e := range b.Events {
		if _, err := st(ctx, e.RunID, e.JobID, nanos(e.Time), e.Type, e.Message); err != nil {
			return fmt.Errorf("store: event: %w", err)
		}
	}
	if err := s.insertLogs(ctx, tx, b.Logs); err != nil {
		return err
	}
	if st, err = prep(upsertStep, len(b.Steps)); err != nil {
		return err
	}
	for _, p := range b.Steps {
		exits := p.Exits
		if len(exits) == 0 {
			exits = []byte("{}")
		}
		if _, err := st(ctx, p.RunID, p.StepID, p.Name, string(p.Argv), string(p.Ranks), p.NTasks, p.NodeList,
			p.PTY, p.Status, p.ExitCode, string(exits), nanos(p.StartedAt), nanos(p.FinishedAt)); err != nil {
			return fmt.Errorf("store: step %d.%d: %w", p.RunID, p.StepID, err)
		}
	}
	return s.applySamples(ctx, tx, b)
}

// insertLogs writes log chunks, logRows to a statement (a chunk already
// there, by job and offset, is kept: a resend).
func (s *sqlDB) insertLogs(ctx context.Context, tx *sql.Tx, logs []*LogChunk) error {
	if s.d.logRows <= 1 {
		if len(logs) == 0 {
			return nil
		}
		st := s.stmt(ctx, tx, insertLog)
		for _, l := range logs {
			if _, err := st(ctx, l.JobID, l.Offset, l.Stream, nanos(l.Time), l.Data); err != nil {
				return fmt.Errorf("store: log of job %d: %w", l.JobID, err)
			}
		}
		return nil
	}
	for len(logs) > 0 {
		n := min(len(logs), s.d.logRows)
		args := make([]any, 0, 5*n)
		for _, l := range logs[:n] {
			args = append(args, l.JobID, l.Offset, l.Stream, nanos(l.Time), l.Data)
		}
		text := `INSERT INTO log_chunks (job_id, off, stream, time, data) VALUES ` +
			strings.TrimSuffix(strings.Repeat(`(?,?,?,?,?),`, n), ",") + ` ON CONFLICT DO NOTHING`
		if _, err := tx.ExecContext(ctx, s.q(text), args...); err != nil {
			return fmt.Errorf("store: logs of jobs %d…: %w", logs[0].JobID, err)
		}
		logs = logs[n:]
	}
	return nil
}

const runCols = `id, project_id, user_id, name, status, reason, exit_code, priority, spec, submitted_at, started_at, finished_at, stop_req, estimated_start, array_id, array_index, meta`
const jobCols = `id, run_id, num, attempt, status, reason, exit_code, node, alloc, submitted_at, started_at, finished_at, log_size, max_rss, usage`

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
	var alloc, usage string
	var ec sql.NullInt64
	var sub, st, fin int64
	if err := sc.Scan(&j.ID, &j.RunID, &j.Num, &j.Attempt, &j.Status, &j.Reason, &ec, &j.Node, &alloc,
		&sub, &st, &fin, &j.LogSize, &j.MaxRSS, &usage); err != nil {
		return nil, err
	}
	if usage != "" {
		j.Usage = []byte(usage)
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
func (s *sqlDB) LoadActive(ctx context.Context) (*Active, error) {
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
	if err := s.loadArrays(ctx, a); err != nil {
		return nil, err
	}
	if err := s.w.QueryRowContext(ctx, `SELECT `+maxRunID).Scan(&a.MaxRunID); err != nil {
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
func (s *sqlDB) KeysSince(ctx context.Context, since time.Time) ([]*IdempotencyKey, error) {
	return query(ctx, s.w, func(r scanner) (*IdempotencyKey, error) {
		var k IdempotencyKey
		var at int64
		if err := r.Scan(&k.UserID, &k.Key, &k.RunID, &at); err != nil {
			return nil, err
		}
		k.Created = time.Unix(0, at).UTC()
		return &k, nil
	}, s.q(`SELECT user_id, key, run_id, created_at FROM idempotency_keys WHERE created_at >= ? ORDER BY created_at`), nanos(since))
}

// maxRunID selects the highest ID in the runs' ID space: runs, arrays and
// schedules (each arm read off its primary key).
const maxRunID = `COALESCE(MAX(m), 0) FROM (SELECT MAX(id) AS m FROM runs UNION ALL SELECT MAX(id) FROM arrays
  UNION ALL SELECT MAX(id) FROM schedules) AS ids`

// fromRecords reads the arrays' and schedules' records as run rows
// (recordRows) under the runs' column names.
const fromRecords = ` FROM (` + recordRows + `) AS runs`

// GetRun returns one run by ID: an array's or a schedule's ID answers
// from its record (Head), in a run's shape.
func (s *sqlDB) GetRun(ctx context.Context, id int64) (*Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM runs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		r, err = scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+fromRecords+` WHERE id = ?`), id))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: run %d: %w", id, err)
	}
	return r, nil
}

// FindRun returns the newest run of the project with that name (an
// array or a schedule among them).
func (s *sqlDB) FindRun(ctx context.Context, projectID int64, name string) (*Run, error) {
	q := ` WHERE project_id = ? AND name = ? ORDER BY id DESC LIMIT 1`
	r, err := s.newer(ctx, q, projectID, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: run %q: %w", name, err)
	}
	return r, nil
}

// FindActiveRun returns the project's active run with that name: a
// schedule before the runs it fired, else the newest.
func (s *sqlDB) FindActiveRun(ctx context.Context, projectID int64, name string) (*Run, error) {
	// A schedule is a record: look there first.
	r, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+fromRecords+` WHERE project_id = ? AND name = ? AND active = 1
 ORDER BY CASE WHEN status = 'scheduled' THEN 0 ELSE 1 END, id DESC LIMIT 1`), projectID, name))
	if err == nil && r.Status != "scheduled" {
		// An array: the newest of it and the runs of that name.
		if n, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM runs WHERE project_id = ? AND name = ? AND active = 1
 ORDER BY id DESC LIMIT 1`), projectID, name)); err == nil && n.ID > r.ID {
			r = n
		}
	} else if errors.Is(err, sql.ErrNoRows) {
		// (A schedule's run row, as one written before 00037, first.)
		r, err = scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM runs WHERE project_id = ? AND name = ? AND active = 1
 ORDER BY CASE WHEN status = 'scheduled' THEN 0 ELSE 1 END, id DESC LIMIT 1`), projectID, name))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("active run %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: active run %q: %w", name, err)
	}
	return r, nil
}

// newer is the newest run row where q (a WHERE clause with its order and
// limit 1) selects one, among runs and the arrays' and schedules' records.
func (s *sqlDB) newer(ctx context.Context, q string, args ...any) (*Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM runs`+q), args...))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	rec, rerr := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+fromRecords+q), args...))
	switch {
	case rerr != nil && !errors.Is(rerr, sql.ErrNoRows):
		return nil, rerr
	case rerr == nil && (err != nil || rec.ID > r.ID):
		return rec, nil
	}
	return r, err
}

// ListRuns lists runs, newest first: the runs' rows and the arrays' and
// schedules' records (Head) in a run's shape, merged by ID.
func (s *sqlDB) ListRuns(ctx context.Context, f RunFilter) ([]*Run, error) {
	runs, err := s.listRuns(ctx, f, ` FROM runs`)
	if err != nil || f.ArrayID != 0 {
		return runs, err // an array's task is a run
	}
	recs, err := s.listRuns(ctx, f, fromRecords)
	if err != nil || len(recs) == 0 {
		return runs, err
	}
	out := make([]*Run, 0, len(runs)+len(recs))
	for len(runs) > 0 || len(recs) > 0 {
		if len(recs) == 0 || (len(runs) > 0 && runs[0].ID > recs[0].ID) {
			out, runs = append(out, runs[0]), runs[1:]
		} else {
			out, recs = append(out, recs[0]), recs[1:]
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// listRuns lists the run rows of from (runs, or the records as runs).
func (s *sqlDB) listRuns(ctx context.Context, f RunFilter, from string) ([]*Run, error) {
	cols, scan := runCols, scanRun
	if f.Brief {
		cols, scan = `id, status, started_at, array_id, array_index`, scanBriefRun
	}
	q := `SELECT ` + cols + from + ` WHERE 1=1`
	var args []any
	if !f.All {
		q += ` AND active = 1`
	}
	if f.ProjectID != 0 {
		// Most runs are of one project: the unary + keeps SQLite from
		// reading them all through runs_name where another condition
		// selects few.
		q += ` AND ` + s.d.hint + `project_id = ?`
		args = append(args, f.ProjectID)
	}
	if f.Visible != nil {
		q += ` AND (project_id IN (` + placeholders(len(f.Visible)) + `) OR user_id = ?)`
		for _, id := range f.Visible {
			args = append(args, id)
		}
		args = append(args, f.VisibleUser)
	}
	if f.OnlyUser != 0 {
		q += ` AND user_id = ?`
		args = append(args, f.OnlyUser)
	}
	if f.Name != "" {
		q += ` AND name = ?`
		args = append(args, f.Name)
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
	if !f.Until.IsZero() {
		if f.Since.IsZero() {
			q += ` AND submitted_at < ?`
		} else {
			q += ` AND ` + s.d.hint + `submitted_at < ?`
		}
		args = append(args, nanos(f.Until))
	}
	limit := ""
	if f.Limit > 0 {
		limit = fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	before := func(hint string) string {
		if f.BeforeID == 0 {
			return ``
		}
		return ` AND ` + hint + `id < ?`
	}
	if !f.Since.IsZero() && f.IDs != nil {
		// Runs named by ID are few and read by key (id, array_id): the
		// window only filters them. Its two arms would read every waiting
		// run to find the named ones (squeue -j N among 100,000: 0.5 s).
		q += ` AND (finished_at = 0 OR finished_at >= ?)`
		args = append(args, nanos(f.Since))
	}
	if f.BeforeID != 0 {
		args = append(args, f.BeforeID)
	}
	if f.Since.IsZero() || f.IDs != nil {
		q += before(``) + ` ORDER BY id DESC` + limit
		return query(ctx, s.r, scan, s.q(q), args...)
	}
	// The window: the runs not finished yet (finished_at is 0 until a run
	// is final), then those finished since Since, each arm in id order
	// with the page's limit, merged. The unfinished come in id order from
	// runs_finished_id, so a page of a long queue reads its own rows only
	// (read as one range, each page would read and sort the whole queue
	// again: a listing quadratic in waiting runs); the finished are those
	// of the window, read by when they ended and sorted (the unary + keeps
	// SQLite, which has no statistics, off the primary key, where id <
	// BeforeID would read the whole history below the page, and off the
	// submitted_at index).
	waiting := q + before(``) + ` AND finished_at = 0 ORDER BY id DESC` + limit
	finished := q + before(s.d.hint) + ` AND finished_at >= ? ORDER BY ` + s.d.hint + `id DESC` + limit
	q = `SELECT * FROM (` + waiting + `) AS waiting UNION ALL SELECT * FROM (` + finished + `) AS finished ORDER BY id DESC` + limit
	args = append(append(args, args...), nanos(f.Since))
	return query(ctx, s.r, scan, s.q(q), args...)
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
func (s *sqlDB) FindArrayTask(ctx context.Context, arrayID int64, index int) (*Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM runs WHERE array_id = ? AND array_index = ?`), arrayID, index))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return r, err
}

// ListJobs lists a run's jobs by number and attempt.
func (s *sqlDB) ListJobs(ctx context.Context, runID int64) ([]*Job, error) {
	return query(ctx, s.r, scanJob, s.q(`SELECT `+jobCols+` FROM jobs WHERE run_id = ? ORDER BY num, attempt`), runID)
}

// ListSteps lists the steps of the runs by run and step ID.
func (s *sqlDB) ListSteps(ctx context.Context, runIDs []int64) ([]*Step, error) {
	var out []*Step
	for len(runIDs) > 0 {
		n := min(len(runIDs), jobsChunk)
		args := make([]any, n)
		for i, id := range runIDs[:n] {
			args[i] = id
		}
		got, err := query(ctx, s.r, scanStep, s.q(`SELECT run_id, step_id, name, argv, ranks, ntasks, nodelist, pty, status, exit_code, exits,
  started_at, finished_at FROM steps WHERE run_id IN (`+placeholders(n)+`) ORDER BY run_id, step_id`), args...)
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
func (s *sqlDB) ListJobsOf(ctx context.Context, runIDs []int64) ([]*Job, error) {
	ids := slices.Sorted(slices.Values(runIDs))
	ids = slices.Compact(ids)
	var out []*Job
	for len(ids) > 0 {
		n := min(len(ids), jobsChunk)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		jobs, err := query(ctx, s.r, scanJob, s.q(`SELECT `+jobCols+` FROM jobs WHERE run_id IN (`+placeholders(n)+`) ORDER BY run_id, num, attempt`), args...)
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
func (s *sqlDB) ListNodes(ctx context.Context) ([]*Node, error) {
	return query(ctx, s.r, scanNode, `SELECT name, info, registered_at, last_seen, drain FROM nodes ORDER BY name`)
}

// ReadLogs returns a job's chunks from offset on, in order.
func (s *sqlDB) ReadLogs(ctx context.Context, jobID int64, offset int64, limit int) ([]*LogChunk, error) {
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
	}, s.q(`SELECT job_id, off, stream, time, data FROM log_chunks WHERE job_id = ? AND off >= ? ORDER BY off LIMIT ?`), jobID, offset, limit)
}

// ListEvents returns a run's history in order.
func (s *sqlDB) ListEvents(ctx context.Context, runID int64) ([]*Event, error) {
	return query(ctx, s.r, func(sc scanner) (*Event, error) {
		var e Event
		var t int64
		if err := sc.Scan(&e.RunID, &e.JobID, &t, &e.Type, &e.Message); err != nil {
			return nil, err
		}
		e.Time = fromNanos(t)
		return &e, nil
	}, s.q(`SELECT run_id, job_id, time, type, message FROM events WHERE run_id = ? ORDER BY id`), runID)
}

// EnsureProject creates the project when missing.
func (s *sqlDB) EnsureProject(ctx context.Context, name string) (int64, error) {
	return s.ensure(ctx, `INSERT INTO projects (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
		`SELECT id FROM projects WHERE name = ?`, name, time.Now().UnixNano())
}

// EnsureUser creates the user when missing.
func (s *sqlDB) EnsureUser(ctx context.Context, name string, admin bool) (int64, error) {
	a := 0
	if admin {
		a = 1
	}
	res, err := s.w.ExecContext(ctx, s.q(`INSERT INTO users (name, created_at, admin) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`), name, time.Now().UnixNano(), a)
	if err != nil {
		return 0, fmt.Errorf("store: create %q: %w", name, err)
	}
	var id int64
	if err := s.w.QueryRowContext(ctx, s.q(`SELECT id FROM users WHERE name = ?`), name).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: look up %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		if err := s.joinDefault(ctx, id); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// DefaultProject is the project every user is made a member of (as a
// user) when the user is made: the one every run went to before projects.
const DefaultProject = "main"

// joinDefault makes user id a member of the default project, when it
// exists, unless they are one.
func (s *sqlDB) joinDefault(ctx context.Context, id int64) error {
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO project_members (project_id, user_id, role, created_at)
  SELECT id, ?, 'user', ? FROM projects WHERE name = ? ON CONFLICT (project_id, user_id) DO NOTHING`), id, time.Now().UnixNano(), DefaultProject)
	if err != nil {
		return fmt.Errorf("store: user %d in the default project: %w", id, err)
	}
	return nil
}

func (s *sqlDB) ensure(ctx context.Context, insert, sel string, name string, extra ...any) (int64, error) {
	if _, err := s.w.ExecContext(ctx, s.q(insert), append([]any{name}, extra...)...); err != nil {
		return 0, fmt.Errorf("store: create %q: %w", name, err)
	}
	var id int64
	if err := s.w.QueryRowContext(ctx, s.q(sel), name).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: look up %q: %w", name, err)
	}
	return id, nil
}

// ProjectName returns a project's name.
func (s *sqlDB) ProjectName(ctx context.Context, id int64) (string, error) {
	return s.nameOf(ctx, "projects", id)
}

// UserName returns a user's name.
func (s *sqlDB) UserName(ctx context.Context, id int64) (string, error) {
	return s.nameOf(ctx, "users", id)
}

func (s *sqlDB) nameOf(ctx context.Context, table string, id int64) (string, error) {
	var name string
	err := s.r.QueryRowContext(ctx, s.q(`SELECT name FROM `+table+` WHERE id = ?`), id).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%s %d: %w", table, id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: %s %d: %w", table, id, err)
	}
	return name, nil
}

// UsageSince lists the jobs that ended at or after since, with their run's user.
func (s *sqlDB) UsageSince(ctx context.Context, since time.Time) ([]*JobUsage, error) {
	return s.usage(ctx, `WHERE j.active = 0 AND j.started_at > 0 AND j.finished_at >= ? ORDER BY j.finished_at, j.id`, nanos(since))
}

// UsageBetween lists the jobs that ended and ran within [since, until).
func (s *sqlDB) UsageBetween(ctx context.Context, since, until time.Time) ([]*JobUsage, error) {
	return s.usage(ctx, `WHERE j.active = 0 AND j.started_at > 0 AND j.finished_at > ? AND j.started_at < ? ORDER BY j.finished_at, j.id`,
		nanos(since), nanos(until))
}

func (s *sqlDB) usage(ctx context.Context, where string, args ...any) ([]*JobUsage, error) {
	return query(ctx, s.r, func(sc scanner) (*JobUsage, error) {
		var u JobUsage
		var alloc, usage string
		var st, fin int64
		if err := sc.Scan(&u.RunID, &u.JobID, &u.ProjectID, &u.UserID, &alloc, &usage, &st, &fin); err != nil {
			return nil, err
		}
		u.Alloc, u.StartedAt, u.FinishedAt = []byte(alloc), fromNanos(st), fromNanos(fin)
		if usage != "" {
			u.Usage = []byte(usage)
		}
		return &u, nil
	}, s.q(`SELECT j.run_id, j.id, r.project_id, r.user_id, j.alloc, j.usage, j.started_at, j.finished_at FROM jobs j JOIN runs r ON r.id = j.run_id
 `+where), args...)
}
