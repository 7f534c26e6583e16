package sched

import (
	"slices"
	"time"
)

// Schedule decides one pass. Runs are taken in priority order (higher
// first, then older, then lower ID) and each goes down the pass's stages
// (newStages) until one settles it: it starts now if it fits, for its time
// limit, in the nodes' profiles — what running runs hold until their
// expected end, and what higher runs have reserved; one that does not fit
// waits, and takes a reservation at the earliest time it fits when the
// policy's strategy says so (EASY: the first that waits; Conservative:
// every one; Berth: the first 16), which later runs then cannot use; under
// FCFS nothing starts after the first that waits.
func Schedule(s Snapshot, now time.Time) Plan {
	return schedule(nil, &s, now, nil, passOptions{}).plan
}

// passOptions are what a Cycle asks of a pass beyond Schedule's: record
// where reservations are, a plain plan, whether run track waited.
type passOptions struct {
	record, plain bool
	track         int64
}

// schedule is one pass: the order, then each run down the stages. A Cycle
// gives its ranking (the priority factors' scales and each run's
// fairshare, over its whole queue: the snapshot may hold only part of it)
// and reads what the pass records of its reservations; Schedule gives
// none, and the factors come from the snapshot. p, when not nil, is an
// earlier pass whose memory this one reuses.
func schedule(p *pass, s *Snapshot, now time.Time, base *ranking, opt passOptions) *pass {
	if p == nil {
		p = &pass{}
	}
	p.plain = opt.plain
	p.reset(s, now)
	p.record, p.track = opt.record, opt.track
	for k, i := range orderOf(s, now, base, &p.mem) {
		p.k = k
		p.consider(&s.Pending[i])
	}
	return p
}

// pass is one scheduling pass's working state: the profiles it takes
// from, what it has decided so far, and the stages a run goes through.
type pass struct {
	s        *Snapshot
	now      time.Time
	strategy strategy
	stages   []stage
	plan     Plan

	profiles []*profile
	// open are the nodes with a CPU free now: within a pass they only lose
	// resources, so a node that fills up leaves the list for good — lazily:
	// placeAt's first test skips full nodes, and the list is compacted once
	// half of it is full (full counts them; one scan per fill would cost a
	// pass dearly).
	open       []*profile
	full       int
	nodeByName map[string]*Node // only with limits, which count placements by node
	acct       *accounts        // nil: no limits
	pre        *preemptor       // nil: no QOS may preempt
	failed     misses

	k       int     // the run's place in the order
	waiting bool    // a run waits already
	first   []int64 // the first run that waits: what later ones wait behind
	// Of the run being considered: it preempts (it waits for its victims,
	// not for a reservation), and it is the first to wait.
	preempting, firstWaiting bool

	// record: the pass keeps, for a Cycle, where each reservation is
	// (reservedOn[k] is Reserved[k]'s).
	record     bool
	reservedOn []reservation
	// plain: the plan holds starts, preemptions and reservations, no
	// reasons, estimates or blockers (CycleConfig.StartsOnly). trackWaited
	// tells whether run track reached the wait stage, which a Cycle asks
	// of the last pass's first waiting run.
	plain       bool
	track       int64
	trackWaited bool

	mem passMemory
}

// stage is one question a pass asks of a pending run. It returns true when
// it settles the run: later stages are not asked.
type stage struct {
	name string
	ask  func(*pass, *Pending) bool
}

