package sched

import (
	"math"
	"slices"
)

// fairshare holds the tree's usages and shares for one pass. Every pass
// builds it anew from the snapshot (the scheduler keeps nothing between
// passes), and the simulator passes hundreds of times a simulated day over
// hundreds of accounts, so it costs one walk over the usage with a few
// integer operations per account, and computes each account's factor once,
// however many runs it has waiting.
type fairshare struct {
	total    float64
	projects map[string]*fsProject // every project that holds shares or an account
	all      float64               // the projects' raw shares, summed
	usage    Usage
	shares   *Shares
	memo     map[Account]float64 // factors computed this pass
	last     Account             // the account asked for last, and its factor:
	lastV    float64             // a user's runs often come one after another
	hasLast  bool
}

// fsProject is one project of the tree in one pass.
type fsProject struct {
	name     string
	usage    exactSum
	siblings int64 // its accounts' raw shares, summed
	share    int64 // its own raw share
	accounts int64 // its accounts (usageTree's count; 0 in newFairshare's)
}

func newFairshare(s *Snapshot) *fairshare {
	f := &fairshare{projects: map[string]*fsProject{}, usage: s.Usage, shares: s.Shares}
	if f.shares == nil {
		f.shares = &Shares{}
	}
	project := func(name string) *fsProject {
		p := f.projects[name]
		if p == nil {
			p = &fsProject{name: name, share: int64(shareOf(f.shares.Projects, name))}
			f.projects[name] = p
		}
		return p
	}
	// The accounts are those with usage, with a pending run, or in the
	// share tree, each counted once among its project's siblings. Usage
	// comes mostly in one project, or in a few: the last one found serves
	// again without a lookup.
	var p *fsProject
	users := f.shares.Users
	for a, v := range s.Usage {
		if p == nil || p.name != a.Project {
			p = project(a.Project)
		}
		if users == nil {
			p.siblings++
		} else {
			p.siblings += int64(shareOf(users[a.Project], a.User))
		}
		p.usage.add(v)
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
		project(a.Project).siblings += int64(shareOf(users[a.Project], a.User))
	}
	for i := range s.Pending {
		add(Account{s.Pending[i].Project, s.Pending[i].User})
	}
	for p, us := range users {
		for u := range us {
			add(Account{p, u})
		}
	}
	for p := range f.shares.Projects {
		project(p)
	}
	// Floating-point addition is not associative: summed in map order, the
	// usages would differ in their last bits from pass to pass, and so
	// could the order of two runs. Each project's usage is an exactSum; the
	// total adds the projects' in name order.
	names := make([]string, 0, len(f.projects))
	for name := range f.projects {
		names = append(names, name)
	}
	slices.Sort(names)
	var all int64
	for _, name := range names {
		p := f.projects[name]
		f.total += p.usage.value()
		all += p.share
	}
	f.all = float64(all)
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
	if f.hasLast && f.last == a {
		return f.lastV
	}
	v, ok := f.memo[a]
	if !ok {
		v = f.compute(a)
		if f.memo == nil {
			f.memo = map[Account]float64{}
		}
		f.memo[a] = v
	}
	f.last, f.lastV, f.hasLast = a, v, true
	return v
}

func (f *fairshare) compute(a Account) float64 { return f.computeWith(a, f.usage[a]) }

// computeWith is a's factor, its usage given.
func (f *fairshare) computeWith(a Account, usage float64) float64 {
	if f.total <= 0 {
		return 1
	}
	p := f.projects[a.Project]
	s := float64(shareOf(f.shares.Users[a.Project], a.User))
	if p == nil || s <= 0 || p.siblings <= 0 || p.share <= 0 || f.all <= 0 {
		return 0 // no shares: last
	}
	frac := s / float64(p.siblings)
	norm := float64(p.share) / f.all * frac
	u := usage / f.total
	up := p.usage.value() / f.total
	ue := u + (up-u)*frac
	return math.Pow(2, -ue/norm)
}

// exactSum adds non-negative float64s exactly, so that the sum does not
// depend on their order, in one walk and without sorting them (Neal's
// "small superaccumulator"): limb i counts the sum's bits 32i to 32i+31 in
// units of 2^-1074, float64's smallest step, and each value adds its 53-bit
// mantissa, cut in three 32-bit pieces, to three limbs. Integers add
// exactly in any order, and a limb takes 2^31 values between two readings
// of the sum before it could overflow. Anything but a positive number
// counts as 0, +Inf makes the sum +Inf. A value added may be taken out
// again (sub), exactly: a Cycle keeps its projects' usage sums that way,
// equal to the bit to what adding the usages anew would give.
type exactSum struct {
	limbs [67]int64 // 2098 bits of float64 range, in 32-bit limbs, and a carry
	infs  int       // +Inf values in the sum
	done  bool      // value has propagated the carries
	v     float64   // the sum, once done
}

func (e *exactSum) add(v float64) { e.addSigned(v, 1) }

// sub takes out a value added before.
func (e *exactSum) sub(v float64) { e.addSigned(v, -1) }

func (e *exactSum) addSigned(v float64, sign int64) {
	bits := math.Float64bits(v)
	exp := bits >> 52 // with the sign bit: negative numbers are above 0x7ff
	if exp >= 0x7ff || bits == 0 {
		if bits == 0x7ff<<52 { // +Inf; NaN, negatives and zeros add nothing
			e.infs += int(sign)
			e.done = false
		}
		return
	}
	m := bits & (1<<52 - 1)
	if exp == 0 {
		exp = 1 // subnormal: no implicit bit
	} else {
		m |= 1 << 52
	}
	// v = m * 2^(exp-1075) = m * 2^(exp-1) units.
	at := exp - 1
	i, off := at/32, at%32
	lo, hi := m<<off, m>>(64-off) // m * 2^off, up to 85 bits; hi is 0 when off is 0
	e.limbs[i] += sign * int64(lo&(1<<32-1))
	e.limbs[i+1] += sign * int64(lo>>32)
	e.limbs[i+2] += sign * int64(hi)
	e.done = false
}

// value is the sum, rounded from its top 96 bits.
func (e *exactSum) value() float64 {
	if e.done {
		return e.v
	}
	e.done = true
	if e.infs > 0 {
		e.v = math.Inf(1)
		return e.v
	}
	top := -1
	for i := range len(e.limbs) - 1 {
		e.limbs[i+1] += e.limbs[i] >> 32 // a floor: a limb may be below 0 after a sub
		e.limbs[i] &= 1<<32 - 1
		if e.limbs[i] != 0 {
			top = i
		}
	}
	if e.limbs[len(e.limbs)-1] != 0 {
		top = len(e.limbs) - 1
	}
	e.v = 0
	for i := top; i >= 0 && i > top-3; i-- {
		e.v += math.Ldexp(float64(e.limbs[i]), 32*i-1074)
	}
	return e.v
}
