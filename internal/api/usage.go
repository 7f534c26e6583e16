package api

import "time"

// JobUsage is what a job counts for in accounting: what it held, for how
// long, and its billing (Slurm's billing TRES: its TRESBillingWeights
// applied to what it held, per second). Computed when the job ends and
// stored with it; for a running job, up to the time it is read.
type JobUsage struct {
	Fleet   string  `json:"fleet,omitempty"`
	Seconds float64 `json:"seconds"`
	CPUs    int     `json:"cpus"`
	Memory  int64   `json:"memory"` // bytes
	GPUs    int     `json:"gpus,omitempty"`
	// GPUTypes counts its GPUs by model word, lower case ("a100").
	GPUTypes map[string]int `json:"gpu_types,omitempty"`
	// Billing is its billing units per second.
	Billing float64 `json:"billing"`
}

// TRESSeconds are the usage by Slurm's TRES names: cpu (CPU-seconds), mem
// (MB-seconds), gres/gpu and gres/gpu:TYPE (GPU-seconds), billing.
func (u *JobUsage) TRESSeconds() map[string]float64 {
	out := map[string]float64{"cpu": float64(u.CPUs) * u.Seconds, "mem": float64(u.Memory) / (1 << 20) * u.Seconds,
		"billing": u.Billing * u.Seconds}
	if u.GPUs > 0 {
		out["gres/gpu"] = float64(u.GPUs) * u.Seconds
	}
	for t, n := range u.GPUTypes {
		out["gres/gpu:"+t] = float64(n) * u.Seconds
	}
	return out
}

// UsageRow is one project's, or one user's in a project, usage over a
// window (GET /usage): a job counts for the part of its run inside it.
type UsageRow struct {
	Project string `json:"project"`
	User    string `json:"user,omitempty"` // empty: the project's total
	Runs    int    `json:"runs"`
	Jobs    int    `json:"jobs"`
	// TRESSeconds are summed by TRES name (cpu, mem in MB-seconds,
	// gres/gpu, gres/gpu:TYPE, billing).
	TRESSeconds map[string]float64 `json:"tres_seconds"`
}

// UsageReport is GET /usage's answer: the rows the caller may see, the
// projects' totals first, sorted by project then user.
type UsageReport struct {
	Since time.Time  `json:"since"`
	Until time.Time  `json:"until"`
	Rows  []UsageRow `json:"rows"`
	// Capacity is the cluster's TRES-seconds over the window (its nodes'
	// CPUs and GPUs as registered now, times the window): sreport's
	// percentages.
	Capacity map[string]float64 `json:"capacity,omitempty"`
}

// ShareRow is one line of the fairshare tree (GET /fairshare): the root,
// a project, or a user within one (sshare).
type ShareRow struct {
	Project   string  `json:"project"` // empty: root
	User      string  `json:"user,omitempty"`
	RawShares int     `json:"raw_shares"`
	NormShare float64 `json:"norm_shares"`
	// RawUsage is the decayed usage in billing-seconds (Slurm's RawUsage).
	RawUsage  float64 `json:"raw_usage"`
	NormUsage float64 `json:"norm_usage"` // RawUsage over the root's
	EffUsage  float64 `json:"effective_usage"`
	FairShare float64 `json:"fairshare"`
}
