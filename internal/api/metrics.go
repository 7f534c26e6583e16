package api

import "time"

// JobSample is one measurement of a running job's use of its node, taken
// by the node's agent every few seconds.
type JobSample struct {
	JobID int64     `json:"job_id,omitempty"` // in AgentMetrics; implied elsewhere
	Time  time.Time `json:"time"`
	// CPUPercent is the CPU time the job used since the previous sample, as
	// a percentage of its allocated CPUs (100: all of them busy; more is
	// possible where no quota holds the job). Absent where not measured:
	// the first sample of a job, a node without CPU accounting.
	CPUPercent *float64 `json:"cpu_percent,omitempty"`
	// CPUSeconds is the CPU time used since the job started.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// MemoryUsed is the job's working set in bytes (charged memory less
	// inactive page cache), MemoryUsage all that its cgroup is charged
	// (page cache included), MemoryPeak the most charged so far, and
	// MemoryLimit its limit (the cgroup's, else the allocation; 0 none).
	// Absent without cgroups.
	MemoryUsed  int64       `json:"memory_used,omitempty"`
	MemoryUsage int64       `json:"memory_usage,omitempty"`
	MemoryPeak  int64       `json:"memory_peak,omitempty"`
	MemoryLimit int64       `json:"memory_limit,omitempty"`
	GPUs        []GPUSample `json:"gpus,omitempty"`
}

// GPUSample is one of the job's GPUs, as nvidia-smi reports it. A GPU is
// allocated to one job at a time, so the device's figures are the job's.
type GPUSample struct {
	Index       int     `json:"index"`
	UUID        string  `json:"uuid,omitempty"`
	Util        float64 `json:"util"`         // percent of the last sampling period the GPU was busy
	MemoryUsed  int64   `json:"memory_used"`  // bytes
	MemoryTotal int64   `json:"memory_total"` // bytes
}

// AgentMetrics is a node's batch of samples (POST /agent/metrics).
type AgentMetrics struct {
	Node    string      `json:"node"`
	Samples []JobSample `json:"samples"`
}

// RunMetrics answers GET /runs/{ref}/metrics: for each job that was
// sampled, or is running, the latest sample and the history the server
// keeps (oldest first).
type RunMetrics struct {
	RunID  int64        `json:"run_id"`
	Name   string       `json:"name"`
	Status Status       `json:"status"`
	Jobs   []JobMetrics `json:"jobs"`
}

// JobMetrics is one job's samples.
type JobMetrics struct {
	JobID   int64       `json:"job_id"`
	JobNum  int         `json:"job_num"`
	Attempt int         `json:"attempt"`
	Node    string      `json:"node,omitempty"`
	Status  Status      `json:"status"`
	Alloc   Alloc       `json:"alloc"`
	Latest  *JobSample  `json:"latest,omitempty"`
	History []JobSample `json:"history,omitempty"`
}

// Node health levels, as dstack shows them (`idle (warning)`).
const (
	HealthOK      = "ok"
	HealthWarning = "warning" // usable: e.g. correctable ECC errors, a hot GPU
	HealthFailure = "failure" // drained until it passes again
)

// NodeHealth is the outcome of a node's last health check: its agent's
// health-check program and, where nvidia-smi runs, its GPUs.
type NodeHealth struct {
	Status    string    `json:"status"`           // ok, warning, failure
	Reason    string    `json:"reason,omitempty"` // the program's last line of output, or what the GPU check found
	CheckedAt time.Time `json:"checked_at"`
}

// AgentHealth is a node's health report (POST /agent/health).
type AgentHealth struct {
	Node   string     `json:"node"`
	Health NodeHealth `json:"health"`
}

// NodeDrain is an administrator's drain of a node: it gets no new jobs;
// those running go on.
type NodeDrain struct {
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	Since  time.Time `json:"since"`
	// Down: the administrator set the node DOWN (Slurm's scontrol update
	// State=DOWN) rather than draining it; it gets no new jobs either.
	Down bool `json:"down,omitempty"`
}

// DrainRequest drains a node (POST /nodes/{name}/drain); Down sets it
// down instead (shown DOWN, as after scontrol update State=DOWN).
type DrainRequest struct {
	Reason string `json:"reason"`
	Down   bool   `json:"down,omitempty"`
}