// newStages wires a pass's stages, in the order each run is asked them.
// Why each sits where it does:
//
//   - depth, hold, never fits, limits: settle a run without looking at the
//     profiles, cheapest first; a run they settle neither starts nor
//     reserves, and (but for depth) holds no one up. The limit sits last
//     of them as it is the only one whose answer changes within the pass
//     (each start counts against it).
//   - behind blocked (only when the policy forbids passing, FCFS): after
//     eligibility, since a held or limited run does not block others;
//     before start now, since a run behind a waiting one must not try.
//   - start now: the profile already holds what running runs keep and what
//     higher runs reserved, so a start never delays a reservation.
//   - preempt (only when some QOS may preempt): only for a run that cannot
//     start without stopping others.
//   - wait: every run that gets here waits; the reason and the blocker
//     depend on whether it is the first.
//   - reserve: last, since it is the only stage that searches the
//     profiles' future (earliest), the costliest question; the strategy
//     says who asks it.
func newStages(p *pass, stages []stage) []stage {
	if p.s.Depth > 0 {
		stages = append(stages, stage{"depth", (*pass).beyondDepth})
	}
	stages = append(stages,
		stage{"hold", (*pass).held},
		stage{"never fits", (*pass).neverFits},
		stage{"limits", (*pass).limited})
	if !p.strategy.passBlocked {
		stages = append(stages, stage{"behind blocked", (*pass).behindBlocked})
	}
	stages = append(stages, stage{"start now", (*pass).startNow})
	if p.pre != nil {
		stages = append(stages, stage{"preempt", (*pass).preempt})
	}
	return append(stages, stage{"wait", (*pass).wait}, stage{"reserve", (*pass).reserve})
}

// reset readies p for a pass over s at now: the profiles of the online
// nodes, built from what running runs hold and give back, and the stages.
// It keeps the memory an earlier pass allocated (its profiles, lists and
// maps): a Cycle's passes, one after another, reuse one pass, and a
// simulator makes hundreds of thousands of them.
func (p *pass) reset(s *Snapshot, now time.Time) {
	mem, plan, plain := p.mem, p.plan, p.plain
	*p = pass{s: s, now: now, strategy: s.Policy.strategy(), mem: mem, reservedOn: p.reservedOn[:0], plain: plain}
	if mem.reusePlan {
		p.mem.arena = p.mem.arena[:0]
	} else {
		p.mem.arena = nil // the last plan's blockers are in it
	}
	p.mem.planSize = max(p.mem.planSize, len(plan.Reasons))
	if plain {
		p.plan = Plan{Starts: plan.Starts[:0]}
		if !mem.reusePlan {
			p.plan.Starts = nil
		}
	} else if mem.reusePlan && plan.Reasons != nil && p.mem.planSize <= 2*len(s.Pending)+16 {
		// The last pass's plan has been read: its maps serve again (unless
		// a longer queue grew them: clearing costs what they hold room for).
		clear(plan.Reasons)
		clear(plan.Estimates)
		clear(plan.BlockedBy)
		p.plan = Plan{Reasons: plan.Reasons, Estimates: plan.Estimates, BlockedBy: plan.BlockedBy, Starts: plan.Starts[:0]}
	} else {
		// Most pending runs get a reason and a blocker: sized once, the
		// maps do not grow pass after pass.
		p.plan = Plan{Reasons: make(map[int64]string, len(s.Pending)), Estimates: make(map[int64]time.Time, min(len(s.Pending), 16)),
			BlockedBy: make(map[int64][]int64, len(s.Pending))}
		p.mem.planSize = 0
	}
	m := &p.mem
	if m.byName == nil {
		m.byName = map[string]*profile{}
	}
	clear(m.byName)
	p.profiles = m.profiles[:0]
	for i := range s.Nodes {
		if !s.Nodes[i].Online {
			continue
		}
		pr := m.profile(len(p.profiles))
		pr.reset(&s.Nodes[i], now)
		p.profiles = append(p.profiles, pr)
		m.byName[pr.node.Name] = pr
	}
	m.profiles = p.profiles
	// Runs' placements come node after node (a pool's, all on one): the
	// last node's entries serve again without a lookup.
	var (
		curName string
		curSet  bool
		curProf *profile
	)
	for ri := range s.Running {
		r := &s.Running[ri]
		at := r.End // zero: it holds its resources for as long as planning can see
		if !at.IsZero() && !at.After(now) {
			at = now.Add(time.Nanosecond) // overdue: expected to end any moment
		}
		for pi := range r.Placements {
			pl := &r.Placements[pi]
			if !curSet || pl.Node != curName {
				curName, curSet, curProf = pl.Node, true, m.byName[pl.Node]
			}
			if curProf == nil {
				continue // an offline node: not in the pass
			}
			if !plain {
				curProf.holders = append(curProf.holders, r.RunID)
			}
			if !at.IsZero() {
				curProf.ends = append(curProf.ends, release{at, pl.CPUs, pl.Memory, pl.GPUs})
			}
		}
	}
	// Each node's holders sorted and each once: a reservation's blockers
	// are those of its nodes, sorted.
	for _, pr := range p.profiles {
		if len(pr.holders) > 1 {
			slices.Sort(pr.holders)
			pr.holders = slices.Compact(pr.holders)
		}
	}
	p.open = m.open[:0]
	for _, pr := range p.profiles {
		pr.releaseAll()
		if pr.segs[0].cpus > 0 {
			p.open = append(p.open, pr)
		}
	}
	m.open = p.open
	if len(s.Limits) > 0 {
		if m.nodeByName == nil {
			m.nodeByName = map[string]*Node{}
		}
		clear(m.nodeByName)
		p.nodeByName = m.nodeByName
		for i := range s.Nodes {
			p.nodeByName[s.Nodes[i].Name] = &s.Nodes[i]
		}
	}
	p.acct = newAccounts(s, p.nodeByName)
	p.pre = newPreemptor(s, now, p.profiles)
	p.stages = newStages(p, m.stages[:0])
	m.stages = p.stages
}

