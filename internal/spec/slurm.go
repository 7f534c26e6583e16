package spec

// Slurm is the Slurm part of a run submitted through Berth's Slurm
// commands (sbatch, srun, salloc): what they were asked that Berth's own
// fields do not hold, as typed data. The Slurm commands show it (squeue,
// scontrol, sacct) and, for a batch job, the server applies it when it
// places the job: the job's Slurm environment (slurm.BatchEnvironment) and
// its output files (slurm.ExpandFilename), as slurmd does. What Berth's
// fields already say (the partitions as `fleets`, --qos, --nice,
// --array, --dependency as `depends_on`, --time as `max_duration`,
// --signal as `signal`, the resources) stays there.
//
// It is never written in YAML: a configuration file has no `slurm:`; the
// API takes it in a run's JSON spec. Runs stored before it existed carry
// the same facts as "slurm.*" string tags (`tags`), which the Slurm
// commands still read.
type Slurm struct {
	Tool    string `json:"tool"`               // sbatch, srun or salloc
	JobName string `json:"job_name,omitempty"` // as given (run names are stricter)

	// Who submitted it, from where (the submitter's Unix identity).
	User       string `json:"user,omitempty"`
	Group      string `json:"group,omitempty"`
	UID        int    `json:"uid"`
	GID        int    `json:"gid"`
	SubmitHost string `json:"submit_host,omitempty"`
	SubmitDir  string `json:"submit_dir,omitempty"`

	Account string `json:"account,omitempty"` // -A as given (the run's project is Berth's)
	Comment string `json:"comment,omitempty"`
	// Command is the batch script's path as submitted (absolute); empty
	// for --wrap.
	Command string `json:"command,omitempty"`
	// Output, Error and Input are --output, --error and --input as given:
	// patterns (%j, %A, %a, %x, %u, %N, %n, %t, %%) the server expands at
	// placement. Empty Output is Slurm's default (slurm-%j.out, or
	// slurm-%A_%a.out for an array task); empty Error joins Output; empty
	// Input is /dev/null.
	Output   string `json:"output,omitempty"`
	Error    string `json:"error,omitempty"`
	Input    string `json:"input,omitempty"`
	OpenMode string `json:"open_mode,omitempty"` // "append" or "truncate" (default)

	// The first component's task layout, as sbatch computed it.
	NTasks        int    `json:"ntasks,omitempty"`          // -n (nodes × tasks per node); 0 when neither -n nor --ntasks-per-node was given
	NTasksGiven   int    `json:"ntasks_given,omitempty"`    // -n exactly as given (SLURM_NTASKS); 0 when not given
	NTasksPerNode int    `json:"ntasks_per_node,omitempty"` // tasks per node when NTasks is set (scontrol's NtasksPerN)
	PerNodeGiven  int    `json:"per_node_given,omitempty"`  // --ntasks-per-node as given (SLURM_NTASKS_PER_NODE); 0 when not
	TasksPerNode  int    `json:"tasks_per_node,omitempty"`  // tasks on each node (SLURM_TASKS_PER_NODE)
	CPUsPerTask   int    `json:"cpus_per_task,omitempty"`   // -c as given
	CPUsPerNode   int    `json:"cpus_per_node,omitempty"`   // CPUs each node gets (SLURM_JOB_CPUS_PER_NODE)
	MemPerCPUMB   uint64 `json:"mem_per_cpu_mb,omitempty"`  // --mem-per-cpu, MB
	MemPerNodeMB  uint64 `json:"mem_per_node_mb,omitempty"` // memory per node, MB, when asked (SLURM_MEM_PER_NODE)
	GPUsPerNode   int    `json:"gpus_per_node,omitempty"`
	TresPerNode   string `json:"tres_per_node,omitempty"` // scontrol's TresPerNode
	TresPerJob    string `json:"tres_per_job,omitempty"`

	Constraint string `json:"constraint,omitempty"` // -C as given
	Dependency string `json:"dependency,omitempty"` // --dependency as given
	// Signal is --signal as given; the run's `signal` is what Berth acts
	// on (without a time limit there is none).
	Signal   *SlurmSignal `json:"signal,omitempty"`
	Requeue  *bool        `json:"requeue,omitempty"`  // --requeue / --no-requeue; nil: neither
	Priority string       `json:"priority,omitempty"` // --priority as given ("TOP" or a number)
	// Export is SLURM_EXPORT_ENV: --export when it was not ALL.
	Export string `json:"export,omitempty"`
	Wait   bool   `json:"wait,omitempty"` // -W

	// Script: the run's one command is the batch script itself, which
	// the node runs by its "#!" interpreter with Args, its output in the
	// files Output and Error name (api.BatchScript). Runs stored before
	// carry a bash wrapper that does it as their command instead.
	Script bool     `json:"script,omitempty"`
	Args   []string `json:"args,omitempty"`
	// Links is the submitter's directory of the Slurm-named links to
	// berth, put back on a login shell's PATH ("" none).
	Links string `json:"links,omitempty"`
}

// SlurmSignal is sbatch's --signal=[{R|B}:]SIG[@TIME].
type SlurmSignal struct {
	Number      int      `json:"number"`
	Before      Duration `json:"before"` // seconds before the time limit
	BatchOnly   bool     `json:"batch_only,omitempty"`
	Reservation bool     `json:"reservation,omitempty"`
}
