package slurmconv

import (
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/slurm"
)

// JobState is the one mapping of a run's lifecycle onto Slurm's: the job
// state and the reason code squeue, scontrol and sacct show for a run in
// status st for reason r.
//
//   - waiting (submitted, scheduled): PENDING, with the run's own reason,
//     which is already one of Slurm's codes (None when it has none;
//     provisioning nodes reads as Resources);
//   - provisioning, pulling: RUNNING+CONFIGURING (squeue's CF; sacct
//     prints base states only);
//   - running: RUNNING; terminating: RUNNING+COMPLETING; reason None;
//   - ended: lifecycle's end (EndOf) as Slurm's final state, with the
//     reason Slurm gives it (NonZeroExitCode, JobLaunchFailure, TimeLimit,
//     OutOfMemory, NodeDown, Preempted, DependencyNeverSatisfied, None).
//
// A status Berth does not know reads as waiting.
func JobState(st api.Status, r lifecycle.Reason) (slurm.JobState, string) {
	switch st {
	case api.StatusSubmitted, api.StatusScheduled:
		return slurm.JobPending, waitingReason(r)
	case api.StatusProvisioning, api.StatusPulling:
		return slurm.JobRunning | slurm.JobConfiguring, "None"
	case api.StatusRunning:
		return slurm.JobRunning, "None"
	case api.StatusTerminating:
		return slurm.JobRunning | slurm.JobCompleting, "None"
	}
	end := lifecycle.EndOf(st, r)
	if end == lifecycle.EndNone {
		return slurm.JobPending, waitingReason(r)
	}
	return endStates[end], endReason(end, r)
}

// State is the Slurm job state of run r (JobState's first half).
func State(r *api.Run) slurm.JobState {
	st, _ := JobState(r.Status, lifecycle.Reason(r.Reason))
	return st
}

// endStates are Slurm's job states of lifecycle's ends.
var endStates = map[lifecycle.End]slurm.JobState{
	lifecycle.EndCompleted: slurm.JobCompleted, lifecycle.EndFailed: slurm.JobFailed,
	lifecycle.EndCancelled: slurm.JobCancelled, lifecycle.EndTimeout: slurm.JobTimeout, lifecycle.EndOutOfMemory: slurm.JobOutOfMemory,
	lifecycle.EndNodeFail: slurm.JobNodeFail, lifecycle.EndPreempted: slurm.JobPreempted,
}

// waitingReason is a waiting run's reason code: its own (the scheduler's
// reasons are Slurm's codes), None when it has none.
func waitingReason(r lifecycle.Reason) string {
	switch r {
	case lifecycle.ReasonNone:
		return "None"
	case lifecycle.ReasonProvisioningNodes:
		return string(lifecycle.ReasonResources)
	}
	return string(r)
}

// endReason is the reason Slurm gives an ended job's state.
func endReason(end lifecycle.End, r lifecycle.Reason) string {
	switch end {
	case lifecycle.EndFailed:
		switch r {
		case lifecycle.ReasonFailedToStart:
			return "JobLaunchFailure"
		case lifecycle.ReasonDependencyNever:
			return string(lifecycle.ReasonDependencyNever)
		}
		return "NonZeroExitCode"
	case lifecycle.EndTimeout:
		return "TimeLimit"
	case lifecycle.EndOutOfMemory:
		return "OutOfMemory"
	case lifecycle.EndPreempted:
		return "Preempted"
	case lifecycle.EndNodeFail:
		return "NodeDown"
	case lifecycle.EndCancelled:
		if r == lifecycle.ReasonDependencyNever {
			return string(lifecycle.ReasonDependencyNever)
		}
	}
	return "None"
}

// ExitCode is Slurm's ExitCode "code:signal" of a run in state st: the
// exit status of the script, or the signal that ended it (a status above
// 128 is a signal, as the shell reports it; a cancelled job that ran ended
// by SIGTERM, an aborted one by SIGKILL; an OOM kill shows 0:125 as in
// Slurm).
func ExitCode(r *api.Run, st slurm.JobState) (code, sig int) {
	started := r.StartedAt != nil
	switch st.Base() {
	case slurm.JobCancelled, slurm.JobTimeout, slurm.JobPreempted:
		if !started {
			return 0, 0
		}
		if r.Status == api.StatusAborted {
			return 0, 9
		}
		return 0, 15
	case slurm.JobOutOfMemory:
		return 0, 125
	}
	if r.ExitCode == nil || *r.ExitCode < 0 {
		if st.Base() == slurm.JobFailed || st.Base() == slurm.JobNodeFail {
			return 1, 0
		}
		return 0, 0
	}
	c := *r.ExitCode
	if c > 128 && c < 128+65 {
		return 0, c - 128
	}
	return c, 0
}
