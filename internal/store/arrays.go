package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Head is what lists an array or a schedule beside the runs (berth ps,
// squeue, sacct, GET /runs/ID), as a run's row would (migration 00037):
// arrays and schedules have no run row; the readers of runs (GetRun,
// FindRun, FindActiveRun, ListRuns) answer their IDs from their records
// in a run's shape (Run). Spec is the configuration as submitted (JSON
// of spec.Task, with its array or schedule); Meta the server's JSON state
// of a held or delayed one.
type Head struct {
	Name           string
	Status, Reason string
	Priority       int
	Spec           []byte
	SubmittedAt    time.Time
	StartedAt      time.Time // an array's: its first task's start
	FinishedAt     time.Time
	StopReq        int
	EstimatedStart time.Time // a schedule's: its next tick
	Meta           []byte
}

// Array is an array's own record (migrations 00027, 00037): its head and
// its progress. Its tasks are runs whose ArrayID is this ID.
type Array struct {
	ID        int64 // the array's ID, in the runs' ID space: Slurm's array job ID
	ProjectID int64
	UserID    int64
	Head
	Indices  string // the index set as submitted ("1-100%10")
	Throttle int    // at most this many tasks at once (%N; 0: no limit)
	// Next is how many tasks were made: the set's first Next indices.
	Next int
	// Cancel are indices stopped before they were made.
	Cancel  []int
	Stopped bool
	// Done and Failed count the tasks that ended done, and not done.
	Done, Failed int
	// Active is false once every task has ended.
	Active bool
}

// Schedule is a schedule's own record (migrations 00027, 00037): a
// configuration with `schedule:` submits a run at each tick of its cron
// lines. Its head lists it (status scheduled, its next tick as the
// estimated start) and holds its spec.
type Schedule struct {
	ID        int64 // in the runs' ID space
	ProjectID int64
	UserID    int64
	Head
	Cron []string
	// NextFire is its next tick (zero once stopped); LastRun the run its
	// last tick submitted (0: none yet); Runs how many it submitted.
	NextFire time.Time
	LastRun  int64
	Runs     int
	// Active is false once it was stopped.
	Active bool
}

// headCols are a record's head columns (Head), in scanHead's order.
const headCols = `name, status, reason, priority, spec, submitted_at, started_at, finished_at, stop_req, estimated_start, meta`

const (
	upsertArray = `INSERT INTO arrays (id, project_id, user_id, indices, throttle, next, cancel, stopped, done, failed, active,
  ` + headCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET throttle=excluded.throttle, next=excluded.next, cancel=excluded.cancel,
  stopped=excluded.stopped, done=excluded.done, failed=excluded.failed, active=excluded.active, ` + headUpdate + `,
  spec=CASE WHEN excluded.spec = '' THEN arrays.spec ELSE excluded.spec END`
	upsertSchedule = `INSERT INTO schedules (id, project_id, user_id, cron, next_fire, last_run, runs, active,
  ` + headCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET next_fire=excluded.next_fire, last_run=excluded.last_run, runs=excluded.runs,
  active=excluded.active, ` + headUpdate + `,
  spec=CASE WHEN excluded.spec = '' THEN schedules.spec ELSE excluded.spec END`
	headUpdate = `name=excluded.name, status=excluded.status, reason=excluded.reason, priority=excluded.priority,
  submitted_at=excluded.submitted_at, started_at=excluded.started_at, finished_at=excluded.finished_at,
  stop_req=excluded.stop_req, estimated_start=excluded.estimated_start, meta=excluded.meta`
	arrayCols    = `id, project_id, user_id, indices, throttle, next, cancel, stopped, done, failed, active, ` + headCols
	scheduleCols = `id, project_id, user_id, cron, next_fire, last_run, runs, active, ` + headCols
	// recordRows are the arrays' and schedules' records as run rows (runCols
	// and active), for the readers of runs.
	recordRows = `SELECT id, project_id, user_id, name, status, reason, NULL AS exit_code, priority, spec, submitted_at,
  started_at, finished_at, stop_req, estimated_start, 0 AS array_id, 0 AS array_index, meta, active FROM arrays
UNION ALL SELECT id, project_id, user_id, name, status, reason, NULL, priority, spec, submitted_at,
  started_at, finished_at, stop_req, estimated_start, 0, 0, meta, active FROM schedules`
)

// headArgs are h's values in headCols' order.
func headArgs(h *Head) []any {
	return []any{h.Name, h.Status, h.Reason, h.Priority, string(h.Spec), nanos(h.SubmittedAt), nanos(h.StartedAt),
		nanos(h.FinishedAt), h.StopReq, nanos(h.EstimatedStart), string(h.Meta)}
}

// headDest are where scanHead reads headCols into, and done what turns
// them into h.
func headDest(h *Head) (dest []any, done func()) {
	var spec, meta string
	var sub, st, fin, est int64
	return []any{&h.Name, &h.Status, &h.Reason, &h.Priority, &spec, &sub, &st, &fin, &h.StopReq, &est, &meta}, func() {
		h.Spec = nil
		if spec != "" {
			h.Spec = []byte(spec)
		}
		h.Meta = nil
		if meta != "" {
			h.Meta = []byte(meta)
		}
		h.SubmittedAt, h.StartedAt, h.FinishedAt, h.EstimatedStart = fromNanos(sub), fromNanos(st), fromNanos(fin), fromNanos(est)
	}
}

// Run is the array as the readers of runs show it.
func (a *Array) Run() *Run { return headRun(a.ID, a.ProjectID, a.UserID, &a.Head) }

// Run is the schedule as the readers of runs show it.
func (c *Schedule) Run() *Run { return headRun(c.ID, c.ProjectID, c.UserID, &c.Head) }

func headRun(id, project, user int64, h *Head) *Run {
	return &Run{ID: id, ProjectID: project, UserID: user, Name: h.Name, Status: h.Status, Reason: h.Reason, Priority: h.Priority,
		Spec: h.Spec, SubmittedAt: h.SubmittedAt, StartedAt: h.StartedAt, FinishedAt: h.FinishedAt, StopReq: h.StopReq,
		EstimatedStart: h.EstimatedStart, Meta: h.Meta}
}

// applyArrays writes b's arrays and schedules in tx.
func (s *sqlDB) applyArrays(ctx context.Context, tx *sql.Tx, b *Batch) error {
	if len(b.Arrays) > 0 {
		st := s.stmt(ctx, tx, upsertArray)
		for _, a := range b.Arrays {
			cancel := ""
			if len(a.Cancel) > 0 {
				c, _ := json.Marshal(a.Cancel)
				cancel = string(c)
			}
			args := append([]any{a.ID, a.ProjectID, a.UserID, a.Indices, a.Throttle, a.Next, cancel, boolInt(a.Stopped),
				a.Done, a.Failed, boolInt(a.Active)}, headArgs(&a.Head)...)
			if _, err := st(ctx, args...); err != nil {
				return fmt.Errorf("store: array %d: %w", a.ID, err)
			}
		}
	}
	if len(b.Schedules) > 0 {
		st := s.stmt(ctx, tx, upsertSchedule)
		for _, c := range b.Schedules {
			cron, _ := json.Marshal(c.Cron)
			args := append([]any{c.ID, c.ProjectID, c.UserID, string(cron), nanos(c.NextFire), c.LastRun, c.Runs,
				boolInt(c.Active)}, headArgs(&c.Head)...)
			if _, err := st(ctx, args...); err != nil {
				return fmt.Errorf("store: schedule %d: %w", c.ID, err)
			}
		}
	}
	return nil
}

func scanArray(sc scanner) (*Array, error) {
	var a Array
	var cancel string
	var stopped, active int
	head, done := headDest(&a.Head)
	if err := sc.Scan(append([]any{&a.ID, &a.ProjectID, &a.UserID, &a.Indices, &a.Throttle, &a.Next, &cancel, &stopped,
		&a.Done, &a.Failed, &active}, head...)...); err != nil {
		return nil, err
	}
	done()
	if cancel != "" {
		if err := json.Unmarshal([]byte(cancel), &a.Cancel); err != nil {
			return nil, fmt.Errorf("store: array %d: cancelled indices %q: %w", a.ID, cancel, err)
		}
	}
	a.Stopped, a.Active = stopped != 0, active != 0
	return &a, nil
}

func scanSchedule(sc scanner) (*Schedule, error) {
	var c Schedule
	var cron string
	var next int64
	var active int
	head, done := headDest(&c.Head)
	if err := sc.Scan(append([]any{&c.ID, &c.ProjectID, &c.UserID, &cron, &next, &c.LastRun, &c.Runs, &active}, head...)...); err != nil {
		return nil, err
	}
	done()
	if err := json.Unmarshal([]byte(cron), &c.Cron); err != nil {
		return nil, fmt.Errorf("store: schedule %d: cron %q: %w", c.ID, cron, err)
	}
	c.NextFire, c.Active = fromNanos(next), active != 0
	return &c, nil
}

// GetArray returns an array's record (ErrNotFound: ID is not an array).
func (s *sqlDB) GetArray(ctx context.Context, id int64) (*Array, error) {
	a, err := scanArray(s.r.QueryRowContext(ctx, s.q(`SELECT `+arrayCols+` FROM arrays WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

// GetSchedule returns a schedule's record (ErrNotFound: none of that ID).
func (s *sqlDB) GetSchedule(ctx context.Context, id int64) (*Schedule, error) {
	c, err := scanSchedule(s.r.QueryRowContext(ctx, s.q(`SELECT `+scheduleCols+` FROM schedules WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return c, err
}

// loadArrays reads the active arrays and schedules into a.
func (s *sqlDB) loadArrays(ctx context.Context, a *Active) error {
	var err error
	if a.Arrays, err = query(ctx, s.w, scanArray, `SELECT `+arrayCols+` FROM arrays WHERE active = 1 ORDER BY id`); err != nil {
		return err
	}
	a.Schedules, err = query(ctx, s.w, scanSchedule, `SELECT `+scheduleCols+` FROM schedules WHERE active = 1 ORDER BY id`)
	return err
}
