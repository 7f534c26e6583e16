package sched

import (
	"math"
	"time"
)

// Weights turn the priority factors into one number, as Slurm's
// priority/multifactor does: each factor is in [0, 1] and is multiplied by
// its weight; the weighted factors are summed, and Nice is subtracted.
type Weights struct {
	Age       int64
	Fairshare int64
	Size      int64
	QOS       int64
	Priority  int64 // the run's own priority: 0..100 (dstack's field)
	// MaxAge is the age at which the age factor reaches 1.
	MaxAge time.Duration
	// FavorSmall makes the size factor favour small runs instead of large.
	FavorSmall bool
}

// DefaultWeights rank runs mostly by their own priority and fairshare, with
// age growing to matter as much as a priority of 10 over a week.
var DefaultWeights = Weights{Age: 1000, Fairshare: 10000, Size: 1000, QOS: 10000, Priority: 10000, MaxAge: 7 * 24 * time.Hour}

// Usage is recent resource use, decayed, by user: CPU-seconds (the caller
// decays them with its half-life) against which fairshare is computed.
type Usage map[string]float64

// Factors is one pending run's priority, factor by factor (Slurm's sprio).
type Factors struct {
	Age       float64 `json:"age"`
	Fairshare float64 `json:"fairshare"`
	Size      float64 `json:"size"`
	QOS       float64 `json:"qos"`
	Priority  float64 `json:"priority"`
	Nice      int64   `json:"nice"`
	// Total is the weighted sum minus Nice: the order runs are considered in.
	Total int64 `json:"total"`
}

// Priorities computes every pending run's factors under the snapshot's
// weights. Fairshare follows Slurm's classic formula, 2^(-usage/shares),
// with usage the user's share of all recent usage and shares split equally
// among the users that have used or are asking for resources.
func Priorities(s Snapshot, now time.Time) map[int64]Factors {
	w := s.Weights
	if w == nil {
		w = &DefaultWeights
	}
	totalCPUs := 0
	for _, n := range s.Nodes {
		totalCPUs += n.CPUs
	}
	var used float64
	users := map[string]bool{}
	for u, v := range s.Usage {
		used += v
		users[u] = true
	}
	maxQOS := 0
	for _, p := range s.Pending {
		users[p.User] = true
		maxQOS = max(maxQOS, p.QOSPriority)
	}
	shares := 1 / float64(max(len(users), 1))
	out := make(map[int64]Factors, len(s.Pending))
	for _, p := range s.Pending {
		var f Factors
		if w.MaxAge > 0 {
			f.Age = min(float64(now.Sub(p.SubmittedAt))/float64(w.MaxAge), 1)
			f.Age = max(f.Age, 0)
		}
		f.Fairshare = 1
		if used > 0 {
			f.Fairshare = math.Pow(2, -(s.Usage[p.User]/used)/shares)
		}
		if totalCPUs > 0 {
			f.Size = min(float64(p.Request.CPUs*max(p.Nodes, 1))/float64(totalCPUs), 1)
			if w.FavorSmall {
				f.Size = 1 - f.Size
			}
		}
		if maxQOS > 0 {
			f.QOS = float64(p.QOSPriority) / float64(maxQOS)
		}
		f.Priority = float64(p.Priority) / 100
		f.Nice = p.Nice
		f.Total = int64(math.Round(float64(w.Age)*f.Age+float64(w.Fairshare)*f.Fairshare+float64(w.Size)*f.Size+
			float64(w.QOS)*f.QOS+float64(w.Priority)*f.Priority)) - p.Nice
		out[p.RunID] = f
	}
	return out
}
