package sched

import (
	"math"
	"math/bits"
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
	pr := newPrioritizer(&s, now)
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
}

func newPrioritizer(s *Snapshot, now time.Time) *prioritizer {
	pr := &prioritizer{s: s, w: s.Weights, now: now}
	if pr.w == nil {
		pr.w = &DefaultWeights
	}
	for i := range s.Nodes {
		pr.totalCPUs += s.Nodes[i].CPUs
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

// factors is one run's priority, factor by factor.
func (pr *prioritizer) factors(p *Pending) Factors {
	w, now := pr.w, pr.now
	var f Factors
	if w.MaxAge > 0 {
		f.Age = min(float64(now.Sub(p.SubmittedAt))/float64(w.MaxAge), 1)
		f.Age = max(f.Age, 0)
	}
	f.Fairshare = pr.fs.factor(Account{p.Project, p.User})
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
	if wait := now.Sub(p.SubmittedAt); p.Limit > 0 && wait > 0 {
		f.Expansion = float64(wait) / float64(wait+p.Limit)
	}
	f.Nice = p.Nice
	f.Total = int64(math.Round(float64(w.Age)*f.Age+float64(w.Fairshare)*f.Fairshare+float64(w.Size)*f.Size+
		float64(w.QOS)*f.QOS+float64(w.Partition)*f.Partition+float64(w.Priority)*f.Priority+float64(w.Expansion)*f.Expansion)) - p.Nice
	return f
}

// qosPriority is a run's QOS priority: from the snapshot's QOS table when
// it defines the QOS, else what the run carries.
func qosPriority(s *Snapshot, p *Pending) int {
	if q, ok := s.QOS[p.QOS]; ok {
		return q.Priority
	}
	return p.QOSPriority
}

// fairshare holds the tree's usages and shares for one pass. Every pass
// builds it anew from the snapshot (the scheduler keeps nothing between
// passes), so it costs one walk over the usage, with a map lookup per
// account only where the project changes, and computes each account's
// factor once, however many runs it has waiting.
type fairshare struct {
	total    float64
	projects map[string]*fsProject // every project that holds shares or an account
	all      float64               // the projects' raw shares, summed
	usage    Usage
	shares   *Shares
	memo     map[Account]float64 // factors computed this pass
}

// fsProject is one project of the tree in one pass.
type fsProject struct {
	name     string
	usage    float64
	siblings float64 // its accounts' raw shares, summed
	share    float64 // its own raw share
	sum      exactSum
}

func newFairshare(s *Snapshot) *fairshare {
	f := &fairshare{projects: map[string]*fsProject{}, usage: s.Usage, shares: s.Shares}
	if f.shares == nil {
		f.shares = &Shares{}
	}
	var last *fsProject // accounts come mostly in one project, or grouped
	project := func(name string) *fsProject {
		if last != nil && last.name == name {
			return last
		}
		p := f.projects[name]
		if p == nil {
			p = &fsProject{name: name, share: float64(shareOf(f.shares.Projects, name))}
			f.projects[name] = p
		}
		last = p
		return p
	}
	// The accounts are those with usage, with a pending run, or in the
	// share tree, each counted once among its project's siblings.
	type usage struct {
		p *fsProject
		v float64
	}
	usages := make([]usage, 0, len(s.Usage))
	for a, v := range s.Usage {
		p := project(a.Project)
		p.siblings += float64(shareOf(f.shares.Users[a.Project], a.User))
		p.sum.bound(v)
		usages = append(usages, usage{p, v})
	}
	for _, u := range usages {
		u.p.sum.add(u.v)
	}
	var extra map[Account]bool // accounts without usage, counted already
	add := func(a Account) {
		if _, ok := s.Usage[a]; ok || extra[a] {
			return
		}
		if extra == nil {
			extra = map[Account]bool{}
		}
		extra[a] = true
		project(a.Project).siblings += float64(shareOf(f.shares.Users[a.Project], a.User))
	}
	for i := range s.Pending {
		add(Account{s.Pending[i].Project, s.Pending[i].User})
	}
	for p, users := range f.shares.Users {
		for u := range users {
			add(Account{p, u})
		}
	}
	for p := range f.shares.Projects {
		project(p)
	}
	// Floating-point addition is not associative: summed in map order, the
	// usages would differ in their last bits from pass to pass, and so
	// could the order of two runs. Each project's usage is an exactSum, the
	// total is summed over the projects in name order. Raw shares are
	// integers, exact in any order.
	names := make([]string, 0, len(f.projects))
	for name, p := range f.projects {
		names = append(names, name)
		p.usage = p.sum.value()
	}
	slices.Sort(names)
	for _, name := range names {
		p := f.projects[name]
		f.total += p.usage
		f.all += p.share
	}
	return f
}

func shareOf(m map[string]int, name string) int {
	if v, ok := m[name]; ok {
		return max(v, 0)
	}
	return 1
}

// factor is a's fairshare factor, computed once per pass.
func (f *fairshare) factor(a Account) float64 {
	if v, ok := f.memo[a]; ok {
		return v
	}
	v := f.compute(a)
	if f.memo == nil {
		f.memo = map[Account]float64{}
	}
	f.memo[a] = v
	return v
}

func (f *fairshare) compute(a Account) float64 {
	if f.total <= 0 {
		return 1
	}
	p := f.projects[a.Project]
	s := float64(shareOf(f.shares.Users[a.Project], a.User))
	if p == nil || s <= 0 || p.siblings <= 0 || p.share <= 0 || f.all <= 0 {
		return 0 // no shares: last
	}
	frac := s / p.siblings
	norm := p.share / f.all * frac
	u := f.usage[a] / f.total
	up := p.usage / f.total
	ue := u + (up-u)*frac
	return math.Pow(2, -ue/norm)
}

// exactSum adds non-negative numbers (usages: anything else counts as 0) so that the result does not depend on
// their order, in one walk and without sorting them: each is cut to a 128-bit
// fixed-point integer scaled to the largest (what lies more than 2^-127 below
// the sum is dropped, the same way whatever the order), and integers add
// exactly in any order. bound sees every value first, add then adds them.
type exactSum struct {
	n      int
	top    float64
	scale  float64 // 2^(k-64): a value times scale is its high word
	hi, lo uint64
	slow   bool // scale would leave float64's range: Ldexp each value
	k      int
}

func (e *exactSum) bound(v float64) {
	e.n++
	if v > e.top {
		e.top = v
	}
}

// two64 is 2^64, which turns the fraction of a high word into a low word.
const two64 = 1 << 64

func (e *exactSum) add(v float64) {
	if !(v > 0) || math.IsInf(e.top, 1) {
		return // nothing to add, or the sum is infinite anyway
	}
	if e.scale == 0 && !e.slow {
		// The sum is below n * top < 2^(exp(top) + len(n)): scaled by
		// 2^k it stays below 2^127.
		_, exp := math.Frexp(e.top)
		e.k = 127 - bits.Len(uint(e.n)) - exp
		e.scale = math.Ldexp(1, e.k-64)
		e.slow = math.IsInf(e.scale, 1) // top below 2^-960 or so
	}
	var x float64
	if e.slow {
		x = math.Ldexp(v, e.k-64)
	} else {
		x = v * e.scale // a power of two: exact, but below 2^-1022, where it adds nothing anyway
	}
	h := math.Floor(x)
	l := (x - h) * two64 // the bits below the high word, exactly
	var c uint64
	e.lo, c = bits.Add64(e.lo, uint64(l), 0)
	e.hi += uint64(h) + c
}

func (e *exactSum) value() float64 {
	if math.IsInf(e.top, 1) {
		return e.top
	}
	if e.hi == 0 && e.lo == 0 {
		return 0
	}
	return math.Ldexp(float64(e.hi), 64-e.k) + math.Ldexp(float64(e.lo), -e.k)
}