// passMemory is what a pass keeps for the next one to reuse.
type passMemory struct {
	// reusePlan: the next pass may reuse this one's plan (Cycle.Pass, whose
	// caller reads a plan before it asks for the next); planSize is the
	// most entries its maps have held.
	reusePlan  bool
	planSize   int
	pool       []*profile
	profiles   []*profile
	open       []*profile
	byName     map[string]*profile
	nodeByName map[string]*Node
	stages     []stage
	key        []int64
	order      []int
	// arena holds the plan's blocker lists, one allocation for many.
	arena []int64
	picks []pick
}

// ids copies src into the pass's arena.
func (p *pass) ids(src []int64) []int64 {
	m := &p.mem
	if cap(m.arena)-len(m.arena) < len(src) {
		m.arena = make([]int64, 0, max(256, 2*len(src)))
	}
	start := len(m.arena)
	m.arena = append(m.arena, src...)
	return m.arena[start:len(m.arena):len(m.arena)]
}

// profile is the i-th profile of the pool, made when missing.
func (m *passMemory) profile(i int) *profile {
	if i == len(m.pool) {
		m.pool = append(m.pool, &profile{})
	}
	return m.pool[i]
}

// hold records that run id holds or reserves resources on pr's node,
// keeping its holders sorted and each once.
func (pr *profile) hold(id int64) {
	i, found := slices.BinarySearch(pr.holders, id)
	if !found {
		pr.holders = slices.Insert(pr.holders, i, id)
	}
}

// consider takes one run down the stages until one settles it.
func (p *pass) consider(pd *Pending) {
	p.preempting, p.firstWaiting = false, false
	for i := range p.stages {
		if p.stages[i].ask(p, pd) {
			return
		}
	}
}

// beyondDepth: past Depth runs in the order, a run waits with reason
// Priority, behind the first that waits.
func (p *pass) beyondDepth(pd *Pending) bool {
	if p.k < p.s.Depth {
		return false
	}
	p.reason(pd.RunID, ReasonPriority)
	p.blocked(pd.RunID, p.first)
	return true
}

// held: a run with a hold waits with it and holds no one up.
func (p *pass) held(pd *Pending) bool {
	if pd.Hold == "" {
		return false
	}
	p.reason(pd.RunID, pd.Hold)
	return true
}

// neverFits: no node could ever hold the run.
func (p *pass) neverFits(pd *Pending) bool {
	if len(pd.Groups) > 0 && fitsGroups(p.s.Nodes, pd.Groups) || len(pd.Groups) == 0 && Fits(p.s.Nodes, *pd.Request, pd.Nodes, false) {
		return false
	}
	p.reason(pd.RunID, ReasonNoNode)
	return true
}

// limited: held by a limit, a run neither starts nor reserves, and runs
// behind it are not held up by it (Slurm does the same).
func (p *pass) limited(pd *Pending) bool {
	why := p.acct.blocked(pd)
	if why == "" {
		return false
	}
	p.reason(pd.RunID, why)
	return true
}

