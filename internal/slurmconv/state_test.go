package slurmconv

import (
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
)

// Every status and reason renders as one Slurm state and reason code:
// what squeue (%T, %r), scontrol (JobState=, Reason=) and sacct (State)
// print of it.
func TestJobState(t *testing.T) {
	tests := []struct {
		st            api.Status
		r             lifecycle.Reason
		state, reason string
	}{
		{api.StatusSubmitted, lifecycle.ReasonNone, "PENDING", "None"},
		{api.StatusSubmitted, lifecycle.ReasonPriority, "PENDING", "Priority"},
		{api.StatusSubmitted, "QOSMaxGRESPerUser", "PENDING", "QOSMaxGRESPerUser"},
		{api.StatusSubmitted, lifecycle.ReasonProvisioningNodes, "PENDING", "Resources"},
		{api.StatusScheduled, lifecycle.ReasonDependency, "PENDING", "Dependency"},
		{api.StatusProvisioning, lifecycle.ReasonNone, "CONFIGURING", "None"},
		{api.StatusPulling, lifecycle.ReasonNone, "CONFIGURING", "None"},
		{api.StatusRunning, lifecycle.ReasonNone, "RUNNING", "None"},
		{api.StatusTerminating, lifecycle.ReasonNone, "COMPLETING", "None"},
		{api.StatusDone, lifecycle.ReasonDone, "COMPLETED", "None"},
		{api.StatusFailed, lifecycle.ReasonExitedWithError, "FAILED", "NonZeroExitCode"},
		{api.StatusFailed, lifecycle.ReasonFailedToStart, "FAILED", "JobLaunchFailure"},
		{api.StatusFailed, lifecycle.ReasonNoCapacity, "FAILED", "NonZeroExitCode"},
		{api.StatusFailed, lifecycle.ReasonDependencyNever, "FAILED", "DependencyNeverSatisfied"},
		{api.StatusFailed, lifecycle.ReasonOOM, "OUT_OF_MEMORY", "OutOfMemory"},
		{api.StatusFailed, lifecycle.ReasonUnreachable, "NODE_FAIL", "NodeDown"},
		{api.StatusFailed, lifecycle.ReasonLostByAgent, "NODE_FAIL", "NodeDown"},
		{api.StatusTerminated, lifecycle.ReasonMaxDuration, "TIMEOUT", "TimeLimit"},
		{api.StatusTerminated, lifecycle.ReasonPreempted, "PREEMPTED", "Preempted"},
		{api.StatusTerminated, lifecycle.ReasonTerminatedByUser, "CANCELLED", "None"},
		{api.StatusTerminated, lifecycle.ReasonDependencyNever, "CANCELLED", "DependencyNeverSatisfied"},
		{api.StatusAborted, lifecycle.ReasonAbortedByUser, "CANCELLED", "None"},
		{"", lifecycle.ReasonPriority, "PENDING", "Priority"},
	}
	for _, tc := range tests {
		st, why := JobState(tc.st, tc.r)
		if st.String() != tc.state || why != tc.reason {
			t.Errorf("JobState(%q, %q) = %s, %s; want %s, %s", tc.st, tc.r, st, why, tc.state, tc.reason)
		}
	}
}
