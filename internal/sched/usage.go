package sched

import (
	"math"
	"slices"
	"time"
)

// usageTree is fairshare's input as a Cycle keeps it between passes: every
// account's decayed usage and the share tree's sums, updated by each change
// instead of built anew from the whole usage at every pass (newFairshare),
// with the very same result to the last bit: the sums are exactSums, which
// take a value out as exactly as they put it in.
//
// Decay. Fairshare reads only each account's share of the total, which
// decay leaves alone (it scales every usage alike); so rather than age
// every account at every pass, each new use is added grown by
// 2^((t-base)/half-life), and u holds usage scaled by that common factor.
// When the factor grows large, base moves on by a whole number of
// half-lives, which scales every usage by an exact power of two. Usage
// gives the true decayed values.
type usageTree struct {
	halfLife time.Duration // 0: no decay
	u        Usage         // scaled by 2^((now-base)/halfLife)
	base     time.Time
	started  bool
	shares   *Shares
	projects map[string]*fsProject // every project that holds shares or a present account
	names    []string              // projects' names, sorted
	all      int64                 // the projects' raw shares, summed
	// waiting are the accounts with waiting runs, counted (an account
	// without usage counts among its project's siblings while it has one),
	// each with its usage: a pass needs their factors, and only theirs.
	waiting []*waitingAccount
	waitAt  map[Account]*waitingAccount
	// version counts the changes to what factors are computed from.
	version uint64
}

// maxGrowth is how many half-lives the scale may reach before base moves:
// far from float64's range (2^1023), with room for the usages themselves.
const maxGrowth = 512

func newUsageTree(halfLife time.Duration, shares *Shares) *usageTree {
	t := &usageTree{halfLife: halfLife, u: Usage{}, waitAt: map[Account]*waitingAccount{}}
	t.setShares(shares)
	return t
}

// setShares replaces the share tree and builds the sums again.
func (t *usageTree) setShares(shares *Shares) {
	t.version++
	if shares == nil {
		shares = &Shares{}
	}
	t.shares = shares
	t.rebuild()
}

// rebuild computes the projects' sums from the usage, the waiting runs'
// accounts and the share tree, as newFairshare does for one snapshot.
func (t *usageTree) rebuild() {
	t.projects, t.names, t.all = map[string]*fsProject{}, nil, 0
	for a, v := range t.u {
		t.project(a.Project).usage.add(v)
	}
	counted := map[Account]bool{}
	count := func(a Account) {
		if !counted[a] {
			counted[a] = true
			t.present(a, 1)
		}
	}
	for a := range t.u {
		count(a)
	}
	for _, w := range t.waiting {
		count(w.a)
	}
	for p, us := range t.shares.Users {
		for u := range us {
			count(Account{p, u})
		}
	}
	for p := range t.shares.Projects {
		t.project(p)
	}
}

// project is a project's entry, made (with its share) when missing.
func (t *usageTree) project(name string) *fsProject {
	p := t.projects[name]
	if p == nil {
		t.version++
		p = &fsProject{name: name, share: int64(shareOf(t.shares.Projects, name))}
		t.projects[name] = p
		i, _ := slices.BinarySearch(t.names, name)
		t.names = slices.Insert(t.names, i, name)
		t.all += p.share
	}
	return p
}

// present counts account a in (sign 1) or out of (-1) its project's
// siblings. A project left without accounts and not in the share tree
// leaves the tree, as it would be absent from a rebuild.
func (t *usageTree) present(a Account, sign int64) {
	t.version++
	p := t.project(a.Project)
	p.siblings += sign * int64(shareOf(t.shares.Users[a.Project], a.User))
	p.accounts += sign
	if p.accounts == 0 {
		if _, listed := t.shares.Projects[a.Project]; !listed {
			delete(t.projects, a.Project)
			i, _ := slices.BinarySearch(t.names, a.Project)
			t.names = slices.Delete(t.names, i, i+1)
			t.all -= p.share
		}
	}
}

// isPresent tells whether a counts among its project's siblings.
func (t *usageTree) isPresent(a Account) bool {
	if _, ok := t.u[a]; ok || t.waitAt[a] != nil {
		return true
	}
	_, listed := t.shares.Users[a.Project][a.User]
	return listed
}

// waitingAccount is an account with waiting runs: how many, and its
// (scaled) usage.
type waitingAccount struct {
	a      Account
	n      int
	usage  float64
	at     int     // its index in waiting
	factor float64 // its fairshare factor, as the Cycle computed it last
}

// queue counts a waiting run of a in (1) or out (-1).
func (t *usageTree) queue(a Account, sign int) {
	w := t.waitAt[a]
	if w != nil {
		if w.n += sign; w.n > 0 {
			return // the same accounts wait: nothing else changes
		}
		w.n = 0 // gone: a base that named it no longer does
		last := len(t.waiting) - 1
		t.waiting[w.at] = t.waiting[last]
		t.waiting[w.at].at = w.at
		t.waiting[last] = nil
		t.waiting = t.waiting[:last]
		delete(t.waitAt, a)
		t.version++
		if !t.isPresent(a) {
			t.present(a, -1)
		}
		return
	}
	if sign <= 0 {
		return
	}
	was := t.isPresent(a)
	w = &waitingAccount{a: a, n: sign, usage: t.u[a], at: len(t.waiting)}
	t.waiting = append(t.waiting, w)
	t.waitAt[a] = w
	t.version++
	if !was {
		t.present(a, 1)
	}
}

// add records v CPU-seconds of a, used at time at. Nothing at or below 0.
func (t *usageTree) add(a Account, v float64, at time.Time) {
	if !(v > 0) {
		return
	}
	if !t.started {
		t.base, t.started = at, true
	}
	scale := 1.0
	if t.halfLife > 0 {
		if k := int(at.Sub(t.base) / t.halfLife); k >= maxGrowth {
			for a, w := range t.u {
				t.u[a] = math.Ldexp(w, -k)
			}
			for _, w := range t.waiting {
				w.usage = t.u[w.a]
			}
			t.base = t.base.Add(time.Duration(k) * t.halfLife)
			t.rebuild()
		}
		scale = math.Exp2(float64(at.Sub(t.base)) / float64(t.halfLife))
	}
	t.version++
	was := t.isPresent(a)
	old, had := t.u[a]
	t.u[a] += v * scale
	if !was {
		t.present(a, 1)
	}
	p := t.project(a.Project)
	if had {
		p.usage.sub(old)
	}
	p.usage.add(t.u[a])
	if w := t.waitAt[a]; w != nil {
		w.usage = t.u[a]
	}
}

// usage is the true decayed usage at now.
func (t *usageTree) usage(now time.Time) Usage {
	out := make(Usage, len(t.u))
	f := 1.0
	if t.halfLife > 0 && t.started {
		f = math.Exp2(-float64(now.Sub(t.base)) / float64(t.halfLife))
	}
	for a, v := range t.u {
		out[a] = v * f
	}
	return out
}

// fairshare is the tree as one pass reads it. It shares the tree's maps:
// it is read at once (factors), never kept.
func (t *usageTree) fairshare() *fairshare {
	f := &fairshare{projects: t.projects, usage: t.u, shares: t.shares, all: float64(t.all)}
	for _, name := range t.names {
		f.total += t.projects[name].usage.value()
	}
	return f
}