// behindBlocked: a run waits behind the first that waits (FCFS).
func (p *pass) behindBlocked(pd *Pending) bool {
	if !p.waiting {
		return false
	}
	if pd.RunID == p.track {
		p.trackWaited = true
	}
	p.reason(pd.RunID, ReasonPriority)
	p.blocked(pd.RunID, p.first)
	return true
}

// startNow starts the run if it fits now for its whole time limit in the
// open nodes' profiles. A request at least as large as one that already
// failed this pass is not tried.
func (p *pass) startNow(pd *Pending) bool {
	if len(pd.Groups) == 0 && p.failed.covers(pd) {
		return false // as large as a run that could not start: it cannot either
	}
	picks, ok := placeInto(p.mem.picks, p.open, p.now, pd, p.s.Topology)
	if picks != nil {
		p.mem.picks = picks
	}
	if !ok {
		if len(pd.Groups) == 0 {
			p.failed.add(pd)
		}
		return false
	}
	st := Start{RunID: pd.RunID}
	for k, pk := range picks {
		pk.p.take(p.now, end(p.now, pd.Limit), pk.req.CPUs, pk.req.Memory, pk.gpus)
		st.Placements = append(st.Placements, Placement{JobID: jobID(pd, k), Node: pk.p.node.Name,
			CPUs: pk.req.CPUs, Memory: pk.req.Memory, GPUs: pk.gpus})
	}
	p.plan.Starts = append(p.plan.Starts, st)
	if !p.plain {
		for _, pk := range picks {
			pk.p.hold(pd.RunID)
		}
	}
	if p.acct != nil {
		p.acct.charge(keysOf(pd.User, pd.Project, pd.QOS, pd.Array), startTRES(st, p.nodeByName), 1)
	}
	for _, pk := range picks {
		if pk.p.segs[0].cpus <= 0 {
			p.full++
		}
	}
	if p.full > len(p.open)/2 {
		p.open = slices.DeleteFunc(p.open, func(pr *profile) bool { return pr.segs[0].cpus <= 0 })
		p.full = 0
	}
	return true
}

// preempt finds victims whose stopping makes room for the run now; it then
// waits for them (the next pass after they have gone starts it) and takes
// no reservation.
func (p *pass) preempt(pd *Pending) bool {
	vs, ok := p.pre.victims(pd)
	if !ok {
		return false
	}
	var by []int64
	for _, v := range vs {
		by = append(by, v.RunID)
		if v.Ending {
			continue
		}
		mode := p.s.QOS[pd.QOS].Mode
		if q, ok := p.s.QOS[v.QOS]; ok {
			mode = q.Mode
		}
		p.plan.Preemptions = append(p.plan.Preemptions, Preemption{Victim: v.RunID, By: pd.RunID, Mode: mode})
	}
	slices.Sort(by)
	p.blocked(pd.RunID, by)
	p.preempting = true
	return false
}

// reason and blocked record why a run waits and behind whom, unless the
// pass is plain (a Cycle's, for a caller that reads only starts).
func (p *pass) reason(id int64, why string) {
	if !p.plain {
		p.plan.Reasons[id] = why
	}
}

func (p *pass) blocked(id int64, by []int64) {
	if !p.plain {
		p.plan.BlockedBy[id] = by
	}
}

// wait gives a run that does not start its reason: Resources for the first
// that waits, Priority behind it.
func (p *pass) wait(pd *Pending) bool {
	p.firstWaiting = !p.waiting
	if pd.RunID == p.track {
		p.trackWaited = true
	}
	if p.firstWaiting {
		p.reason(pd.RunID, ReasonResources)
		p.first = []int64{pd.RunID}
	} else {
		p.reason(pd.RunID, ReasonPriority)
		if !p.preempting {
			p.blocked(pd.RunID, p.first)
		}
	}
	p.waiting = true
	return false
}

