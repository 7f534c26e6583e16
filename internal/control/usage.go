package control

import (
	"encoding/json"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"time"
)

// Fairshare weighs each user's recent use: CPU-seconds that lose half their
// weight every half-life (Slurm's PriorityDecayHalfLife). The scheduler's
// Cycle keeps the sums and their decay (sched/usage.go), rebuilt from
// finished jobs at start.

// restoreUsage adds the jobs that ended within ten half-lives.
func (s *Cluster) restoreUsage(l *Loaded) {
	for _, r := range l.Usage {
		var a api.Alloc
		if json.Unmarshal(r.Alloc, &a) != nil {
			continue
		}
		s.addUsage(sched.Account{Project: l.Projects[r.ProjectID], User: l.Users[r.UserID]}, a.CPUs, r.StartedAt, r.FinishedAt)
	}
}

// addUsage adds a job's CPU-seconds, ended at end, decayed from then on.
func (s *Cluster) addUsage(acct sched.Account, cpus int, start, end time.Time) {
	cpuSeconds := float64(cpus) * end.Sub(start).Seconds()
	if cpuSeconds <= 0 {
		return
	}
	s.cycle.AddUsage(acct, cpuSeconds, end)
	s.cycDirty = true
}
