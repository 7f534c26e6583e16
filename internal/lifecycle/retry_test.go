package lifecycle

import (
	"strings"
	"testing"
)

// TestRetryGivesUpOnTheSameStartFailure: under retry on error without a
// duration, a run whose attempts fail to start with the same error (an
// image that cannot be pulled) is retried MaxStartFailures-1 times and
// then fails failed_to_start, saying why; a different error starts the
// count again, and an attempt that started (an exit) clears it.
func TestRetryGivesUpOnTheSameStartFailure(t *testing.T) {
	run := Run{Status: StatusRunning, Retry: &RetryPolicy{OnEvents: []string{"error"}}}
	pull := Exit{Reason: "start_failed", Code: -1, Message: "pulling local/nosuch:1: pull access denied"}
	fail := func(e Exit) Decision {
		d := Step(run, jobsOf(StatusProvisioning, 1), Event{Kind: Exited, Job: 0, Exit: e}, t0)
		if d.Retried {
			run.Retries = d.Retries
		}
		return d
	}
	for i := 1; i < MaxStartFailures; i++ {
		if d := fail(pull); !d.Retried || d.Final {
			t.Fatalf("start failure %d: retried %v final %v, want a retry", i, d.Retried, d.Final)
		}
	}
	d := fail(pull)
	if d.Retried || !d.Final || d.Status != StatusFailed || d.Reason != ReasonFailedToStart {
		t.Fatalf("start failure %d: retried %v, final %v %s %s; want failed failed_to_start", MaxStartFailures, d.Retried, d.Final, d.Status, d.Reason)
	}
	if len(d.Notes) == 0 || !strings.Contains(d.Notes[len(d.Notes)-1].Message, "pull access denied") {
		t.Errorf("notes %+v: want the engine's message", d.Notes)
	}

	// Another error: the count starts again.
	run.Retries = Retries{}
	for i := 1; i < MaxStartFailures; i++ {
		fail(pull)
	}
	other := pull
	other.Message = "no space left on device"
	if d := fail(other); !d.Retried || d.Retries.StartFailures != 1 {
		t.Errorf("a different start error: retried %v, count %d; want a retry counted 1", d.Retried, d.Retries.StartFailures)
	}
	// An attempt that started and exited 1: the count is cleared.
	if d := fail(Exit{Code: 1}); !d.Retried || d.Retries.StartFailures != 0 || d.Retries.StartError != "" {
		t.Errorf("an exit after a start failure: retried %v, count %d %q", d.Retried, d.Retries.StartFailures, d.Retries.StartError)
	}
}
