package lifecycle

import (
	"fmt"
	"slices"
	"time"
)

// Run is what Step needs to know of a run.
type Run struct {
	Status Status
	Reason Reason
	Stop   StopCause
	// Retry is its retry policy (nil: none); Retries its history.
	Retry   *RetryPolicy
	Retries Retries
	// MasterDone: stop_criteria master-done (the run ends done when job 0
	// ends done; the workers are stopped).
	MasterDone  bool
	SubmittedAt time.Time
}

// Job is what Step needs to know of one of the run's jobs (one per node).
type Job struct {
	Status   Status
	Reason   Reason
	ExitCode *int
	Attempt  int
	// Held: startup_order kept its assignment from its node, so ending it
	// needs no agent.
	Held bool
	// BySibling: the server stops it because a sibling failed or the
	// master is done; its end does not decide the run's.
	BySibling bool
	// Message is its agent's word on its end, in the step that reports
	// it (not kept): retry compares start failures by it.
	Message string
}

// EventKind is what happened to a run.
type EventKind int

const (
	// Settle derives the run's state from its jobs as they are (after the
	// server placed them, for instance).
	Settle EventKind = iota
	// Started: job Event.Job's process started.
	Started
	// Exited: job Event.Job ended; Event.Exit is its agent's report and
	// Event.Time when it ended.
	Exited
	// NodeLost: job Event.Job's node stayed away longer than the node
	// timeout (Slurm's NODE_FAIL).
	NodeLost
	// StopRequested: Event.Cause (user, abort, requeue) asks the run to stop.
	StopRequested
	// Preempted: the scheduler preempts the run, Event.Cause being
	// StopPreemptRequeue or StopPreemptCancel; Event.By the run it yields to.
	Preempted
	// Failed: the server ends every unfinished job with Event.Status and
	// Event.Reason (no capacity, retry duration passed, a dependency that
	// can never be satisfied); the run ends, and is not retried.
	Failed
)

var kindNames = [...]string{"settle", "started", "exited", "node-lost", "stop", "preempted", "failed"}

func (k EventKind) String() string { return kindNames[k] }

// Event is one input of Step.
type Event struct {
	Kind  EventKind
	Job   int // the job's index in the run's jobs
	Exit  Exit
	Cause StopCause
	By    int64
	// Status and Reason of a Failed event.
	Status Status
	Reason Reason
	// Time is when a job started or ended, by its agent's clock (zero: now).
	Time time.Time
}

// JobChange is a change of one job that the server applies.
type JobChange struct {
	Job      int
	Status   Status
	Reason   Reason
	ExitCode *int
	// At is when the job reached Status (its end, for a final one).
	At time.Time
	// Terminate: ask the job's agent to stop it (Abort: with SIGKILL at
	// once); the job is terminating until the agent reports its end.
	Terminate, Abort bool
	// BySibling marks the job stopped because of a sibling.
	BySibling bool
}

// Note is a line of the run's history the server records.
type Note struct {
	Job     int // the job's index; -1 for the run
	Type    string
	Message string
	// After is how many of the decision's job changes come before it in
	// the history (a stop request comes before the ends it causes).
	After int
}

// Decision is what a run and its jobs are after an event: the only place
// that says "this run is now X".
type Decision struct {
	Jobs  []JobChange
	Notes []Note
	// Stop is the run's stop cause after the event.
	Stop StopCause
	// Status, Reason and ExitCode are the run's after the event (its
	// previous ones when the event changes nothing). Final: the run ended.
	Status   Status
	Reason   Reason
	ExitCode *int
	Final    bool
	// Requeue: every job ended and the run goes back to the queue as a new
	// attempt with fresh jobs (Attempt), keeping its ID and history.
	Requeue bool
	Attempt int
	// Retried: the requeue is a retry; Retries is the updated history.
	Retried bool
	Retries Retries
}

func (d *Decision) note(n Note) {
	n.After = len(d.Jobs)
	d.Notes = append(d.Notes, n)
}

