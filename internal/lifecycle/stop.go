package lifecycle

// StopCause is what asked a run to stop. Its values are stored (runs'
// stop_req) and sent to agents (an assignment's stop: above zero stop, 2
// abort), so they never change.
type StopCause int

const (
	StopNone StopCause = iota
	// StopUser: a user's stop (SIGTERM, then SIGKILL after the grace).
	StopUser
	// StopAbort: a user's abort (SIGKILL at once).
	StopAbort
	// StopPreemptRequeue: preempted for a higher QOS; back to the queue.
	StopPreemptRequeue
	// StopPreemptCancel: preempted for a higher QOS; the run ends.
	StopPreemptCancel
	// StopRequeue: scontrol requeue; back to the queue once stopped.
	StopRequeue
	// StopUtilization: its GPUs stayed under its utilization_policy for
	// the policy's window; the run ends.
	StopUtilization
)

var stopNames = [...]string{"none", "user", "abort", "preempt-requeue", "preempt-cancel", "requeue", "utilization-policy"}

func (c StopCause) String() string {
	if c >= 0 && int(c) < len(stopNames) {
		return stopNames[c]
	}
	return "unknown"
}

// Requeues reports whether a run stopped for c goes back to the queue.
func (c StopCause) Requeues() bool { return c == StopPreemptRequeue || c == StopRequeue }

// Retriable reports whether a run stopped for c may be retried by its retry
// policy: never after a user's stop or abort, nor after a preemption that
// cancels it.
func (c StopCause) Retriable() bool {
	return c != StopUser && c != StopAbort && c != StopPreemptCancel && c != StopUtilization
}

// Preemption reports whether c is a preemption.
func (c StopCause) Preemption() bool { return c == StopPreemptRequeue || c == StopPreemptCancel }

// request is the cause a run has after a request for next while it has cur,
// and whether the request changed it. A user's stop or abort wins over a
// preemption or a requeue (the run is not requeued); an abort wins over a
// stop; a requeue does not undo a user's stop; a preemption only takes a run
// nothing stops yet.
func request(cur, next StopCause) (StopCause, bool) {
	switch next {
	case StopUser, StopAbort:
		if cur == StopNone || cur > StopAbort || cur < next {
			return next, true
		}
	case StopRequeue:
		if cur == StopNone || cur.Preemption() || cur == StopRequeue {
			return next, true
		}
	case StopPreemptRequeue, StopPreemptCancel, StopUtilization:
		if cur == StopNone {
			return next, true
		}
	}
	return cur, false
}

// Admits reports whether a run stopping for c (StopNone: not stopping)
// takes a request for next; a requeue asked of a run a user stops is not.
func (c StopCause) Admits(next StopCause) bool {
	_, changed := request(c, next)
	return changed || c == next
}

// Exit is what an agent reported of a job's end.
type Exit struct {
	// Reason is the shim's word: stopped, aborted, max_duration,
	// start_failed, lost_by_agent, OOM, or "" for a process that exited.
	Reason string
	Code   int
	// OOMKilled: the kernel's OOM killer killed a process of the job.
	OOMKilled bool
	// Message is the agent's word on a job that did not start (the
	// engine's error: an image that cannot be pulled), for retry's count
	// of the same start failure.
	Message string
}

// JobEnd maps an agent's report onto a job's final state, given what asked
// its run to stop and whether the server stopped this job because of a
// sibling.
func JobEnd(e Exit, cause StopCause, bySibling bool) (Status, Reason) {
	switch e.Reason {
	case "stopped":
		switch {
		case bySibling:
			return StatusTerminated, ReasonByServer
		case cause == StopNone:
			return StatusTerminated, ReasonTerminatedByAgent
		case cause == StopRequeue:
			return StatusTerminated, ReasonRequeued
		case cause.Preemption():
			return StatusTerminated, ReasonPreempted
		case cause == StopUtilization:
			return StatusTerminated, ReasonUtilizationPolicy
		}
		return StatusTerminated, ReasonTerminatedByUser
	case "aborted":
		return StatusAborted, ReasonAbortedByUser
	case "max_duration":
		return StatusTerminated, ReasonMaxDuration
	case "start_failed":
		return StatusFailed, ReasonFailedToStart
	case string(ReasonLostByAgent):
		return StatusFailed, ReasonLostByAgent
	case string(ReasonOOM):
		return StatusFailed, ReasonOOM
	}
	// As Slurm's OUT_OF_MEMORY: an OOM kill in the job fails it, whatever
	// its exit code (a stop asked for above still reads as the stop).
	if e.OOMKilled {
		return StatusFailed, ReasonOOM
	}
	if e.Code == 0 {
		return StatusDone, ReasonDone
	}
	return StatusFailed, ReasonExitedWithError
}
