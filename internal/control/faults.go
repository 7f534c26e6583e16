package control

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Faults: a node that stays away, a job that fails inside a multi-node run,
// and retries.
//
//   - A node whose agent has been disconnected for NodeTimeout is
//     unreachable: its jobs end failed (instance_unreachable, Slurm's
//     NODE_FAIL), an `interruption` for the retry policy. An agent that comes
//     back sooner finds its jobs running, as after a restart.
//   - Runs are all-or-nothing: when one job of a multi-node run fails, the
//     others are stopped, and the run is retried (or fails) as a whole.
//     stop_criteria: master-done ends the run done when job 0 ends done.
//   - retry: {on_events, duration}: a failed attempt whose event is listed
//     goes back to the queue as a new attempt (same run, name and history;
//     BERTH_ATTEMPT and SLURM_RESTART_COUNT count up), as dstack does. The
//     duration counts from the last failure (error, interruption): an
//     attempt still waiting `duration` after it fails the run; for
//     no-capacity (a run no node could ever hold) it counts from the run's
//     submission. Attempts after a failure wait a little longer each time
//     (1 s, doubling, at most a minute: reason BeginTime), so a command that
//     fails at once does not spin.

// noCapacityLocked fails, for a run with a retry policy that waits because no
// node could ever hold it, when the policy does not wait for capacity or its
// duration has passed since submission.
func (s *Cluster) noCapacityLocked(rs *runState, now time.Time, b *store.Batch) bool {
	if s.mayGrow(rs) { // demand.go
		return false
	}
	fail, again := lifecycle.NoCapacity(rs.lifeRun(), now)
	if !fail {
		s.lookAgainLocked(again) // when the duration has passed
		return false
	}
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "failed", Message: "no node can hold the run (retry on no-capacity not allowed or its duration has passed)"})
	s.stepLocked(rs, lifecycle.Event{Kind: lifecycle.Failed, Status: lifecycle.StatusFailed, Reason: lifecycle.ReasonNoCapacity}, now, b)
	return true
}

// nodesLostLocked ends the jobs of nodes away for longer than NodeTimeout
// and returns when the next node would be (zero: none pending).
func (s *Cluster) nodesLostLocked(now time.Time, b *store.Batch) (next time.Time, after []Effect) {
	for _, ns := range s.nodes {
		if ns.online || ns.downSince.IsZero() || len(ns.jobs) == 0 {
			continue
		}
		due := ns.downSince.Add(s.cfg.NodeTimeout)
		if now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		s.log.Warn("node unreachable: its jobs fail", "node", ns.info.Name, "away", now.Sub(ns.downSince).Round(time.Second), "jobs", len(ns.jobs))
		ns.unreachable = true
		// In job ID order, so that the batch is the same on every run.
		for _, id := range slices.Sorted(maps.Keys(ns.jobs)) {
			js, ok := ns.jobs[id]
			if !ok {
				continue // ended with a sibling just before
			}
			b.Events = append(b.Events, &store.Event{RunID: js.rec.RunID, JobID: js.rec.ID, Time: now, Type: "node_failure",
				Message: fmt.Sprintf("node %s unreachable for %s", ns.info.Name, s.cfg.NodeTimeout)})
			after = append(after, s.stepLocked(js.run, lifecycle.Event{Kind: lifecycle.NodeLost, Job: js.rec.Num}, now, b)...)
			after = append(after, s.notify(js.rec.RunID))
		}
	}
	return next, after
}

// onTick submits the schedules' runs whose tick has come and fails the
// jobs of nodes away too long; it answers when it is next due (zero:
// never).
func (s *Cluster) onTick(now time.Time) time.Time {
	s.forgetKeysLocked(now)
	b := &store.Batch{}
	next := time.Time{}
	if len(s.schedules) > 0 {
		next = s.tickSchedulesLocked(now, b)
	}
	if !b.Empty() {
		s.emit(b)
		b = &store.Batch{}
	}
	lost, after := s.nodesLostLocked(now, b)
	if !b.Empty() {
		s.emit(b, append(after, wakeEffect)...)
		b = &store.Batch{}
	}
	next = earliest(next, lost)
	unkillable, after := s.unkillableLocked(now, b)
	if !b.Empty() {
		s.emit(b, append(after, wakeEffect)...)
	}
	return earliest(next, unkillable)
}

// earliest is the sooner of two times, zero meaning never.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// killFailed is the reason a node is drained with when a job there did not
// end once stopped: slurmstepd's words (ESLURMD_KILL_TASK_FAILED).
const killFailed = "Kill task failed"

