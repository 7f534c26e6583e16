package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/berth-hq/berth/internal/api"
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

// Reasons of faults.
const (
	reasonUnreachable = "instance_unreachable"
	reasonNoCapacity  = "failed_to_start_due_to_no_capacity"
	reasonByServer    = "terminated_by_server" // a sibling job failed, or the master is done
	reasonBeginTime   = "BeginTime"
)

// retryState is a run's retry history, in its meta.
type retryState struct {
	LastFailure time.Time `json:"last_failure"`
	Event       string    `json:"event"`  // the last failure's: error or interruption
	Reason      string    `json:"reason"` // and its job reason
	Expired     bool      `json:"expired,omitempty"`
	Retries     int       `json:"retries"`
	NotBefore   time.Time `json:"not_before"`
}

func (rs *runState) retryInfo() *retryState {
	if rs.retry == nil {
		var m runMeta
		if len(rs.rec.Meta) > 0 && json.Unmarshal(rs.rec.Meta, &m) == nil && m.Retry != nil {
			rs.retry = m.Retry
		} else {
			rs.retry = &retryState{}
		}
	}
	return rs.retry
}

// retryEvent is the retry event a final job reason counts as ("": none).
func retryEvent(status api.Status, reason string) string {
	switch reason {
	case reasonUnreachable, api.ReasonLostByAgent, api.ReasonTerminatedByAgent:
		return "interruption"
	case api.ReasonExitedWithError, api.ReasonOOM, api.ReasonFailedToStart:
		return "error"
	}
	if status == api.StatusFailed {
		return "error"
	}
	return ""
}

// retryLocked decides, for a run whose jobs have all ended, whether to start
// it again; if so it requeues it and returns true.
func (s *Server) retryLocked(rs *runState, now time.Time, b *store.Batch) bool {
	r := rs.spec.Retry
	if r == nil || rs.rec.StopReq == stopUser || rs.rec.StopReq == stopAbort || rs.rec.StopReq == stopPreemptCancel {
		return false
	}
	// The run's event and reason: its first failing job's (not a sibling
	// the server stopped because of it).
	event, reason := "", ""
	for _, js := range rs.jobs {
		if e := retryEvent(api.Status(js.rec.Status), js.rec.Reason); e != "" && js.rec.Reason != reasonByServer {
			event, reason = e, js.rec.Reason
			break
		}
	}
	if event == "" || !slices.Contains(r.OnEvents, event) {
		return false
	}
	st := rs.retryInfo()
	if st.Expired {
		return false
	}
	st.LastFailure, st.Event, st.Reason = now, event, reason
	st.Retries++
	st.NotBefore = now.Add(min(time.Second<<min(st.Retries-1, 6), time.Minute))
	rs.saveMeta()
	s.requeueLocked(rs, now, b, fmt.Sprintf("retry after %s (%s)", event, reason))
	return true
}

// noCapacityLocked fails, for a run with a retry policy that waits because no
// node could ever hold it, when the policy does not wait for capacity or its
// duration has passed since submission.
func (s *Server) noCapacityLocked(rs *runState, now time.Time, b *store.Batch) bool {
	r := rs.spec.Retry
	if r == nil {
		return false // no retry policy: wait, as Slurm's queue does
	}
	if slices.Contains(r.OnEvents, "no-capacity") {
		if r.Duration == nil {
			return false
		}
		if deadline := rs.rec.SubmittedAt.Add(time.Duration(*r.Duration) * time.Second); !now.After(deadline) {
			// Look again when the duration has passed.
			if s.holdUntil.IsZero() || deadline.Before(s.holdUntil) {
				s.holdUntil = deadline.Add(time.Millisecond)
			}
			return false
		}
	}
	for _, js := range rs.jobs {
		if !api.Status(js.rec.Status).Finished() {
			s.finishJob(js, api.StatusFailed, reasonNoCapacity, nil, now, b)
		}
	}
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "failed", Message: "no node can hold the run (retry on no-capacity not allowed or its duration has passed)"})
	s.aggregate(rs, now, b)
	return true
}