// Step applies ev to a run with the given jobs at now and returns what the
// run and its jobs are afterwards. It does not change its arguments.
func Step(r Run, jobs []Job, ev Event, now time.Time) Decision {
	d := Decision{Stop: r.Stop, Status: r.Status, Reason: r.Reason, Retries: r.Retries}
	js := slices.Clone(jobs)
	at := ev.Time
	if at.IsZero() {
		at = now
	}
	change := func(c JobChange) {
		j := &js[c.Job]
		j.Status, j.BySibling = c.Status, j.BySibling || c.BySibling
		if !c.Terminate {
			j.Reason, j.ExitCode = c.Reason, c.ExitCode
		}
		d.Jobs = append(d.Jobs, c)
	}
	switch ev.Kind {
	case Started:
		if st := js[ev.Job].Status; st == StatusProvisioning || st == StatusPulling {
			change(JobChange{Job: ev.Job, Status: StatusRunning, At: at})
		}
	case Exited:
		if js[ev.Job].Status.Finished() {
			break
		}
		st, reason := JobEnd(ev.Exit, d.Stop, js[ev.Job].BySibling)
		code := ev.Exit.Code
		change(JobChange{Job: ev.Job, Status: st, Reason: reason, ExitCode: &code, At: at})
		js[ev.Job].Message = ev.Exit.Message
		stopSiblings(r, js, ev.Job, &d, change, now)
	case NodeLost:
		if js[ev.Job].Status.Finished() {
			break
		}
		change(JobChange{Job: ev.Job, Status: StatusFailed, Reason: ReasonUnreachable, At: now})
		stopSiblings(r, js, ev.Job, &d, change, now)
	case StopRequested:
		stop, changed := request(d.Stop, ev.Cause)
		if !changed && ev.Cause == StopRequeue {
			break // a run a user stops is not requeued
		}
		if changed {
			d.Stop = stop
			msg := "stop requested"
			switch ev.Cause {
			case StopAbort:
				msg = "abort requested"
			case StopUtilization:
				msg = "GPU utilization stayed under utilization_policy"
			}
			d.note(Note{Job: -1, Type: "stop", Message: msg})
		}
		abort := ev.Cause == StopAbort
		for k, j := range js {
			switch {
			case j.Status.Finished():
			case j.Held || j.Status == StatusSubmitted:
				// Not on a node (startup_order kept it back): it ends here.
				if abort {
					change(JobChange{Job: k, Status: StatusAborted, Reason: ReasonAbortedByUser, At: now})
				} else if ev.Cause == StopUtilization {
					change(JobChange{Job: k, Status: StatusTerminated, Reason: ReasonUtilizationPolicy, At: now})
				} else {
					change(JobChange{Job: k, Status: StatusTerminated, Reason: ReasonTerminatedByUser, At: now})
				}
			default:
				change(JobChange{Job: k, Status: StatusTerminating, Terminate: true, Abort: abort, At: now})
			}
		}
	case Preempted:
		stop, changed := request(d.Stop, ev.Cause)
		if !changed || !slices.ContainsFunc(js, func(j Job) bool { return j.Status.Placed() }) {
			return d // stopping already, or not on a node: nothing to preempt
		}
		d.Stop = stop
		mode := "requeue"
		if stop == StopPreemptCancel {
			mode = "cancel"
		}
		d.note(Note{Job: -1, Type: "preempted", Message: fmt.Sprintf("preempted by run %d (%s)", ev.By, mode)})
		for k, j := range js {
			switch {
			case j.Status.Finished():
			case j.Held:
				change(JobChange{Job: k, Status: StatusTerminated, Reason: ReasonPreempted, At: now})
			case j.Status == StatusProvisioning, j.Status == StatusPulling, j.Status == StatusRunning:
				change(JobChange{Job: k, Status: StatusTerminating, Terminate: true, At: now})
			}
		}
	case Failed:
		for k, j := range js {
			if !j.Status.Finished() {
				change(JobChange{Job: k, Status: ev.Status, Reason: ev.Reason, At: now})
			}
		}
	}
	// The server's own verdict (Failed) ends the run: it is not retried.
	settle(r, js, &d, now, ev.Kind != Failed)
	return d
}

