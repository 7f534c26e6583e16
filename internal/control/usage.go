package control

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
)

// Accounting. A job's usage (api.JobUsage) is what it held, its fleet and
// its billing per second under the fleet's TRESBillingWeights, taken when
// it ends and stored with it, so that a later change of weights does not
// rewrite history (Slurm too fixes a job's billing when it starts).
//
// Fairshare weighs each project's and user's recent use in billing-seconds
// (CPU-seconds where no weights are set, Slurm's default), which lose half
// their weight every half-life (Slurm's PriorityDecayHalfLife). The
// scheduler's Cycle keeps the sums and their decay (sched/usage.go),
// rebuilt from finished jobs at start.

// restoreUsage adds the jobs that ended within ten half-lives.
func (s *Cluster) restoreUsage(l *Loaded) {
	for _, r := range l.Usage {
		acct := sched.Account{Project: l.Projects[r.ProjectID], User: l.Users[r.UserID]}
		var u api.JobUsage
		if len(r.Usage) > 0 && json.Unmarshal(r.Usage, &u) == nil {
			s.chargeUsage(acct, u.Billing*r.FinishedAt.Sub(r.StartedAt).Seconds(), r.FinishedAt)
			continue
		}
		var a api.Alloc // a job that ended before usage was kept: its CPUs
		if json.Unmarshal(r.Alloc, &a) != nil {
			continue
		}
		s.chargeUsage(acct, float64(a.CPUs)*r.FinishedAt.Sub(r.StartedAt).Seconds(), r.FinishedAt)
	}
}

// chargeUsage adds a job's billing-seconds, ended at end, decayed from then on.
func (s *Cluster) chargeUsage(acct sched.Account, billingSeconds float64, end time.Time) {
	if !(billingSeconds > 0) {
		return
	}
	s.cycle.AddUsage(acct, billingSeconds, end)
	s.cycDirty = true
}

// jobUsage is what js counts for, run from its start to end.
func (s *Cluster) jobUsage(js *jobState, end time.Time) api.JobUsage {
	u := api.JobUsage{CPUs: js.alloc.CPUs, Memory: js.alloc.Memory, GPUs: len(js.alloc.GPUs)}
	if !js.rec.StartedAt.IsZero() && end.After(js.rec.StartedAt) {
		u.Seconds = end.Sub(js.rec.StartedAt).Seconds()
	}
	if ns, ok := s.nodes[js.rec.Node]; ok {
		u.Fleet = ns.info.Fleet
		for _, idx := range js.alloc.GPUs {
			for _, g := range ns.info.GPUs {
				if g.Index != idx {
					continue
				}
				if u.GPUTypes == nil {
					u.GPUTypes = map[string]int{}
				}
				for _, w := range modelWords(g.Name) {
					u.GPUTypes[w]++
				}
			}
		}
	}
	u.Billing = s.rules.Load().BillingFor(u.Fleet).Billing(policy.Alloc{CPUs: u.CPUs, Memory: u.Memory, GPUs: u.GPUs, GPUTypes: u.GPUTypes})
	return u
}

// modelWords are the lower-case words of a device name, each once
// ("NVIDIA A100-SXM4-80GB": nvidia, a100, sxm4, 80gb), as the scheduler's
// limits count GPU types.
func modelWords(name string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == ' ' || r == '-' || r == '_' }) {
		dup := false
		for _, o := range out {
			dup = dup || o == w
		}
		if !dup {
			out = append(out, w)
		}
	}
	return out
}

// AccountedJob is a running job's usage so far, and whose it is.
type AccountedJob struct {
	RunID, JobID  int64
	Project, User string
	Started       time.Time
	Usage         api.JobUsage
}

// RunningUsage is every running job's usage up to now, by job ID.
func (s *Cluster) RunningUsage(now time.Time) []AccountedJob {
	var out []AccountedJob
	for _, js := range s.jobs {
		if js.rec.StartedAt.IsZero() || js.rec.Node == "" {
			continue
		}
		out = append(out, AccountedJob{RunID: js.rec.RunID, JobID: js.rec.ID, Project: js.run.project, User: js.run.user,
			Started: js.rec.StartedAt, Usage: s.jobUsage(js, now)})
	}
	return out
}

// ShareTree is the fairshare tree at now, as a pass weighs it (sshare).
func (s *Cluster) ShareTree(now time.Time) []sched.ShareRow {
	var waiting []sched.Account
	seen := map[sched.Account]bool{}
	for _, rs := range s.pending {
		a := sched.Account{Project: rs.project, User: rs.user}
		if !seen[a] {
			seen[a] = true
			waiting = append(waiting, a)
		}
	}
	return sched.ShareTree(s.cycle.Usage(now), s.rules.Load().Shares, waiting)
}
