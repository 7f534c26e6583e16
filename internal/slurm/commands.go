package slurm

import "fmt"

// SubmittedMessage is what sbatch prints on success: "Submitted batch job
// 13", or with --parsable just "13" ("13;cluster" when a cluster is named).
func SubmittedMessage(jobID uint32, parsable bool, cluster string) string {
	switch {
	case parsable && cluster != "":
		return fmt.Sprintf("%d;%s\n", jobID, cluster)
	case parsable:
		return fmt.Sprintf("%d\n", jobID)
	case cluster != "":
		return fmt.Sprintf("Submitted batch job %d on cluster %s\n", jobID, cluster)
	}
	return fmt.Sprintf("Submitted batch job %d\n", jobID)
}

// SubmitFailed is sbatch's report of a submission the controller refused:
// "sbatch: error: Batch job submission failed: <reason>", exit 1. The
// reasons are Slurm's, e.g. "Invalid partition name specified",
// "Requested node configuration is not available", "Invalid account or
// account/partition combination specified", "Job dependency problem".
func SubmitFailed(reason string) *CommandError {
	return &CommandError{Stderr: []string{"sbatch: error: Batch job submission failed: " + reason}, ExitCode: 1}
}

// InvalidPartitionError is sbatch's error for a partition that does not
// exist.
func InvalidPartitionError(name string) *CommandError {
	return &CommandError{Stderr: []string{
		"sbatch: error: invalid partition specified: " + name,
		"sbatch: error: Batch job submission failed: Invalid partition name specified",
	}, ExitCode: 1}
}

// ScancelMessages is what scancel writes to stderr for each job id it was
// given: with -v, "Terminating job N", and for a job it could not cancel
// an error, which without -v only for other reasons than a job unknown or
// already done (scancel.c: _cancel_job_id). failed maps ids to Slurm's
// reason ("Invalid job id specified", "Access/permission denied").
func ScancelMessages(ids []string, verbose bool, failed map[string]string) []string {
	var out []string
	for _, id := range ids {
		if verbose {
			out = append(out, "scancel: Terminating job "+id)
		}
		if reason, ok := failed[id]; ok && (verbose || !quietKillError(reason)) {
			out = append(out, fmt.Sprintf("scancel: error: Kill job error on job id %s: %s", id, reason))
		}
	}
	return out
}

// quietKillError reports the errors scancel prints only with -v, and which
// do not change its exit status when it kills (ESLURM_INVALID_JOB_ID,
// ESLURM_ALREADY_DONE).
func quietKillError(reason string) bool {
	return reason == "Invalid job id specified" || reason == "Job/step already completing or completed"
}

// ScancelExit is scancel's exit status: the highest Slurm error code of
// the jobs it could not cancel, as exit() keeps its low byte; a job
// unknown or already done counts 0. ESLURM_ACCESS_DENIED (2002) exits 210.
func ScancelExit(failed map[string]string) int {
	rc := 0
	for _, reason := range failed {
		switch {
		case quietKillError(reason):
		case reason == "Access/permission denied":
			rc = max(rc, 2002)
		default:
			rc = max(rc, 1)
		}
	}
	return rc & 0xff
}
