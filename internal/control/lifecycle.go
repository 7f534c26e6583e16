package control

import (
	"time"

	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/store"
)

// A run's life is decided by lifecycle.Step; this file feeds it a run as it
// is in memory and applies its decision: the mechanics (what a job holds on
// its node, the store batch, the messages to agents) stay here, the
// decision of what the run and its jobs are now is lifecycle's alone.

// lifeRun is what lifecycle needs of rs.
func (rs *runState) lifeRun() lifecycle.Run {
	r := lifecycle.Run{Status: lifecycle.Status(rs.rec.Status), Reason: lifecycle.Reason(rs.rec.Reason),
		Stop: lifecycle.StopCause(rs.rec.StopReq), Retry: rs.r().retryPolicy, MasterDone: rs.masterDone, SubmittedAt: rs.rec.SubmittedAt}
	if rt := rs.r().retry; rt != nil {
		r.Retries = *rt
	}
	return r
}

// lifeJobs is what lifecycle needs of rs's jobs, in their order.
func (rs *runState) lifeJobs() []lifecycle.Job {
	out := make([]lifecycle.Job, len(rs.jobs))
	for k, js := range rs.jobs {
		out[k] = lifecycle.Job{Status: lifecycle.Status(js.rec.Status), Reason: lifecycle.Reason(js.rec.Reason),
			ExitCode: js.rec.ExitCode, Attempt: js.rec.Attempt, Held: js.held, BySibling: js.stopping}
	}
	return out
}

// stepLocked applies ev to rs at now, recording what changed in b, and
// returns what to send once b is committed.
func (s *Cluster) stepLocked(rs *runState, ev lifecycle.Event, now time.Time, b *store.Batch) []Effect {
	s.jobsLocked(rs)
	return s.applyLocked(rs, lifecycle.Step(rs.lifeRun(), rs.lifeJobs(), ev, now), now, b)
}

// applyLocked carries out a decision on rs: jobs end (releasing what they
// held), are asked to stop, or start; the run becomes what the decision
// says, goes back to the queue as a new attempt, or ends and leaves memory.
func (s *Cluster) applyLocked(rs *runState, d lifecycle.Decision, now time.Time, b *store.Batch) []Effect {
	var after []Effect
	notes := d.Notes
	record := func(done int) {
		for len(notes) > 0 && notes[0].After <= done {
			n := notes[0]
			notes = notes[1:]
			e := &store.Event{RunID: rs.rec.ID, Time: now, Type: n.Type, Message: n.Message}
			if n.Job >= 0 {
				e.JobID = rs.jobs[n.Job].rec.ID
			}
			b.Events = append(b.Events, e)
		}
	}
	for k, c := range d.Jobs {
		record(k)
		js := rs.jobs[c.Job]
		js.stopping = js.stopping || c.BySibling
		switch {
		case c.Terminate:
			after = s.terminateJobLocked(js, c.Abort, now, b, after)
		case c.Status.Finished():
			s.finishJob(js, c.Status, c.Reason, c.ExitCode, c.At, b)
		default:
			js.rec.Status = string(c.Status)
		}
	}
	record(len(d.Jobs))
	rs.rec.StopReq = int(d.Stop)
	switch {
	case d.Requeue:
		rs.rec.Status, rs.rec.Reason = string(d.Status), string(d.Reason)
		if d.Retried {
			h := d.Retries
			rs.w().retry = &h
			rs.saveMeta()
		}
		s.requeueLocked(rs, d.Attempt, now, b)
	case d.Final:
		rs.rec.Status, rs.rec.Reason, rs.rec.ExitCode = string(d.Status), string(d.Reason), d.ExitCode
		s.finalRun(rs, now)
		if rs.parent != nil {
			s.taskEndedLocked(rs, now)
			b.Runs = append(b.Runs, runCopy(rs.parent))
		}
	default:
		rs.rec.Status, rs.rec.Reason = string(d.Status), string(d.Reason)
		if d.Status == lifecycle.StatusRunning || d.Status == lifecycle.StatusTerminating {
			s.parentRunningLocked(rs, b)
		}
	}
	if d.Stop != lifecycle.StopNone && rs.r().stopBy.IsZero() {
		rs.w().stopBy = s.stopByOf(rs, now)
	}
	s.syncRun(rs) // what it holds, until when, as the scheduler sees it
	b.Runs = append(b.Runs, runCopy(rs))
	return after
}

// stopByOf is when a run asked to stop at now is gone at the latest: its
// grace period on (none when aborted: SIGKILL at once).
func (s *Cluster) stopByOf(rs *runState, now time.Time) time.Time {
	if lifecycle.StopCause(rs.rec.StopReq) == lifecycle.StopAbort {
		return now
	}
	return now.Add(s.graceOf(rs))
}

// aggregate derives the run's status from its jobs' as they are (after a
// placement) and records the run in b.
func (s *Cluster) aggregate(rs *runState, now time.Time, b *store.Batch) {
	s.stepLocked(rs, lifecycle.Event{Kind: lifecycle.Settle}, now, b)
}
