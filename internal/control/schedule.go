package control

import (
	"encoding/json"
	"fmt"
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

// scheduleState is a schedule's progress, in its run record's meta.
type scheduleState struct {
	Next  time.Time `json:"next"`
	Runs  int       `json:"runs"` // runs submitted so far
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
	st := &scheduleState{exprs: exprs}
	st.Next = st.next(now)
	rs.w().sched = st
	rs.rec.Status = string(api.StatusScheduled)
	rs.rec.EstimatedStart = st.Next
	rs.saveMeta()
	return nil
}

// loadSchedule restores a schedule from its record.
func (s *Cluster) loadSchedule(rs *runState) error {
	var m runMeta
	if err := json.Unmarshal(rs.rec.Meta, &m); err != nil || m.Schedule == nil {
		return fmt.Errorf("server: schedule %d: bad state %q", rs.rec.ID, rs.rec.Meta)
	}
	exprs, err := parseCron(rs.task().Schedule.Cron)
	if err != nil {
		return fmt.Errorf("server: schedule %d: %w", rs.rec.ID, err)
	}
	m.Schedule.exprs = exprs
	if m.Schedule != nil || rs.rare != nil {
		rs.w().sched = m.Schedule
	}
	return nil
}

// tickSchedulesLocked submits a run for every schedule whose tick has come
// (once, however many ticks passed) and returns when the next tick is due.
func (s *Cluster) tickSchedulesLocked(now time.Time, b *store.Batch) time.Time {
	var soonest time.Time
	for _, rs := range s.schedules {
		st := rs.r().sched
		if !st.Next.After(now) {
			s.submitTickLocked(rs, now, b)
			st.Runs++
			st.Next = st.next(now)
			rs.rec.EstimatedStart = st.Next
			rs.saveMeta()
			b.Runs = append(b.Runs, runCopy(rs))
		}
		if soonest.IsZero() || st.Next.Before(soonest) {
			soonest = st.Next
		}
	}
	return soonest
}

// submitTickLocked submits one run of a schedule.
func (s *Cluster) submitTickLocked(rs *runState, now time.Time, b *store.Batch) {
	t := *rs.task()
	t.Schedule = nil
	body, _ := json.Marshal(&t)
	s.nextRun++
	run := s.newRunState(store.Run{ID: s.nextRun, ProjectID: rs.rec.ProjectID, UserID: rs.rec.UserID, Name: rs.rec.Name,
		Status: string(api.StatusSubmitted), Priority: rs.rec.Priority, Spec: body, SubmittedAt: now}, &t, rs.user, rs.project)
	s.queueRunLocked(run, now, b)
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "scheduled",
		Message: "submitted run " + strconv.FormatInt(run.rec.ID, 10)})
}

// stopScheduleLocked ends a schedule: no more runs (those submitted go on).
func (s *Cluster) stopScheduleLocked(rs *runState, now time.Time, b *store.Batch) {
	rs.rec.Status, rs.rec.Reason, rs.rec.FinishedAt, rs.rec.EstimatedStart = string(api.StatusTerminated), api.ReasonTerminatedByUser, now, time.Time{}
	delete(s.schedules, rs.rec.ID)
	delete(s.runs, rs.rec.ID)
	s.countActive(rs, -1)
	b.Runs = append(b.Runs, runCopy(rs))
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "stop", Message: "schedule stopped"})
}

// tickSchedules submits the runs whose tick has come and returns the next
// tick (zero: no schedule).
