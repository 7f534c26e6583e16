package control

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
	"github.com/robfig/cron/v3"
)

// Scheduled runs. A configuration with `schedule: {cron: [...]}` stores one
// record, the schedule's own run (status scheduled, its next tick as the
// estimated start), and at each tick the server submits a run of the same
// configuration without the schedule, named like it. A tick missed while
// the server was down is run once at start, not once per missed tick. The
// schedule lasts until it is stopped.

// scheduleState is a schedule in memory: its own record (store.Schedule:
// cron lines, next fire, last run, runs submitted, active), stored
// whenever its run row is (emit), and its parsed cron lines.
type scheduleState struct {
	rec   store.Schedule
	exprs []cron.Schedule
}

func parseCron(lines []string) ([]cron.Schedule, error) {
	out := make([]cron.Schedule, 0, len(lines))
	for i, l := range lines {
		c, err := cron.ParseStandard(l)
		if err != nil {
			return nil, fmt.Errorf("%w: schedule.cron[%d]: %v", ErrInvalid, i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// next is the first tick after t over every expression, in UTC.
func (st *scheduleState) next(t time.Time) time.Time {
	var best time.Time
	for _, c := range st.exprs {
		if n := c.Next(t.UTC()); best.IsZero() || n.Before(best) {
			best = n
		}
	}
	return best
}

// newScheduleLocked sets up a submitted schedule.
func (s *Cluster) newScheduleLocked(rs *runState, now time.Time) error {
	exprs, err := parseCron(rs.task().Schedule.Cron)
	if err != nil {
		return err
	}
	t := rs.task()
	st := &scheduleState{exprs: exprs, rec: store.Schedule{ID: rs.rec.ID, ProjectID: rs.rec.ProjectID, UserID: rs.rec.UserID,
		Cron: slices.Clone(t.Schedule.Cron), Active: true}}
	st.rec.NextFire = st.next(now)
	rs.w().sched = st
	rs.rec.Status = string(api.StatusScheduled)
	rs.rec.EstimatedStart = st.rec.NextFire
	return nil
}

// loadSchedule restores a schedule from its record.
func (s *Cluster) loadSchedule(rs *runState, rec *store.Schedule) error {
	if rec == nil {
		return fmt.Errorf("server: schedule %d: no schedule record", rs.rec.ID)
	}
	exprs, err := parseCron(rs.task().Schedule.Cron)
	if err != nil {
		return fmt.Errorf("server: schedule %d: %w", rs.rec.ID, err)
	}
	st := &scheduleState{rec: *rec, exprs: exprs}
	st.rec.Cron = slices.Clone(rec.Cron)
	st.rec.Head = store.Head{} // the runState holds it (rs.rec)
	rs.w().sched = st
	return nil
}

// record is a copy of the schedule's record to store, with head h.
func (st *scheduleState) record(h store.Head) *store.Schedule {
	c := st.rec
	c.Cron = slices.Clone(st.rec.Cron)
	c.Head = h
	return &c
}

// tickSchedulesLocked submits a run for every schedule whose tick has come
// (once, however many ticks passed) and returns when the next tick is due.
func (s *Cluster) tickSchedulesLocked(now time.Time, b *store.Batch) time.Time {
	var soonest time.Time
	for _, rs := range s.schedules {
		st := rs.r().sched
		if !st.rec.NextFire.After(now) {
			st.rec.LastRun = s.submitTickLocked(rs, now, b)
			st.rec.Runs++
			st.rec.NextFire = st.next(now)
			rs.rec.EstimatedStart = st.rec.NextFire
			b.Runs = append(b.Runs, runCopy(rs))
		}
		if soonest.IsZero() || st.rec.NextFire.Before(soonest) {
			soonest = st.rec.NextFire
		}
	}
	return soonest
}

// submitTickLocked submits one run of a schedule and returns its ID.
func (s *Cluster) submitTickLocked(rs *runState, now time.Time, b *store.Batch) int64 {
	t := *rs.task()
	t.Schedule = nil
	body, _ := json.Marshal(&t)
	s.nextRun++
	run := s.newRunState(store.Run{ID: s.nextRun, ProjectID: rs.rec.ProjectID, UserID: rs.rec.UserID, Name: rs.rec.Name,
		Status: string(api.StatusSubmitted), Priority: rs.rec.Priority, Spec: body, SubmittedAt: now}, &t, rs.user, rs.project)
	s.queueRunLocked(run, now, b)
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "scheduled",
		Message: "submitted run " + strconv.FormatInt(run.rec.ID, 10)})
	return run.rec.ID
}

// stopScheduleLocked ends a schedule: no more runs (those submitted go on).
func (s *Cluster) stopScheduleLocked(rs *runState, now time.Time, b *store.Batch) {
	rs.rec.Status, rs.rec.Reason, rs.rec.FinishedAt, rs.rec.EstimatedStart = string(api.StatusTerminated), api.ReasonTerminatedByUser, now, time.Time{}
	delete(s.schedules, rs.rec.ID)
	delete(s.runs, rs.rec.ID)
	s.countActive(rs, -1)
	st := rs.r().sched
	st.rec.Active, st.rec.NextFire = false, time.Time{}
	b.Schedules = append(b.Schedules, st.record(headOf(&rs.rec)))
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "stop", Message: "schedule stopped"})
}

// tickSchedules submits the runs whose tick has come and returns the next
// tick (zero: no schedule).
