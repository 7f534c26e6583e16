package slurm

import "strings"

// JobState is a job state in Slurm's own encoding: a base state in the low
// byte, possibly with flag states (COMPLETING, CONFIGURING, REQUEUED...)
// above it, which Slurm prints instead of the base.
type JobState uint32

// Base job states.
const (
	JobPending JobState = iota
	JobRunning
	JobSuspended
	JobCompleted
	JobCancelled
	JobFailed
	JobTimeout
	JobNodeFail
	JobPreempted
	JobBootFail
	JobDeadline
	JobOutOfMemory
)

// Flag states, combined with a base state (JobRunning|JobCompleting).
const (
	JobRequeueFlag     JobState = 1 << 10 // REQUEUED
	JobRequeueHold     JobState = 1 << 11 // REQUEUE_HOLD
	JobSpecialExit     JobState = 1 << 12 // SPECIAL_EXIT
	JobResizing        JobState = 1 << 13 // RESIZING
	JobConfiguring     JobState = 1 << 14 // CONFIGURING (nodes booting)
	JobCompleting      JobState = 1 << 15 // COMPLETING (epilog running)
	JobStopped         JobState = 1 << 16 // STOPPED
	JobRevoked         JobState = 1 << 19 // REVOKED
	JobRequeueFed      JobState = 1 << 20 // REQUEUE_FED
	JobResvDelHold     JobState = 1 << 21 // RESV_DEL_HOLD
	JobSignaling       JobState = 1 << 22 // SIGNALING
	JobStageOut        JobState = 1 << 23 // STAGE_OUT
	jobStateBase                = 0xff
	jobStateFlagsShown          = JobCompleting | JobStageOut | JobConfiguring | JobResizing | JobRequeueFlag |
		JobRequeueFed | JobRequeueHold | JobSpecialExit | JobStopped | JobRevoked | JobResvDelHold | JobSignaling
)

var stateNames = []struct {
	state         JobState
	long, compact string
}{
	// Flags first, in the order job_state_string tests them.
	{JobCompleting, "COMPLETING", "CG"},
	{JobStageOut, "STAGE_OUT", "SO"},
	{JobConfiguring, "CONFIGURING", "CF"},
	{JobResizing, "RESIZING", "RS"},
	{JobRequeueFlag, "REQUEUED", "RQ"},
	{JobRequeueFed, "REQUEUE_FED", "RF"},
	{JobRequeueHold, "REQUEUE_HOLD", "RH"},
	{JobSpecialExit, "SPECIAL_EXIT", "SE"},
	{JobStopped, "STOPPED", "ST"},
	{JobRevoked, "REVOKED", "RV"},
	{JobResvDelHold, "RESV_DEL_HOLD", "RD"},
	{JobSignaling, "SIGNALING", "SI"},
}

var baseNames = []struct{ long, compact string }{
	{"PENDING", "PD"}, {"RUNNING", "R"}, {"SUSPENDED", "S"}, {"COMPLETED", "CD"},
	{"CANCELLED", "CA"}, {"FAILED", "F"}, {"TIMEOUT", "TO"}, {"NODE_FAIL", "NF"},
	{"PREEMPTED", "PR"}, {"BOOT_FAIL", "BF"}, {"DEADLINE", "DL"}, {"OUT_OF_MEMORY", "OOM"},
}

// Base is the state without flags.
func (s JobState) Base() JobState { return s & jobStateBase }

// String is the state as squeue's %T, scontrol's JobState and sacct print
// it: PENDING, RUNNING, COMPLETING, OUT_OF_MEMORY...
func (s JobState) String() string {
	for _, n := range stateNames {
		if s&n.state != 0 {
			return n.long
		}
	}
	if b := int(s.Base()); b < len(baseNames) {
		return baseNames[b].long
	}
	return "?"
}

// Compact is the state as squeue's ST column prints it: PD, R, CG, CD, F,
// CA, TO, OOM, NF, PR...
func (s JobState) Compact() string {
	for _, n := range stateNames {
		if s&n.state != 0 {
			return n.compact
		}
	}
	if b := int(s.Base()); b < len(baseNames) {
		return baseNames[b].compact
	}
	return "?"
}

// Pending, Running... test the base state as Slurm's IS_JOB_* macros do.
func (s JobState) Pending() bool    { return s.Base() == JobPending }
func (s JobState) Running() bool    { return s.Base() == JobRunning }
func (s JobState) Suspended() bool  { return s.Base() == JobSuspended }
func (s JobState) Completing() bool { return s&JobCompleting != 0 }

// Finished reports a job that has ended (any base state after SUSPENDED).
func (s JobState) Finished() bool { return s.Base() > JobSuspended }

// ParseJobState reads a state as squeue -t and sacct -s accept it: a long
// or compact name, any case ("pd", "RUNNING", "oom", "CG").
func ParseJobState(name string) (JobState, bool) {
	for i, n := range baseNames {
		if strings.EqualFold(name, n.long) || strings.EqualFold(name, n.compact) {
			return JobState(i), true
		}
	}
	for _, n := range stateNames {
		if strings.EqualFold(name, n.long) || strings.EqualFold(name, n.compact) {
			return n.state, true
		}
	}
	return 0, false
}

// matches is how squeue's -t filter compares: a flag state matches any job
// with that flag, a base state only a job in exactly that state.
func (s JobState) matches(job JobState) bool {
	if s&^jobStateBase != 0 {
		return job&s != 0
	}
	return job&jobStateFlagsShown == 0 && job.Base() == s
}

// Common reasons a job waits or ended, spelt as Slurm's job_reason_string.
const (
	ReasonNone                     = "None"
	ReasonPriority                 = "Priority"
	ReasonResources                = "Resources"
	ReasonDependency               = "Dependency"
	ReasonDependencyNeverSatisfied = "DependencyNeverSatisfied"
	ReasonBeginTime                = "BeginTime"
	ReasonJobHeldUser              = "JobHeldUser"
	ReasonJobHeldAdmin             = "JobHeldAdmin"
	ReasonJobArrayTaskLimit        = "JobArrayTaskLimit"
	ReasonPartitionConfig          = "PartitionConfig"
	ReasonPartitionDown            = "PartitionDown"
	ReasonPartitionTimeLimit       = "PartitionTimeLimit"
	ReasonQOSMaxGRESPerUser        = "QOSMaxGRESPerUser"
	ReasonQOSMaxJobsPerUserLimit   = "QOSMaxJobsPerUserLimit"
	ReasonAssocMaxJobsLimit        = "AssocMaxJobsLimit"
	ReasonReqNodeNotAvail          = "ReqNodeNotAvail"
	ReasonNodeDown                 = "NodeDown"
	ReasonBadConstraints           = "BadConstraints"
	ReasonNonZeroExitCode          = "NonZeroExitCode"
	ReasonTimeLimit                = "TimeLimit"
	ReasonOutOfMemory              = "OutOfMemory"
	ReasonRaisedSignal             = "RaisedSignal"
	ReasonPreempted                = "Preempted"
	ReasonJobLaunchFailure         = "JobLaunchFailure"
)
