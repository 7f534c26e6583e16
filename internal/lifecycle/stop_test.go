package lifecycle

import "testing"

// An OOM kill fails a job whatever its exit code; a stop, an abort or the
// time limit still read as such; a job the server stopped for a sibling
// reads as that.
func TestJobEnd(t *testing.T) {
	tests := map[string]struct {
		exit      Exit
		cause     StopCause
		bySibling bool
		status    Status
		reason    Reason
	}{
		"exit 0":               {Exit{}, StopNone, false, StatusDone, ReasonDone},
		"exit 1":               {Exit{Code: 1}, StopNone, false, StatusFailed, ReasonExitedWithError},
		"oom killed":           {Exit{Code: 137, OOMKilled: true}, StopNone, false, StatusFailed, ReasonOOM},
		"oom, exit 0 anyway":   {Exit{OOMKilled: true}, StopNone, false, StatusFailed, ReasonOOM},
		"oom by the shim":      {Exit{Reason: "OOM"}, StopNone, false, StatusFailed, ReasonOOM},
		"stopped by user, oom": {Exit{Code: 137, Reason: "stopped", OOMKilled: true}, StopUser, false, StatusTerminated, ReasonTerminatedByUser},
		"time limit, oom":      {Exit{Code: 143, Reason: "max_duration", OOMKilled: true}, StopNone, false, StatusTerminated, ReasonMaxDuration},
		"stopped, no request":  {Exit{Reason: "stopped"}, StopNone, false, StatusTerminated, ReasonTerminatedByAgent},
		"stopped for requeue":  {Exit{Reason: "stopped"}, StopRequeue, false, StatusTerminated, ReasonRequeued},
		"preempted, requeue":   {Exit{Reason: "stopped"}, StopPreemptRequeue, false, StatusTerminated, ReasonPreempted},
		"preempted, cancel":    {Exit{Reason: "stopped"}, StopPreemptCancel, false, StatusTerminated, ReasonPreempted},
		"stopped for sibling":  {Exit{Reason: "stopped"}, StopNone, true, StatusTerminated, ReasonByServer},
		"utilization policy":   {Exit{Reason: "stopped"}, StopUtilization, false, StatusTerminated, ReasonUtilizationPolicy},
		"aborted":              {Exit{Reason: "aborted"}, StopAbort, false, StatusAborted, ReasonAbortedByUser},
		"start failed":         {Exit{Reason: "start_failed", Code: 127}, StopNone, false, StatusFailed, ReasonFailedToStart},
		"lost by agent":        {Exit{Reason: "lost_by_agent"}, StopNone, false, StatusFailed, ReasonLostByAgent},
		"sibling exits itself": {Exit{Code: 2}, StopNone, true, StatusFailed, ReasonExitedWithError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st, reason := JobEnd(tc.exit, tc.cause, tc.bySibling)
			if st != tc.status || reason != tc.reason {
				t.Errorf("JobEnd = %s %s, want %s %s", st, reason, tc.status, tc.reason)
			}
		})
	}
}

// Which request wins: every pair of the current cause and a new request.
func TestStopRequest(t *testing.T) {
	causes := []StopCause{StopNone, StopUser, StopAbort, StopPreemptRequeue, StopPreemptCancel, StopRequeue, StopUtilization}
	// want[cur][next]: the cause after the request.
	want := map[StopCause][7]StopCause{
		StopNone:           {StopNone, StopUser, StopAbort, StopPreemptRequeue, StopPreemptCancel, StopRequeue, StopUtilization},
		StopUser:           {StopUser, StopUser, StopAbort, StopUser, StopUser, StopUser, StopUser},
		StopAbort:          {StopAbort, StopAbort, StopAbort, StopAbort, StopAbort, StopAbort, StopAbort},
		StopPreemptRequeue: {StopPreemptRequeue, StopUser, StopAbort, StopPreemptRequeue, StopPreemptRequeue, StopRequeue, StopPreemptRequeue},
		StopPreemptCancel:  {StopPreemptCancel, StopUser, StopAbort, StopPreemptCancel, StopPreemptCancel, StopRequeue, StopPreemptCancel},
		StopRequeue:        {StopRequeue, StopUser, StopAbort, StopRequeue, StopRequeue, StopRequeue, StopRequeue},
		StopUtilization:    {StopUtilization, StopUser, StopAbort, StopUtilization, StopUtilization, StopUtilization, StopUtilization},
	}
	for _, cur := range causes {
		for k, next := range causes {
			got, _ := request(cur, next)
			if got != want[cur][k] {
				t.Errorf("request(%s, %s) = %s, want %s", cur, next, got, want[cur][k])
			}
		}
	}
}

// Every final status and reason has its end (internal/slurmconv's
// TestJobState renders them as Slurm's state and reason).
func TestEndOf(t *testing.T) {
	tests := []struct {
		st  Status
		r   Reason
		end End
	}{
		{StatusSubmitted, ReasonNone, EndNone},
		{StatusSubmitted, ReasonPriority, EndNone},
		{StatusSubmitted, "QOSMaxGRESPerUser", EndNone},
		{StatusRunning, ReasonNone, EndNone},
		{StatusTerminating, ReasonNone, EndNone},
		{StatusDone, ReasonDone, EndCompleted},
		{StatusFailed, ReasonExitedWithError, EndFailed},
		{StatusFailed, ReasonFailedToStart, EndFailed},
		{StatusFailed, ReasonNoCapacity, EndFailed},
		{StatusFailed, ReasonOOM, EndOutOfMemory},
		{StatusFailed, ReasonUnreachable, EndNodeFail},
		{StatusFailed, ReasonLostByAgent, EndNodeFail},
		{StatusTerminated, ReasonMaxDuration, EndTimeout},
		{StatusTerminated, ReasonPreempted, EndPreempted},
		{StatusTerminated, ReasonTerminatedByUser, EndCancelled},
		{StatusTerminated, ReasonDependencyNever, EndCancelled},
		{StatusAborted, ReasonAbortedByUser, EndCancelled},
	}
	for _, tc := range tests {
		if got := EndOf(tc.st, tc.r); got != tc.end {
			t.Errorf("EndOf(%s, %s) = %d, want %d", tc.st, tc.r, got, tc.end)
		}
	}
}

func TestArrayEnd(t *testing.T) {
	tests := []struct {
		stopped, cancelled bool
		failed             int
		status             Status
		reason             Reason
	}{
		{false, false, 0, StatusDone, ReasonDone},
		{false, false, 2, StatusFailed, ReasonExitedWithError},
		{true, false, 0, StatusTerminated, ReasonTerminatedByUser},
		{true, false, 3, StatusTerminated, ReasonTerminatedByUser},
		{false, true, 0, StatusTerminated, ReasonTerminatedByUser},
		{false, true, 1, StatusFailed, ReasonExitedWithError},
	}
	for _, tc := range tests {
		if st, r := ArrayEnd(tc.stopped, tc.cancelled, tc.failed); st != tc.status || r != tc.reason {
			t.Errorf("ArrayEnd(%v, %v, %d) = %s %s, want %s %s", tc.stopped, tc.cancelled, tc.failed, st, r, tc.status, tc.reason)
		}
	}
}
