package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Array is an array's own record (migration 00027): what its progress is,
// apart from the run row of the same ID that lists it (name, status, spec,
// times). Its tasks are runs whose ArrayID is this ID.
type Array struct {
	ID        int64 // the array's ID: its run row's, Slurm's array job ID
	ProjectID int64
	UserID    int64
	Indices   string // the index set as submitted ("1-100%10"); the spec is the run row's
	Throttle  int    // at most this many tasks at once (%N; 0: no limit)
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

// Schedule is a schedule's own record (migration 00027): a configuration
// with `schedule:` submits a run at each tick of its cron lines. Its run
// row of the same ID lists it and holds its spec.
type Schedule struct {
	ID        int64
	ProjectID int64
	UserID    int64
	Name      string
	Cron      []string
	// NextFire is its next tick (zero once stopped); LastRun the run its
	// last tick submitted (0: none yet); Runs how many it submitted.
	NextFire time.Time
	LastRun  int64
	Runs     int
	// Active is false once it was stopped.
	Active bool
}

const (
	upsertArray = `INSERT INTO arrays (id, project_id, user_id, indices, throttle, next, cancel, stopped, done, failed, active)
  VALUES (?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET throttle=excluded.throttle, next=excluded.next, cancel=excluded.cancel,
  stopped=excluded.stopped, done=excluded.done, failed=excluded.failed, active=excluded.active`
	upsertSchedule = `INSERT INTO schedules (id, project_id, user_id, name, cron, next_fire, last_run, runs, active)
  VALUES (?,?,?,?,?,?,?,?,?)
ON CONFLICT (id) DO UPDATE SET next_fire=excluded.next_fire, last_run=excluded.last_run, runs=excluded.runs,
  active=excluded.active`
	arrayCols    = `id, project_id, user_id, indices, throttle, next, cancel, stopped, done, failed, active`
	scheduleCols = `id, project_id, user_id, name, cron, next_fire, last_run, runs, active`
)

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
			if _, err := st(ctx, a.ID, a.ProjectID, a.UserID, a.Indices, a.Throttle, a.Next, cancel, boolInt(a.Stopped),
				a.Done, a.Failed, boolInt(a.Active)); err != nil {
				return fmt.Errorf("store: array %d: %w", a.ID, err)
			}
		}
	}
	if len(b.Schedules) > 0 {
		st := s.stmt(ctx, tx, upsertSchedule)
		for _, c := range b.Schedules {
			cron, _ := json.Marshal(c.Cron)
			if _, err := st(ctx, c.ID, c.ProjectID, c.UserID, c.Name, string(cron), nanos(c.NextFire), c.LastRun, c.Runs,
				boolInt(c.Active)); err != nil {
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
	if err := sc.Scan(&a.ID, &a.ProjectID, &a.UserID, &a.Indices, &a.Throttle, &a.Next, &cancel, &stopped,
		&a.Done, &a.Failed, &active); err != nil {
		return nil, err
	}
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
	if err := sc.Scan(&c.ID, &c.ProjectID, &c.UserID, &c.Name, &cron, &next, &c.LastRun, &c.Runs, &active); err != nil {
		return nil, err
	}
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
