package control

import (
	"encoding/json"
	"math"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
)

// Fairshare weighs each user's recent use: CPU-seconds that lose half their
// weight every half-life (Slurm's PriorityDecayHalfLife). The server keeps
// the decayed sums in memory, rebuilt from finished jobs at start.

// restoreUsage sums the jobs that ended within ten half-lives, decayed
// to now.
func (s *Cluster) restoreUsage(l *Loaded, now time.Time) {
	s.usageAt = now
	for _, r := range l.Usage {
		var a api.Alloc
		if json.Unmarshal(r.Alloc, &a) != nil {
			continue
		}
		s.addUsage(sched.Account{Project: l.Projects[r.ProjectID], User: l.Users[r.UserID]}, a.CPUs, r.StartedAt, r.FinishedAt)
	}
}

// addUsage adds a job's CPU-seconds, ended at end, decayed to usageAt.
func (s *Cluster) addUsage(acct sched.Account, cpus int, start, end time.Time) {
	cpuSeconds := float64(cpus) * end.Sub(start).Seconds()
	if cpuSeconds <= 0 {
		return
	}
	s.usage[acct] += cpuSeconds * s.decay(s.usageAt.Sub(end))
}

// decay is the weight left after d.
func (s *Cluster) decay(d time.Duration) float64 {
	return math.Pow(2, -float64(d)/float64(s.cfg.HalfLife))
}

// decayTo ages the sums to now.
func (s *Cluster) decayTo(now time.Time) {
	if !now.After(s.usageAt) {
		return
	}
	f := s.decay(now.Sub(s.usageAt))
	for u := range s.usage {
		s.usage[u] *= f
	}
	s.usageAt = now
}

// usageAtLocked decays the sums to now and returns a copy for a snapshot.
func (s *Cluster) usageAtLocked(now time.Time) sched.Usage {
	s.decayTo(now)
	out := make(sched.Usage, len(s.usage))
	for u, v := range s.usage {
		out[u] = v
	}
	return out
}