// reserve gives a waiting run, when the strategy says so, a reservation:
// the earliest time every job of it fits for its limit, taken in the
// profiles so that no later run can use it. Its blockers are the runs that
// hold or reserve the nodes it reserves.
func (p *pass) reserve(pd *Pending) bool {
	if p.preempting || !p.strategy.reserve(p.firstWaiting, len(p.plan.Reserved)) {
		return true
	}
	at, picks, ok := earliestInto(p.mem.picks, p.profiles, p.now, pd, p.s.Topology)
	if picks != nil {
		p.mem.picks = picks
	}
	if !ok {
		return true // behind runs that never end: no estimate
	}
	p.plan.Reserved = append(p.plan.Reserved, pd.RunID)
	if !p.plain {
		p.plan.Estimates[pd.RunID] = at
		var by []int64
		if len(picks) == 1 {
			by = p.ids(picks[0].p.holders) // sorted, each once
		} else {
			for _, pk := range picks {
				by = append(by, pk.p.holders...)
			}
			slices.Sort(by)
			by = slices.Compact(by)
		}
		p.plan.BlockedBy[pd.RunID] = by
	}
	for _, pk := range picks {
		if pk.span {
			pk.p.takeSpan(pk.si, pk.sj, end(at, pd.Limit), pk.req.CPUs, pk.req.Memory, pk.gpus)
		} else {
			pk.p.take(at, end(at, pd.Limit), pk.req.CPUs, pk.req.Memory, pk.gpus)
		}
		if !p.plain {
			pk.p.hold(pd.RunID)
		}
	}
	if p.record {
		res := reservation{at: at, node: picks[0].p.node.Name}
		if len(picks) > 1 {
			res.nodes = make([]string, len(picks))
			for i, pk := range picks {
				res.nodes[i] = pk.p.node.Name
			}
		}
		p.reservedOn = append(p.reservedOn, res)
	}
	return true
}

// misses remembers requests that could not start now. Within a pass the
// profiles only lose resources (starts and reservations take, nothing gives
// back), so a request at least as large as one that failed fails too, and
// need not be tried against every node: in a long queue on a full cluster
// most are. It keeps a few minimal failures.
type misses []*Pending

const maxMisses = 32

func (m *misses) covers(p *Pending) bool {
	for _, f := range *m {
		if dominates(p, f) {
			return true
		}
	}
	return false
}

func (m *misses) add(p *Pending) {
	kept := (*m)[:0]
	for _, f := range *m {
		if !dominates(f, p) { // f is larger than p: p says more
			kept = append(kept, f)
		}
	}
	*m = append(kept, p)
	if len(*m) > maxMisses {
		*m = (*m)[1:]
	}
}

// dominates reports whether a asks for at least what b asks for, in every
// respect, so that a cannot start where b could not.
func dominates(a, b *Pending) bool {
	if a.Nodes < b.Nodes || a.Request.CPUs < b.Request.CPUs || a.Request.Memory < b.Request.Memory {
		return false
	}
	if b.Limit > 0 && a.Limit > 0 && a.Limit < b.Limit || b.Limit == 0 && a.Limit != 0 {
		return false // a shorter interval may fit where a longer did not
	}
	if b.Request.Containers && !a.Request.Containers {
		return false // b needed an engine, a runs anywhere
	}
	if b.Request.Exclusive && !a.Request.Exclusive {
		return false // b needed whole nodes, a may share one
	}
	if a.Request.Project != b.Request.Project {
		return false // nodes a project owns serve one of them only
	}
	if len(b.Request.Fleets) > 0 && !slices.Equal(a.Request.Fleets, b.Request.Fleets) ||
		len(b.Request.NotFleets) > 0 && !slices.Equal(a.Request.NotFleets, b.Request.NotFleets) {
		return false // other nodes
	}
	if narrowsNodes(*b.Request) && !sameNodeFilter(*a.Request, *b.Request) {
		return false // other nodes
	}
	ga, gb := a.Request.GPU, b.Request.GPU
	if gb.Count == 0 {
		return true
	}
	return ga.Count >= gb.Count && ga.Vendor == gb.Vendor && slices.Equal(ga.Names, gb.Names) &&
		ga.MinMemory >= gb.MinMemory && (gb.MaxMemory == 0 || ga.MaxMemory != 0 && ga.MaxMemory <= gb.MaxMemory)
}
