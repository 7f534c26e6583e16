package lifecycle

import (
	"fmt"
	"slices"
	"time"
)

// RetryPolicy is a run's retry policy (dstack's retry): the events that
// start it again, for at most Duration (0: no limit).
type RetryPolicy struct {
	OnEvents []string
	Duration time.Duration
}

// Retries is a run's retry history, kept in its meta (JSON names are
// stored: do not change them).
type Retries struct {
	LastFailure time.Time `json:"last_failure"`
	Event       string    `json:"event"`  // the last failure's: error or interruption
	Reason      Reason    `json:"reason"` // and its job reason
	Retries     int       `json:"retries"`
	NotBefore   time.Time `json:"not_before"`
	// StartFailures counts the attempts in a row that failed to start
	// with the same error (StartError, the agent's message, cut to
	// startErrorLen): at MaxStartFailures retry gives up.
	StartFailures int    `json:"start_failures,omitempty"`
	StartError    string `json:"start_error,omitempty"`
}

// MaxStartFailures is how many attempts in a row may fail to start with
// the same error (an image that cannot be pulled, the same engine message)
// before retry gives up and the run fails failed_to_start, whatever its
// retry duration: the same start failure does not pass by itself, and
// without a duration it would be retried for ever. Slurm's nearest is a
// launch failure that requeues the job held; Berth ends it instead, so an
// attached apply returns.
const MaxStartFailures = 5

// startErrorLen bounds the start error kept in a run's history.
const startErrorLen = 300

// retry decides, for a run whose jobs have all ended, whether its policy
// starts it again; if so it makes d a requeue with the history updated.
// Attempts after a failure wait a little longer each time (1 s, doubling,
// at most a minute), so a command that fails at once does not spin.
func retry(r Run, js []Job, d *Decision, now time.Time) bool {
	p := r.Retry
	if p == nil || !d.Stop.Retriable() {
		return false
	}
	// The run's event and reason: its first failing job's (not a sibling
	// the server stopped because of it).
	event, reason, msg := "", ReasonNone, ""
	for _, j := range js {
		if e := RetryEvent(j.Status, j.Reason); e != "" && j.Reason != ReasonByServer {
			event, reason, msg = e, j.Reason, j.Message
			break
		}
	}
	if event == "" || !slices.Contains(p.OnEvents, event) {
		return false
	}
	h := r.Retries
	if reason == ReasonFailedToStart {
		if len(msg) > startErrorLen {
			msg = msg[:startErrorLen]
		}
		if h.StartFailures > 0 && msg == h.StartError {
			h.StartFailures++
		} else {
			h.StartFailures, h.StartError = 1, msg
		}
		if h.StartFailures >= MaxStartFailures {
			why := fmt.Sprintf("failed to start %d times in a row with the same error: not retried again", h.StartFailures)
			if msg != "" {
				why += " (" + msg + ")"
			}
			d.note(Note{Job: -1, Type: "failed", Message: why})
			return false
		}
	} else {
		h.StartFailures, h.StartError = 0, ""
	}
	h.LastFailure, h.Event, h.Reason = now, event, reason
	h.Retries++
	h.NotBefore = now.Add(min(time.Second<<min(h.Retries-1, 6), time.Minute))
	requeue(js, d)
	d.Retried, d.Retries = true, h
	d.note(Note{Job: -1, Type: "requeued", Message: fmt.Sprintf("retry after %s (%s): attempt %d", event, reason, d.Attempt)})
	return true
}

// NoCapacity decides for a waiting run that no node could ever hold whether
// it fails now (its policy does not retry on no-capacity, or the retry
// duration has passed since its submission) or, when it keeps waiting,
// when to look again (zero: no deadline). A run without a retry policy
// waits, as in Slurm's queue.
func NoCapacity(r Run, now time.Time) (fail bool, lookAgain time.Time) {
	p := r.Retry
	if p == nil {
		return false, time.Time{}
	}
	if slices.Contains(p.OnEvents, "no-capacity") {
		if p.Duration == 0 {
			return false, time.Time{}
		}
		if deadline := r.SubmittedAt.Add(p.Duration); !now.After(deadline) {
			return false, deadline.Add(time.Millisecond)
		}
	}
	return true, time.Time{}
}

// RetryExpired decides for a retried run still waiting whether its retry
// duration has passed since its last failure (dstack: the duration counts
// from the last event): then it fails, for that failure's reason; else it
// says when to look again (zero: never).
func RetryExpired(r Run, now time.Time) (expired bool, reason Reason, lookAgain time.Time) {
	p, h := r.Retry, r.Retries
	if p == nil || p.Duration == 0 || h.LastFailure.IsZero() {
		return false, ReasonNone, time.Time{}
	}
	deadline := h.LastFailure.Add(p.Duration)
	if !now.After(deadline) {
		return false, ReasonNone, deadline.Add(time.Millisecond)
	}
	reason = h.Reason
	if reason == ReasonNone {
		reason = ReasonExitedWithError
	}
	return true, reason, time.Time{}
}