// jobFailedLocked stops the other jobs of a multi-node run when one fails,
// and the workers when the master is done under stop_criteria master-done.
func (s *Server) jobFailedLocked(js *jobState, now time.Time, b *store.Batch) []func() {
	rs := js.run
	if len(rs.jobs) < 2 || rs.rec.StopReq > 0 {
		return nil
	}
	st := api.Status(js.rec.Status)
	masterDone := rs.spec.StopCriteria == "master-done" && js.rec.Num == 0 && st == api.StatusDone
	if st == api.StatusDone && !masterDone {
		return nil
	}
	var after []func()
	for _, o := range rs.jobs {
		if o == js || api.Status(o.rec.Status).Finished() {
			continue
		}
		o.stopping = true
		if api.Status(o.rec.Status) == api.StatusSubmitted || o.held { // held: never sent to its node
			s.finishJob(o, api.StatusTerminated, reasonByServer, nil, now, b)
			continue
		}
		after = s.terminateJobLocked(o, false, b, after)
	}
	why := fmt.Sprintf("job %d failed (%s): the run's other jobs are stopped", js.rec.Num, js.rec.Reason)
	if masterDone {
		why = "the master job is done (stop_criteria: master-done): the workers are stopped"
	}
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, JobID: js.rec.ID, Time: now, Type: "stop", Message: why})
	return after
}

// nodesLostLocked ends the jobs of nodes away for longer than NodeTimeout
// and returns when the next node would be (zero: none pending).
func (s *Server) nodesLostLocked(now time.Time, b *store.Batch) (next time.Time, after []func()) {
	for _, ns := range s.nodes {
		if ns.conn != nil || ns.downSince.IsZero() || len(ns.jobs) == 0 {
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
		var runs []*runState
		for _, js := range ns.jobs {
			s.finishJob(js, api.StatusFailed, reasonUnreachable, nil, now, b)
			b.Events = append(b.Events, &store.Event{RunID: js.rec.RunID, JobID: js.rec.ID, Time: now, Type: "node_failure",
				Message: fmt.Sprintf("node %s unreachable for %s", ns.info.Name, s.cfg.NodeTimeout)})
			after = append(after, s.jobFailedLocked(js, now, b)...)
			if !slices.Contains(runs, js.run) {
				runs = append(runs, js.run)
			}
		}
		for _, rs := range runs {
			s.aggregate(rs, now, b)
			after = append(after, s.notify(rs.rec.ID))
		}
	}
	return next, after
}

// checkNodes runs nodesLostLocked and commits what it did.
func (s *Server) checkNodes() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return time.Time{}
	}
	b := &store.Batch{}
	next, after := s.nodesLostLocked(s.clock.Now(), b)
	if !b.Empty() {
		s.enqueue(b, append(after, s.wakeScheduler)...)
	}
	return next
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
func (s *Server) releaseHeldLocked(rs *runState) []func() {
	started := func(k int) bool {
		st := api.Status(rs.jobs[k].rec.Status)
		return st == api.StatusRunning || st.Finished()
	}
	var after []func()
	hosts, ips := s.runHosts(rs)
	for k, js := range rs.jobs {
		if !js.held || api.Status(js.rec.Status).Finished() || startupHeld(rs.spec, k, started, len(rs.jobs)) {
			continue
		}
		js.held = false
		if ns, ok := s.nodes[js.rec.Node]; ok && ns.conn != nil {
			c, asg := ns.conn, s.assignment(js, hosts, ips)
			after = append(after, func() { c.send(api.AgentMessage{Type: "assign", Jobs: []api.Assignment{asg}}) })
		}
	}
	return after
}

// retryExpiredLocked fails a retried run still waiting `duration` after its
// last failure (dstack: the duration counts from the last event), and
// returns whether it did; otherwise it makes sure a pass comes at the
// deadline.
func (s *Server) retryExpiredLocked(rs *runState, now time.Time, b *store.Batch) bool {
	r, st := rs.spec.Retry, rs.retry
	if r == nil || r.Duration == nil || st == nil || st.LastFailure.IsZero() {
		return false
	}
	deadline := st.LastFailure.Add(time.Duration(*r.Duration) * time.Second)
	if !now.After(deadline) {
		if s.holdUntil.IsZero() || deadline.Before(s.holdUntil) {
			s.holdUntil = deadline.Add(time.Millisecond)
		}
		return false
	}
	st.Expired = true // this end is final: no retry of it
	reason := st.Reason
	if reason == "" {
		reason = api.ReasonExitedWithError
	}
	for _, js := range rs.jobs {
		if !api.Status(js.rec.Status).Finished() {
			s.finishJob(js, api.StatusFailed, reason, nil, now, b)
		}
	}
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "failed",
		Message: fmt.Sprintf("retry after %s: still waiting %s after the failure (retry duration)", st.Event, now.Sub(st.LastFailure).Round(time.Second))})
	s.aggregate(rs, now, b)
	return true
}
