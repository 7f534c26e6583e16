package slurm

import (
	"time"
)

// Job is one job record as squeue and scontrol show it: a job, an array
// task, or a folded record standing for the pending tasks of an array
// (ArrayTasks set). Empty strings print as Slurm prints a missing value
// ("(null)", "N/A" or nothing, depending on the column); zero times as
// "Unknown" or "N/A".
type Job struct {
	JobID         uint32 // the raw id (squeue %A, scontrol JobId)
	ArrayJobID    uint32 // 0 when not in an array
	ArrayTaskID   int    // the task id, when ArrayJobID != 0 and ArrayTasks is nil
	ArrayTasks    []int  // pending task ids a folded array record stands for
	ArrayThrottle int    // %N of --array; 0 for none
	HetJobID      uint32 // 0 when not heterogeneous
	HetJobOffset  uint32

	Name      string
	User      string
	UID, GID  uint32
	Group     string
	Account   string
	Partition string // one name, or the partitions it may run in, comma-separated
	QOS       string
	Priority  uint32
	Nice      int
	Comment   string

	State      JobState
	Reason     string      // "None" for a running job; Resources, Priority... for a pending one
	Dependency *Dependency // nil prints "(null)"

	Submit, Eligible, Accrue time.Time
	Start, End               time.Time // expected start of a pending job; end (expected, for a running job)
	LastSchedEval            time.Time
	SuspendTime              time.Time
	PreSuspend               time.Duration // run time before the last suspension
	TimeLimit                time.Duration // Unlimited; 0 means not set (Partition_Limit)
	TimeMin                  time.Duration

	NumNodes, MaxNodes int
	NumCPUs, MaxCPUs   int
	NumTasks           int // 0 prints N/A
	CPUsPerTask        int // 0 prints N/A
	NTasksPerNode      int // 0 prints *
	MinCPUsNode        int
	MinMemoryMB        uint64 // per CPU when MemPerCPU, else per node
	MemPerCPU          bool
	MinTmpDiskMB       uint64

	NodeList    string // allocated nodes, compressed (CompressHostlist)
	BatchHost   string
	SchedNodes  string
	ReqNodes    string
	ExcNodes    string
	Features    string
	Licenses    string
	Network     string
	TRES        string // as scontrol prints it: "cpu=2,mem=4G,node=1,billing=2,gres/gpu=2"
	TresPerNode string // "gres:gpu:2"
	TresPerJob  string
	TresPerTask string

	WorkDir string
	Command string // the script path; empty for --wrap jobs ("(null)")
	StdIn   string
	StdOut  string // as given (may hold %j...); empty for the default
	StdErr  string

	ExitCode   int // the exit status, ExitCode=code:signal
	ExitSignal int

	BatchFlag     bool // submitted by sbatch
	Requeue       bool
	Restarts      int
	Reboot        bool
	Contiguous    bool
	OverSubscribe string // "OK" (shared), "NO" (--exclusive), "USER", "MCS"
	AllocNode     string
	AllocSID      uint32
	Backfill      bool // last scheduled by the backfill scheduler
	BackfillLast  bool // and tested by it since (Scheduler=Backfill:*)

	KillOnInvalidDep *bool
}

// isArrayTask reports a record for one array task (not folded).
func (j *Job) isArrayTask() bool { return j.ArrayJobID != 0 && j.ArrayTasks == nil }

// runTime is how long the job has run, as scontrol's RunTime and squeue's
// TIME compute it.
func (j *Job) runTime(now time.Time) time.Duration {
	if j.State.Pending() || j.Start.IsZero() {
		return 0
	}
	if j.State.Suspended() {
		return j.PreSuspend
	}
	end := j.End
	if j.State.Running() || end.IsZero() {
		end = now
	}
	if !j.SuspendTime.IsZero() {
		return end.Sub(j.SuspendTime) + j.PreSuspend
	}
	return end.Sub(j.Start)
}