// unkillableLocked ends the jobs asked to stop, on connected nodes, whose
// end their agent has not reported UnkillableTimeout past their grace
// period, as if they had ended so, and drains their nodes (Slurm's
// UnkillableStepTimeout: whatever is left there may still hold the node's
// resources). It returns when the next such end would be due (zero:
// none).
func (s *Cluster) unkillableLocked(now time.Time, b *store.Batch) (next time.Time, after []Effect) {
	for _, name := range slices.Sorted(maps.Keys(s.nodes)) {
		ns := s.nodes[name]
		if !ns.online {
			continue // nodesLostLocked ends them if it stays away
		}
		drain := false
		for _, id := range slices.Sorted(maps.Keys(ns.jobs)) {
			js, ok := ns.jobs[id]
			if !ok || js.stopSent.IsZero() || api.Status(js.rec.Status) != api.StatusTerminating {
				continue
			}
			grace := s.graceOf(js.run)
			if js.abort {
				grace = 0
			}
			due := js.stopSent.Add(grace + s.cfg.UnkillableTimeout)
			if now.Before(due) {
				next = earliest(next, due)
				continue
			}
			s.log.Warn("job did not end once stopped: ended, node drained", "node", name, "job_id", id, "asked", now.Sub(js.stopSent).Round(time.Second))
			b.Events = append(b.Events, &store.Event{RunID: js.rec.RunID, JobID: id, Time: now, Type: "kill_failed",
				Message: fmt.Sprintf("still running %s after it was asked to stop (grace %s): ended; node %s drained (%s)", now.Sub(js.stopSent).Round(time.Second), grace, name, killFailed)})
			reason := "stopped"
			if js.abort {
				reason = "aborted"
			}
			exit := lifecycle.Exit{Reason: reason, Code: 128 + 9}
			after = append(after, s.stepLocked(js.run, lifecycle.Event{Kind: lifecycle.Exited, Job: js.rec.Num, Exit: exit}, now, b)...)
			after = append(after, s.notify(js.rec.RunID))
			drain = true
		}
		if c := ns.condition(); drain && c.Manual == nil {
			c.Manual = &api.NodeDrain{Reason: killFailed, By: "berth", Since: now}
			s.saveCondLocked(ns)
		}
	}
	return next, after
}

// startupHeld tells whether job k of rs must wait before its assignment
// goes out (startup_order), given which jobs have started.
func startupHeld(t *spec.Task, k int, started func(int) bool, n int) bool {
	switch t.StartupOrder {
	case "master-first":
		return k > 0 && !started(0)
	case "workers-first":
		if k != 0 {
			return false
		}
		for i := 1; i < n; i++ {
			if !started(i) {
				return true
			}
		}
	}
	return false
}

// releaseHeldLocked sends the assignments startup_order held back once the
// jobs they wait for have started.
func (s *Cluster) releaseHeldLocked(rs *runState) []Effect {
	started := func(k int) bool {
		st := api.Status(rs.jobs[k].rec.Status)
		return st == api.StatusRunning || st.Finished()
	}
	var after []Effect
	hosts, ips := s.runHosts(rs)
	for k, js := range rs.jobs {
		if !js.held || api.Status(js.rec.Status).Finished() || startupHeld(rs.task(), k, started, len(rs.jobs)) {
			continue
		}
		js.held = false
		if ns, ok := s.nodes[js.rec.Node]; ok && ns.online {
			asg := s.assignment(js, hosts, ips)
			after = append(after, sendEffect(ns, api.AgentMessage{Type: "assign", Jobs: []api.Assignment{asg}}))
		}
	}
	return after
}

// retryExpiredLocked fails a retried run still waiting `duration` after its
// last failure (dstack: the duration counts from the last event), and
// returns whether it did; otherwise it makes sure a pass comes at the
// deadline.
func (s *Cluster) retryExpiredLocked(rs *runState, now time.Time, b *store.Batch) bool {
	if rs.r().retry == nil {
		return false // never failed: nothing to count from
	}
	r := rs.lifeRun()
	expired, reason, again := lifecycle.RetryExpired(r, now)
	if !expired {
		s.lookAgainLocked(again)
		return false
	}
	// Failed ends the run for good: lifecycle retries no verdict of the server.
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "failed",
		Message: fmt.Sprintf("retry after %s: still waiting %s after the failure (retry duration)", r.Retries.Event, now.Sub(r.Retries.LastFailure).Round(time.Second))})
	s.stepLocked(rs, lifecycle.Event{Kind: lifecycle.Failed, Status: lifecycle.StatusFailed, Reason: reason}, now, b)
	return true
}

// lookAgainLocked makes sure a full pass comes at t (zero: none needed),
// when a run held until then may go on.
func (s *Cluster) lookAgainLocked(t time.Time) {
	if !t.IsZero() && (s.holdUntil.IsZero() || t.Before(s.holdUntil)) {
		s.holdUntil = t
	}
}
