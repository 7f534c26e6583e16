package sched

import (
	"cmp"
	"math"
	"slices"
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
	// Wait is the hours waited, under a policy that ages runs only (Berth,
	// which adds BerthAging points for each).
	Wait float64 `json:"wait,omitempty"`
	Nice int64   `json:"nice"`
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
	pr := newPrioritizer(&s, now, nil)
	out := make(map[int64]Factors, len(s.Pending))
	for i := range s.Pending {
		out[s.Pending[i].RunID] = pr.factors(&s.Pending[i])
	}
	return out
}

// prioritizer holds what every run's factors share in one pass, computed
// once: the weights, the cluster's size, the largest QOS priority and tier,
// and the fairshare tree. The scheduler asks it for every pending run at
// every pass, so it is built to cost little per run.
type prioritizer struct {
	s               *Snapshot
	w               *Weights
	now             time.Time
	totalCPUs       int
	maxQOS, maxTier int
	fs              *fairshare
	fairAt          []float64 // each pending run's fairshare, from a Cycle (fs is nil then)
	order           order     // the policy's aging
}

func newPrioritizer(s *Snapshot, now time.Time, base *ranking) *prioritizer {
	pr := &prioritizer{s: s, w: s.Weights, now: now, order: s.Policy.strategy().order}
	if pr.w == nil {
		pr.w = &DefaultWeights
	}
	for i := range s.Nodes {
		pr.totalCPUs += s.Nodes[i].CPUs
	}
	if base != nil {
		pr.maxQOS, pr.maxTier, pr.fairAt = base.maxQOS, base.maxTier, base.fairAt
		return pr
	}
	for _, q := range s.QOS {
		pr.maxQOS = max(pr.maxQOS, q.Priority)
	}
	for i := range s.Pending {
		pr.maxQOS = max(pr.maxQOS, qosPriority(s, &s.Pending[i]))
		pr.maxTier = max(pr.maxTier, s.Pending[i].Tier)
	}
	pr.fs = newFairshare(s)
	return pr
}

// orderBase is what every run's priority factors share, as a Cycle gives
// it for its whole queue: the largest QOS priority and tier, and the
// fairshare factor of every account with a waiting run.
type orderBase struct {
	maxQOS, maxTier int
	fair            []accountFactor
	// version and gen are the Cycle's usage tree's and policy's when it
	// was computed.
	version, gen uint64
}

// ranking is what a Cycle gives a pass of its runs' priority factors,
// computed over its whole queue (the snapshot may hold only part of it):
// the largest QOS priority and tier, and each pending run's fairshare
// factor (fairAt[i] is Pending[i]'s).
type ranking struct {
	maxQOS, maxTier int
	fairAt          []float64
}

// factors is one run's priority, factor by factor.
func (pr *prioritizer) factors(p *Pending) Factors { return pr.factorsAt(p, -1) }

// factorsAt is factors of Pending[i] (i < 0: unknown).
func (pr *prioritizer) factorsAt(p *Pending, i int) Factors {
	w, now := pr.w, pr.now
	var f Factors
	wait := now.Sub(p.SubmittedAt)
	if w.MaxAge > 0 {
		f.Age = min(float64(wait)/float64(w.MaxAge), 1)
		f.Age = max(f.Age, 0)
	}
	if pr.fairAt != nil && i >= 0 {
		f.Fairshare = pr.fairAt[i]
	} else {
		f.Fairshare = pr.fs.factor(Account{p.Project, p.User})
	}
	if pr.totalCPUs > 0 {
		f.Size = min(float64(p.Request.CPUs*max(p.Nodes, 1))/float64(pr.totalCPUs), 1)
		if w.FavorSmall {
			f.Size = 1 - f.Size
		}
	}
	if pr.maxQOS > 0 {
		f.QOS = float64(qosPriority(pr.s, p)) / float64(pr.maxQOS)
	}
	if pr.maxTier > 0 {
		f.Partition = float64(p.Tier) / float64(pr.maxTier)
	}
	f.Priority = float64(p.Priority) / 100
	if p.Limit > 0 && wait > 0 {
		f.Expansion = float64(wait) / float64(wait+p.Limit)
	}
	f.Nice = p.Nice
	aging, hours := pr.order.agingPoints(wait)
	f.Wait = hours
	f.Total = int64(math.Round(float64(w.Age)*f.Age+float64(w.Fairshare)*f.Fairshare+float64(w.Size)*f.Size+
		float64(w.QOS)*f.QOS+float64(w.Partition)*f.Partition+float64(w.Priority)*f.Priority+float64(w.Expansion)*f.Expansion+aging)) - p.Nice
	return f
}

// qosPriority is a run's QOS priority: from the snapshot's QOS table when
// it defines the QOS, else what the run carries.
func qosPriority(s *Snapshot, p *Pending) int { return qosPriorityIn(s.QOS, p) }

// priorityOrder is the order runs are considered in: by multifactor
// priority when the snapshot has weights, else by their own priority; then
// older first, then lower ID.
func priorityOrder(s Snapshot, now time.Time) []int { return orderOf(&s, now, nil, &passMemory{}) }

// orderOf is priorityOrder, with the priority factors' base a Cycle gives,
// in the memory of an earlier pass.
func orderOf(s *Snapshot, now time.Time, base *ranking, mem *passMemory) []int {
	pending := s.Pending
	key := slices.Grow(mem.key[:0], len(pending))[:len(pending)]
	mem.key = key
	if s.Weights != nil && len(pending) > 1 { // one run needs no ranking, and the factors cost a walk over all usage
		pr := newPrioritizer(s, now, base)
		for i := range pending {
			key[i] = pr.factorsAt(&pending[i], i).Total
		}
	} else {
		for i, p := range pending {
			key[i] = int64(p.Priority)
		}
	}
	order := slices.Grow(mem.order[:0], len(pending))[:len(pending)]
	mem.order = order
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(ia, ib int) int {
		if key[ia] != key[ib] {
			return cmp.Compare(key[ib], key[ia])
		}
		pa, pb := &pending[ia], &pending[ib]
		if c := pa.SubmittedAt.Compare(pb.SubmittedAt); c != 0 {
			return c
		}
		return cmp.Compare(pa.RunID, pb.RunID)
	})
	return order
}
