package lifecycle

import "github.com/berth-hq/berth/internal/sched"

// Reason says why a run or a job is in its state. A waiting run's reason is
// one of Slurm's codes (Priority, Resources, …), so the Slurm commands print
// it unchanged; a final one is dstack's word (exited_with_error, …). The
// value is what the store and the API hold; the Slurm front end renders it
// with End (internal/slurmconv: JobState).
type Reason string

// Reasons of waiting runs: Slurm's codes. The scheduler's limit reasons
// (AssocGrpCpuLimit, QOSMaxGRESPerUser, …) arrive as sched's strings and
// are Reasons too.
const (
	ReasonNone Reason = ""
	// The scheduler's own (sched names them: a plan's reasons).
	ReasonPriority  = Reason(sched.ReasonPriority)
	ReasonResources = Reason(sched.ReasonResources)
	ReasonNoNode    = Reason(sched.ReasonNoNode)
	// The server's holds.
	ReasonDependency         Reason = "Dependency"
	ReasonBeginTime          Reason = "BeginTime"
	ReasonHeldUser           Reason = "JobHeldUser"
	ReasonPartitionTimeLimit Reason = "PartitionTimeLimit"
	ReasonPartitionDown      Reason = "PartitionDown"
	// A backend fleet is creating nodes for the run (issue 17; dstack's
	// provisioning). Slurm prints it as Resources, as for a node powering up.
	ReasonProvisioningNodes Reason = "ProvisioningNodes"
)

// Reasons of ends: dstack's words, and Berth's where dstack has none.
const (
	ReasonDone              Reason = "done_by_runner"
	ReasonExitedWithError   Reason = "exited_with_error"
	ReasonTerminatedByUser  Reason = "terminated_by_user"
	ReasonAbortedByUser     Reason = "aborted_by_user"
	ReasonMaxDuration       Reason = "max_duration_exceeded"
	ReasonFailedToStart     Reason = "failed_to_start"
	ReasonLostByAgent       Reason = "lost_by_agent"
	ReasonTerminatedByAgent Reason = "terminated_by_agent"
	// ReasonPreempted ends a run stopped for a higher QOS (mode cancel);
	// one preempted with mode requeue goes back to the queue instead.
	ReasonPreempted Reason = "preempted"
	// ReasonOOM: the job was killed for using more memory than it holds
	// (Slurm's OUT_OF_MEMORY).
	ReasonOOM             Reason = "OOM"
	ReasonUnreachable     Reason = "instance_unreachable"
	ReasonNoCapacity      Reason = "failed_to_start_due_to_no_capacity"
	ReasonByServer        Reason = "terminated_by_server" // a sibling job failed, or the master is done
	ReasonRequeued        Reason = "requeued"             // a job stopped by scontrol requeue
	ReasonDependencyNever Reason = "DependencyNeverSatisfied"
	// ReasonUtilizationPolicy: the run's GPUs stayed under its
	// utilization_policy's min_gpu_utilization for its time_window.
	ReasonUtilizationPolicy Reason = "terminated_due_to_utilization_policy"
	// ReasonRetryLimit ends a service whose replicas kept ending before
	// one was ready (a crash loop): the record of the service's own end
	// (dstack's run termination reason of the same words).
	ReasonRetryLimit Reason = "retry_limit_exceeded"
)

// End is how a final run ended, in the terms every front end renders: one
// of Slurm's base job states, told from a status and a reason in one place.
type End int

// The ends. EndNone is a run that has not ended.
const (
	EndNone End = iota
	EndCompleted
	EndFailed
	EndCancelled
	EndTimeout
	EndOutOfMemory
	EndNodeFail
	EndPreempted
)

// EndOf is how a run in state st for reason r ended (EndNone: it has not).
// A time limit, a preemption, an OOM kill or a lost node reads as such
// whether the run ended failed or terminated.
func EndOf(st Status, r Reason) End {
	switch st {
	case StatusDone:
		return EndCompleted
	case StatusAborted:
		return EndCancelled
	case StatusFailed, StatusTerminated:
		switch r {
		case ReasonOOM:
			return EndOutOfMemory
		case ReasonUnreachable, ReasonLostByAgent:
			return EndNodeFail
		case ReasonMaxDuration:
			return EndTimeout
		case ReasonPreempted:
			return EndPreempted
		}
		if st == StatusFailed {
			return EndFailed
		}
		return EndCancelled
	}
	return EndNone
}

// RetryEvent is the retry event (dstack's on_events) a job's end counts as:
// "error", "interruption", or "" for none.
func RetryEvent(st Status, r Reason) string {
	switch r {
	case ReasonUnreachable, ReasonLostByAgent, ReasonTerminatedByAgent:
		return "interruption"
	case ReasonExitedWithError, ReasonOOM, ReasonFailedToStart:
		return "error"
	}
	if st == StatusFailed {
		return "error"
	}
	return ""
}
