package sched

import (
	"math"
	"slices"
	"strings"
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
	Partition int64 // the tier of the fleets (partitions) a run may use
	Priority  int64 // the run's own priority: 0..100 (dstack's field)
	// Expansion weighs how long a run has waited against its time limit:
	// wait/(wait+limit), 0 for runs without a limit. It is Berth's, not
	// Slurm's: short runs climb fast, long ones slowly but surely, which
	// lowers slowdown without starving anyone (largest expansion factor
	// first, Chiang and Vernon).
	Expansion int64
	// MaxAge is the age at which the age factor reaches 1.
	MaxAge time.Duration
	// FavorSmall makes the size factor favour small runs instead of large.
	FavorSmall bool
}

// DefaultWeights rank runs mostly by their own priority and fairshare, with
// age growing to matter as much as a priority of 10 over a week.
var DefaultWeights = Weights{Age: 1000, Fairshare: 10000, Size: 1000, QOS: 10000, Partition: 1000, Priority: 10000, Expansion: 10000, MaxAge: 7 * 24 * time.Hour}

// Account is who uses resources: a user within a project.
type Account struct {
	Project string
	User    string
}

// Usage is recent resource use, decayed, by account: CPU-seconds (the
// caller decays them with its half-life) against which fairshare is
// computed.
type Usage map[Account]float64

// Shares are the fairshare tree: each project's share of the cluster, and
// each user's share within a project. Unlisted projects and users that use
// or ask for resources hold 1 share.
type Shares struct {
	Projects map[string]int
	Users    map[string]map[string]int // project -> user -> shares
}

// Factors is one pending run's priority, factor by factor (Slurm's sprio).
type Factors struct {
	Age       float64 `json:"age"`
	Fairshare float64 `json:"fairshare"`
	Size      float64 `json:"size"`
	QOS       float64 `json:"qos"`
	Partition float64 `json:"partition"`
	Priority  float64 `json:"priority"`
	Expansion float64 `json:"expansion"`
	Nice      int64   `json:"nice"`
	// Total is the weighted sum minus Nice: the order runs are considered in.
	Total int64 `json:"total"`
}

// Priorities computes every pending run's factors under the snapshot's
// weights. Fairshare follows Slurm's classic formula on a two-level tree,
// projects then users: 2^(-UE/S), where S is the user's normalized share
// (its share among its project's users times the project's among projects)
// and UE its effective usage, its own share of all usage pulled toward its
// project's: UE = U + (Uproject - U) * s/siblings.
func Priorities(s Snapshot, now time.Time) map[int64]Factors {
	w := s.Weights
	if w == nil {
		w = &DefaultWeights
	}
	totalCPUs := 0
	for _, n := range s.Nodes {
		totalCPUs += n.CPUs
	}
	fs := newFairshare(&s)
	maxQOS, maxTier := 0, 0
	for _, q := range s.QOS {
		maxQOS = max(maxQOS, q.Priority)
	}
	for _, p := range s.Pending {
		maxQOS = max(maxQOS, qosPriority(&s, &p))
		maxTier = max(maxTier, p.Tier)
	}
	out := make(map[int64]Factors, len(s.Pending))
	for _, p := range s.Pending {
		var f Factors
		if w.MaxAge > 0 {
			f.Age = min(float64(now.Sub(p.SubmittedAt))/float64(w.MaxAge), 1)
			f.Age = max(f.Age, 0)
		}
		f.Fairshare = fs.factor(Account{p.Project, p.User})
		if totalCPUs > 0 {
			f.Size = min(float64(p.Request.CPUs*max(p.Nodes, 1))/float64(totalCPUs), 1)
			if w.FavorSmall {
				f.Size = 1 - f.Size
			}
		}
		if maxQOS > 0 {
			f.QOS = float64(qosPriority(&s, &p)) / float64(maxQOS)
		}
		if maxTier > 0 {
			f.Partition = float64(p.Tier) / float64(maxTier)
		}
		f.Priority = float64(p.Priority) / 100
		if wait := now.Sub(p.SubmittedAt); p.Limit > 0 && wait > 0 {
			f.Expansion = float64(wait) / float64(wait+p.Limit)
		}
		f.Nice = p.Nice
		f.Total = int64(math.Round(float64(w.Age)*f.Age+float64(w.Fairshare)*f.Fairshare+float64(w.Size)*f.Size+
			float64(w.QOS)*f.QOS+float64(w.Partition)*f.Partition+float64(w.Priority)*f.Priority+float64(w.Expansion)*f.Expansion)) - p.Nice
		out[p.RunID] = f
	}
	return out
}

// qosPriority is a run's QOS priority: from the snapshot's QOS table when
// it defines the QOS, else what the run carries.
func qosPriority(s *Snapshot, p *Pending) int {
	if q, ok := s.QOS[p.QOS]; ok {
		return q.Priority
	}
	return p.QOSPriority
}

// fairshare holds the tree's normalized shares and usages for one pass.
type fairshare struct {
	total     float64
	projUsage map[string]float64
	projShare map[string]float64 // normalized among projects
	userShare map[Account]float64
	sibling   map[string]float64 // project -> sum of its users' raw shares
	usage     Usage
	shares    *Shares
}

func newFairshare(s *Snapshot) *fairshare {
	f := &fairshare{projUsage: map[string]float64{}, projShare: map[string]float64{}, userShare: map[Account]float64{},
		sibling: map[string]float64{}, usage: s.Usage, shares: s.Shares}
	if f.shares == nil {
		f.shares = &Shares{}
	}
	accounts := map[Account]bool{}
	// Floating-point addition is not associative: summed in map order, the
	// totals would differ in their last bits from pass to pass, and so
	// could the order of two runs. Sum in the accounts' order.
	for _, a := range sortedAccounts(s.Usage) {
		v := s.Usage[a]
		f.total += v
		f.projUsage[a.Project] += v
		accounts[a] = true
	}
	for _, p := range s.Pending {
		accounts[Account{p.Project, p.User}] = true
	}
	for p, users := range f.shares.Users {
		for u := range users {
			accounts[Account{p, u}] = true
		}
	}
	projects := map[string]bool{}
	for p := range f.shares.Projects {
		projects[p] = true
	}
	for a := range accounts {
		projects[a.Project] = true
		f.userShare[a] = float64(shareOf(f.shares.Users[a.Project], a.User))
		f.sibling[a.Project] += f.userShare[a]
	}
	var all float64
	for p := range projects {
		all += float64(shareOf(f.shares.Projects, p))
	}
	for p := range projects {
		f.projShare[p] = float64(shareOf(f.shares.Projects, p)) / all
	}
	return f
}

// sortedAccounts are u's accounts by project, then user.
func sortedAccounts(u Usage) []Account {
	out := make([]Account, 0, len(u))
	for a := range u {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Account) int {
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		return strings.Compare(a.User, b.User)
	})
	return out
}

func shareOf(m map[string]int, name string) int {
	if v, ok := m[name]; ok {
		return max(v, 0)
	}
	return 1
}

func (f *fairshare) factor(a Account) float64 {
	if f.total <= 0 {
		return 1
	}
	s := f.userShare[a]
	if s <= 0 || f.sibling[a.Project] <= 0 || f.projShare[a.Project] <= 0 {
		return 0 // no shares: last
	}
	frac := s / f.sibling[a.Project]
	norm := f.projShare[a.Project] * frac
	u := f.usage[a] / f.total
	up := f.projUsage[a.Project] / f.total
	ue := u + (up-u)*frac
	return math.Pow(2, -ue/norm)
}