// stopSiblings stops the other jobs of a multi-node run when job k failed
// (runs are all-or-nothing), and the workers when the master is done under
// stop_criteria master-done.
func stopSiblings(r Run, js []Job, k int, d *Decision, change func(JobChange), now time.Time) {
	if len(js) < 2 || d.Stop != StopNone || js[k].BySibling {
		return // a job the server stopped for a sibling stops nothing more
	}
	st := js[k].Status
	masterDone := r.MasterDone && k == 0 && st == StatusDone
	if st == StatusDone && !masterDone {
		return
	}
	before := len(d.Jobs)
	for o, j := range js {
		switch {
		case o == k || j.Status.Finished():
		case j.Status == StatusSubmitted || j.Held: // never sent to its node
			change(JobChange{Job: o, Status: StatusTerminated, Reason: ReasonByServer, BySibling: true, At: now})
		default:
			change(JobChange{Job: o, Status: StatusTerminating, Terminate: true, BySibling: true, At: now})
		}
	}
	if len(d.Jobs) == before {
		return // every other job had ended: nothing to say
	}
	why := fmt.Sprintf("job %d failed (%s): the run's other jobs are stopped", k, js[k].Reason)
	if masterDone {
		why = "the master job is done (stop_criteria: master-done): the workers are stopped"
	}
	d.note(Note{Job: k, Type: "stop", Message: why})
}

// settle derives the run's state from its jobs: requeued, retried or final
// once every job ended; else terminating, running or provisioning.
func settle(r Run, js []Job, d *Decision, now time.Time, mayRetry bool) {
	final := true
	var running, provisioning, terminating bool
	for _, j := range js {
		switch j.Status {
		case StatusRunning:
			running = true
		case StatusProvisioning, StatusPulling:
			provisioning = true
		case StatusTerminating:
			terminating = true
		}
		if !j.Status.Finished() {
			final = false
		}
	}
	switch {
	case final && d.Stop.Requeues():
		why := "preempted; back in the queue"
		if d.Stop == StopRequeue {
			why = "requeued on request"
		}
		requeue(js, d)
		d.note(Note{Job: -1, Type: "requeued", Message: fmt.Sprintf("%s: attempt %d", why, d.Attempt)})
	case final && mayRetry && retry(r, js, d, now):
	case final:
		d.Status, d.Reason, d.ExitCode = finalState(js)
		d.Final = true
	case terminating || d.Stop != StopNone:
		d.Status = StatusTerminating
	case running || provisioning && d.Status == StatusRunning:
		// A run that ran stays running while a job it still waits for
		// (startup_order) is being provisioned.
		d.Status, d.Reason = StatusRunning, ReasonNone
	case provisioning:
		d.Status, d.Reason = StatusProvisioning, ReasonNone
	}
}

// requeue makes d a new attempt of the run.
func requeue(js []Job, d *Decision) {
	attempt := 0
	for _, j := range js {
		attempt = max(attempt, j.Attempt)
	}
	d.Requeue, d.Attempt = true, attempt+1
	d.Status, d.Reason, d.Stop, d.ExitCode = StatusSubmitted, ReasonNone, StopNone, nil
}

// finalState is a finished run's state from its jobs: its worst job's
// status and reason (jobs the server stopped because of a sibling do not
// count: that sibling's end decides), and the last non-zero exit code.
func finalState(js []Job) (Status, Reason, *int) {
	status, reason := StatusDone, ReasonDone
	var code *int
	for _, j := range js {
		if j.Reason == ReasonByServer {
			continue
		}
		if j.Status.rank() > status.rank() {
			status, reason = j.Status, j.Reason
		}
		if j.ExitCode != nil && (code == nil || *code == 0) {
			v := *j.ExitCode
			code = &v
		}
	}
	return status, reason, code
}

// ArrayEnd is an array's final state once no task remains to run: stopped
// by its user (stopped, or tasks cancelled before they existed while none
// failed), failed when a task failed, else done.
func ArrayEnd(stopped, cancelledUnmade bool, failed int) (Status, Reason) {
	switch {
	case stopped || cancelledUnmade && failed == 0:
		return StatusTerminated, ReasonTerminatedByUser
	case failed > 0:
		return StatusFailed, ReasonExitedWithError
	}
	return StatusDone, ReasonDone
}
