package sched

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Cycle is the scheduler's state between passes: the nodes, the running
// and waiting runs, fairshare usage and its decay, array throttles, and
// what the last pass decided (its reservations), fed with changes as they
// happen and asked for a Plan per pass. Like Schedule it is pure — no I/O,
// no clock, no goroutines: time comes in with each change and pass — but
// it remembers, so that the server and the simulator share one cycle
// instead of each wrapping Schedule its own way.
//
// A pass is full (every waiting run is considered) or incremental (only
// the runs queued or changed since, and those the last pass left holding
// something: its reservations, its first waiting run, its preemptors),
// and an incremental pass decides exactly what a full one would: the
// starts, preemptions and reservations are the same (see Prepare for the
// rule and README.md for why it holds).
//
// A Cycle is not safe for concurrent use: the caller serializes the
// changes, Prepare and Commit; a Round's Compute may run beside them.
type Cycle struct {
	cfg      CycleConfig
	limits   map[LimitKey]Limits // cfg.Limits and the arrays' throttles; replaced, never changed in place
	throttle map[string]int

	nodes  []Node // sorted by name; Free fields kept from the running runs
	nodeAt map[string]int

	// running are the running runs by expected end (those without one
	// last), then ID: a pass's profiles are built from their ends in that
	// order, which needs no sort. runningEnd finds a run in it.
	running    []*Running
	runningEnd map[int64]time.Time

	pending   []*Pending
	pendingAt map[int64]int
	// pendAcct[i] is pending[i]'s account in the usage tree: its fairshare
	// factor, without a lookup.
	pendAcct []*waitingAccount
	// Of the waiting runs: how many have each QOS priority and each tier
	// (the priority factors' scales), and those whose QOS may preempt.
	qosCount, tierCount map[int]int
	preemptors          map[int64]bool

	usage *usageTree

	// gen counts changes. fresh holds, for each run queued or changed
	// since, the change's gen; full, the gen of the last change that calls
	// for a full pass (fullWhy says which). A Round clears what it saw
	// (Commit), not what came after it was prepared.
	gen     uint64
	fresh   map[int64]uint64
	full    uint64
	fullWhy string

	last lastPass
	// scratch is Pass's round, reused pass after pass.
	scratch Round
	// base is the last priority factors' base computed; cfgGen counts the
	// changes of the policy and of the QOS priorities and tiers waiting.
	base   *orderBase
	cfgGen uint64
}

// CycleConfig is the policy a Cycle schedules by.
type CycleConfig struct {
	Policy   Policy
	Weights  *Weights // nil: runs ordered by their own priority
	Shares   *Shares
	Limits   map[LimitKey]Limits
	QOS      map[string]QOS
	Topology *Topology
	Depth    int
	// HalfLife is how fast fairshare usage decays (Slurm's
	// PriorityDecayHalfLife); 0: it never does.
	HalfLife time.Duration
	// Drift is how long an incremental pass may rank runs as the last full
	// pass did, when the order moves with time (multifactor priority:
	// age, expansion factor, aging): 0, not at all — a pass at another
	// time than the last full one is full. With Drift > 0 an incremental
	// pass may decide what a full one would not (a run that rose above a
	// reservation since is not tried) until the next full pass; the server
	// may want that over a full pass after every submission.
	Drift time.Duration
	// StartsOnly: plans hold the starts, the preemptions and the runs
	// that reserve (Reserved), no reasons, estimates or blockers — for a
	// caller that reads nothing else (the simulator), a pass costs less.
	StartsOnly bool
}

// lastPass is what the last committed pass left.
type lastPass struct {
	done   bool
	at     time.Time // its now
	fullAt time.Time // the last full pass's now
	// order are the runs holding a reservation, in priority order, res
	// where and from when (res[k] is order[k]'s); first is the first run
	// that waited. An incremental pass considers them again, with every run
	// whose QOS may preempt (preemptors). reserved indexes order, made when
	// asked for (reservedAt).
	order    []int64
	res      []reservation
	reserved map[int64]int
	first    int64
	// base is the priority factors' base the pass ranked runs by.
	base *orderBase
}

// reservation is where and from when a run holds one: on node, or on
// nodes when it spans several.
type reservation struct {
	at    time.Time
	node  string
	nodes []string
}

func (r reservation) same(o reservation) bool {
	return r.at.Equal(o.at) && r.node == o.node && slices.Equal(r.nodes, o.nodes)
}

// NewCycle makes an empty cycle.
func NewCycle(cfg CycleConfig) *Cycle {
	c := &Cycle{nodeAt: map[string]int{}, runningEnd: map[int64]time.Time{}, pendingAt: map[int64]int{},
		qosCount: map[int]int{}, tierCount: map[int]int{}, preemptors: map[int64]bool{}, fresh: map[int64]uint64{}}
	c.usage = newUsageTree(cfg.HalfLife, cfg.Shares)
	c.Configure(cfg)
	return c
}

// Configure replaces the policy (a reload). The next pass is full.
func (c *Cycle) Configure(cfg CycleConfig) {
	for _, p := range c.pending {
		c.count(p, -1)
	}
	sharesChanged := cfg.Shares != c.cfg.Shares
	c.cfg = cfg
	if sharesChanged {
		c.usage.setShares(cfg.Shares)
	}
	c.usage.halfLife = cfg.HalfLife
	for i, p := range c.pending {
		c.count(p, 1)
		c.pendAcct[i] = c.usage.waitAt[Account{p.Project, p.User}]
	}
	c.setLimits()
	c.cfgGen++
	c.needFull("the policy changed")
}

// setLimits merges the policy's limits and the arrays' throttles.
func (c *Cycle) setLimits() {
	if len(c.throttle) == 0 {
		c.limits = c.cfg.Limits
		return
	}
	c.limits = maps.Clone(c.cfg.Limits)
	if c.limits == nil {
		c.limits = map[LimitKey]Limits{}
	}
	for a, n := range c.throttle {
		c.limits[LimitKey{Scope: ScopeArray, Name: a}] = Limits{Jobs: n}
	}
}

func (c *Cycle) needFull(why string) {
	c.gen++
	c.full, c.fullWhy = c.gen, why
}

// kept tells whether the last pass left run id holding something that an
// incremental pass must see again.
func (c *Cycle) kept(id int64) bool {
	_, reserved := c.reservedAt(id)
	return reserved || c.last.first == id
}

// reservedAt is where in the last pass's reservations run id is.
func (c *Cycle) reservedAt(id int64) (int, bool) {
	l := &c.last
	if len(l.order) <= 32 {
		i := slices.Index(l.order, id) // a few: no index needed
		return i, i >= 0
	}
	if l.reserved == nil {
		l.reserved = make(map[int64]int, len(l.order))
		for k, r := range l.order {
			l.reserved[r] = k
		}
	}
	k, ok := l.reserved[id]
	return k, ok
}

// count adds a waiting run to (1) or takes it from (-1) the priority
// scales and the usage tree's accounts.
func (c *Cycle) count(p *Pending, sign int) {
	q := qosPriorityIn(c.cfg.QOS, p)
	if c.qosCount[q] += sign; c.qosCount[q] <= 0 {
		delete(c.qosCount, q)
		c.cfgGen++ // the scales may change
	} else if c.qosCount[q] == 1 && sign > 0 {
		c.cfgGen++
	}
	if c.tierCount[p.Tier] += sign; c.tierCount[p.Tier] <= 0 {
		delete(c.tierCount, p.Tier)
		c.cfgGen++
	} else if c.tierCount[p.Tier] == 1 && sign > 0 {
		c.cfgGen++
	}
	c.usage.queue(Account{p.Project, p.User}, sign)
	if sign > 0 && len(c.cfg.QOS[p.QOS].Preempt) > 0 {
		c.preemptors[p.RunID] = true
	} else if sign < 0 {
		delete(c.preemptors, p.RunID)
	}
}

// Queue adds a waiting run, or replaces the waiting run of its ID (a
// change the scheduler sees: a hold set or released, a new priority, nice
// or time limit, new jobs after a requeue). The Cycle keeps p: its slices
// must not change afterwards.
func (c *Cycle) Queue(p Pending) {
	c.gen++
	if i, ok := c.pendingAt[p.RunID]; ok {
		if c.kept(p.RunID) {
			c.needFull("a run holding a reservation changed")
		}
		c.count(c.pending[i], -1)
		c.pending[i] = &p
		c.count(&p, 1)
		c.pendAcct[i] = c.usage.waitAt[Account{p.Project, p.User}]
	} else {
		c.pendingAt[p.RunID] = len(c.pending)
		c.pending = append(c.pending, &p)
		c.count(&p, 1)
		c.pendAcct = append(c.pendAcct, c.usage.waitAt[Account{p.Project, p.User}])
	}
	c.fresh[p.RunID] = c.gen
}

// Dequeue takes a waiting run out of the queue without starting it
// (cancelled, ended by its hold).
func (c *Cycle) Dequeue(id int64) {
	if c.unqueue(id) != nil && c.kept(id) {
		c.needFull("a run holding a reservation left")
	}
}

func (c *Cycle) unqueue(id int64) *Pending {
	i, ok := c.pendingAt[id]
	if !ok {
		return nil
	}
	p := c.pending[i]
	c.count(p, -1)
	last := len(c.pending) - 1
	c.pending[i], c.pendAcct[i] = c.pending[last], c.pendAcct[last]
	c.pendingAt[c.pending[i].RunID] = i
	c.pending[last], c.pendAcct[last] = nil, nil
	c.pending, c.pendAcct = c.pending[:last], c.pendAcct[:last]
	delete(c.pendingAt, id)
	delete(c.fresh, id)
	return p
}

// ErrNotWaiting is returned by Start for a run the Cycle does not hold
// waiting.
var ErrNotWaiting = errors.New("sched: cycle: the run does not wait")

// Start records that a waiting run started, as st places it, at now: it
// holds its placements until now plus its time limit (for ever without
// one), as planning sees it.
func (c *Cycle) Start(st Start, now time.Time) error {
	i, ok := c.pendingAt[st.RunID]
	if !ok {
		return fmt.Errorf("%w: run %d", ErrNotWaiting, st.RunID)
	}
	p := c.pending[i]
	c.Run(Running{RunID: p.RunID, Placements: st.Placements, End: end(now, p.Limit), User: p.User, Project: p.Project,
		QOS: p.QOS, Array: p.Array, Priority: int64(p.Priority), Start: now})
	return nil
}

// Run adds a running run, or replaces the running run of its ID (its
// placements or expected end changed). A waiting run of that ID leaves
// the queue: Run is Start with the caller's own Running. The Cycle keeps
// r: its slices must not change afterwards.
func (c *Cycle) Run(r Running) {
	c.gen++
	if c.unqueue(r.RunID) != nil && c.kept(r.RunID) {
		c.needFull("a run holding a reservation started outside a plan")
	}
	if old := c.unrun(r.RunID); old != nil {
		c.needFull("a running run changed")
	}
	i, _ := slices.BinarySearchFunc(c.running, &r, byEnd)
	c.running = slices.Insert(c.running, i, &r)
	c.runningEnd[r.RunID] = r.End
	c.charge(&r, 1)
}

// byEnd orders running runs by expected end, those without one last, then
// by ID.
func byEnd(a, b *Running) int {
	switch az, bz := a.End.IsZero(), b.End.IsZero(); {
	case az && !bz:
		return 1
	case bz && !az:
		return -1
	case !az:
		if c := a.End.Compare(b.End); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.RunID, b.RunID)
}

// runningIndex is where running run id is in c.running.
func (c *Cycle) runningIndex(id int64) (int, bool) {
	e, ok := c.runningEnd[id]
	if !ok {
		return 0, false
	}
	return slices.BinarySearchFunc(c.running, &Running{RunID: id, End: e}, byEnd)
}

// unrun takes running run id out, giving back what it holds.
func (c *Cycle) unrun(id int64) *Running {
	i, ok := c.runningIndex(id)
	if !ok {
		return nil
	}
	r := c.running[i]
	c.charge(r, -1)
	c.running = slices.Delete(c.running, i, i+1)
	delete(c.runningEnd, id)
	return r
}

// Stopping records that a running run is being stopped and will be gone
// by by (its stop signal's grace period): the run counts as ending
// (preemption takes it for free) and is expected to end by then.
func (c *Cycle) Stopping(id int64, by time.Time) {
	old := c.unrun(id)
	if old == nil {
		return
	}
	r := *old
	r.Ending = true
	if r.End.IsZero() || by.Before(r.End) {
		r.End = by
	}
	c.Run(r)
	c.needFull("a running run is being stopped")
}

// End records that a running run gave its resources back.
func (c *Cycle) End(id int64) {
	if c.unrun(id) != nil {
		c.needFull("resources were freed")
	}
}

// charge takes (1) or gives back (-1) what r holds on the nodes.
func (c *Cycle) charge(r *Running, sign int) {
	for _, pl := range r.Placements {
		i, ok := c.nodeAt[pl.Node]
		if !ok {
			continue // counted when the node comes (SetNode)
		}
		n := &c.nodes[i]
		n.FreeCPUs -= sign * pl.CPUs
		n.FreeMemory -= Bytes(sign) * pl.Memory
		if len(pl.GPUs) > 0 {
			// New slices: a Round's copy of the nodes shares the old ones.
			if sign > 0 {
				n.FreeGPUs = without(n.FreeGPUs, pl.GPUs)
			} else {
				n.FreeGPUs = union(n.FreeGPUs, pl.GPUs)
			}
		}
	}
}

// SetNode adds a node or replaces the node of its name. Its Free fields
// are ignored: the Cycle counts them from the running runs.
func (c *Cycle) SetNode(n Node) {
	n.FreeCPUs, n.FreeMemory, n.FreeGPUs = n.CPUs, n.Memory, nil
	for _, g := range n.GPUs {
		n.FreeGPUs = append(n.FreeGPUs, g.Index)
	}
	slices.Sort(n.FreeGPUs)
	if i, ok := c.nodeAt[n.Name]; ok {
		// What the running runs hold on it is what they held before: no
		// walk over them (a cluster's nodes connecting one by one would
		// make it quadratic).
		old := &c.nodes[i]
		n.FreeCPUs -= old.CPUs - old.FreeCPUs
		n.FreeMemory -= old.Memory - old.FreeMemory
		var used []int
		for _, g := range old.GPUs {
			if !slices.Contains(old.FreeGPUs, g.Index) {
				used = append(used, g.Index)
			}
		}
		if len(used) > 0 {
			n.FreeGPUs = without(n.FreeGPUs, used)
		}
		c.nodes[i] = n
		c.needFull("a node came or changed")
		return
	}
	i, _ := slices.BinarySearchFunc(c.nodes, n.Name, func(m Node, name string) int { return strings.Compare(m.Name, name) })
	c.nodes = slices.Insert(c.nodes, i, n)
	for k := i; k < len(c.nodes); k++ {
		c.nodeAt[c.nodes[k].Name] = k
	}
	for _, r := range c.running {
		for _, pl := range r.Placements {
			if pl.Node == n.Name {
				c.charge(&Running{Placements: []Placement{pl}}, 1)
			}
		}
	}
	c.needFull("a node came or changed")
}

// RemoveNode forgets a node.
func (c *Cycle) RemoveNode(name string) {
	i, ok := c.nodeAt[name]
	if !ok {
		return
	}
	c.nodes = slices.Delete(c.nodes, i, i+1)
	delete(c.nodeAt, name)
	for k := i; k < len(c.nodes); k++ {
		c.nodeAt[c.nodes[k].Name] = k
	}
	c.needFull("a node left")
}

// AddUsage records cpuSeconds used by an account, at time at (a job's
// end): fairshare's usage, decayed with the half-life from then on.
func (c *Cycle) AddUsage(a Account, cpuSeconds float64, at time.Time) {
	c.usage.add(a, cpuSeconds, at)
	if c.cfg.Weights != nil {
		c.needFull("usage changed")
	}
}

// SetArrayLimit sets how many tasks of an array may run at once (its
// throttle, a ScopeArray limit on the runs whose Array is array); 0 lifts
// it.
func (c *Cycle) SetArrayLimit(array string, tasks int) {
	if c.throttle == nil {
		c.throttle = map[string]int{}
	}
	if tasks <= 0 {
		delete(c.throttle, array)
	} else {
		c.throttle[array] = tasks
	}
	c.setLimits()
	c.needFull("an array's throttle changed")
}

// Rescan makes the next pass full: for a caller that did not apply all of
// a plan (a start it dropped leaves its room free) and as a safety net.
func (c *Cycle) Rescan() { c.needFull("asked for") }

// Waiting is how many runs wait; Holding how many run.
func (c *Cycle) Waiting() int { return len(c.pending) }

// Holding is how many runs hold resources.
func (c *Cycle) Holding() int { return len(c.running) }

// Reserved are the runs holding a reservation after the last pass, in
// priority order.
func (c *Cycle) Reserved() []int64 { return slices.Clone(c.last.order) }

// Usage is every account's usage, decayed to now.
func (c *Cycle) Usage(now time.Time) Usage { return c.usage.usage(now) }

// Snapshot is the whole state as one full pass sees it: Schedule of it
// decides what Pass would. Its Usage is scaled by a factor common to all
// accounts (fairshare reads only shares of the total); Usage has the true
// values.
func (c *Cycle) Snapshot(now time.Time) Snapshot {
	s := c.snapshot()
	s.Nodes = slices.Clone(c.nodes)
	for _, r := range c.running {
		s.Running = append(s.Running, *r)
	}
	for _, p := range c.pending {
		s.Pending = append(s.Pending, *p)
	}
	s.Usage = maps.Clone(c.usage.u)
	s.Shares = c.usage.shares
	return s
}

// snapshot is the policy part of a snapshot.
func (c *Cycle) snapshot() Snapshot {
	return Snapshot{Policy: c.cfg.Policy, Weights: c.cfg.Weights, Depth: c.cfg.Depth, Limits: c.limits, QOS: c.cfg.QOS,
		Topology: c.cfg.Topology}
}

// Round is one pass, prepared by a Cycle (Prepare), computed on its own
// copy of what it needs (Compute: it may run while the Cycle takes more
// changes), and committed (Commit).
type Round struct {
	now     time.Time
	gen     uint64
	full    bool
	why     string
	snap    Snapshot   // the cluster and the policy; Pending filled by Compute
	running []*Running // what Compute copies into snap
	cands   []*Pending // an incremental pass's runs to consider
	all     []*Pending // every waiting run: a full pass's, or the fallback's
	// candFair and allFair are their fairshare factors (under Weights).
	candFair, allFair []float64
	base              *orderBase
	rank              ranking
	keep              map[int64]reservation // reservations an incremental pass must leave as they were
	first             int64                 // the last pass's first waiting run, if it still waits: it must still wait
	pass              *pass
	// reuse is a pass whose memory Compute reuses (Pass's round).
	reuse *pass
	plain bool // CycleConfig.StartsOnly
}

// Prepare copies what a pass at now needs. The pass is incremental when
// no change since the last full pass calls for a full one (resources
// freed or given back, a node come or changed, a run holding a
// reservation changed or gone, a limit, the policy or the usage changed,
// Rescan), the order of the runs cannot have moved (it does not depend
// on time, or the clock has not moved since the last full pass, or not
// by Drift), and Depth is not set. It then considers the runs queued or
// changed since the last pass, those holding a reservation, the first run
// that waited, and every run whose QOS may preempt; Compute falls back to
// a full pass if the reservations of the last pass do not come out the
// same.
func (c *Cycle) Prepare(now time.Time) *Round {
	r := &Round{}
	c.prepare(now, r)
	return r
}

func (c *Cycle) prepare(now time.Time, r *Round) {
	*r = Round{running: r.running[:0], cands: r.cands[:0], all: r.all[:0], candFair: r.candFair[:0], allFair: r.allFair[:0],
		snap: Snapshot{Nodes: r.snap.Nodes[:0], Running: r.snap.Running[:0], Pending: r.snap.Pending[:0]}, reuse: r.reuse}
	r.now, r.gen, r.plain = now, c.gen, c.cfg.StartsOnly
	// The order moves with time under multifactor priority (age,
	// expansion factor, aging).
	timed := c.cfg.Weights != nil
	switch {
	case c.full != 0:
		r.why = c.fullWhy
	case !c.last.done:
		r.why = "the first pass"
	case now.Before(c.last.at):
		r.why = "the clock went back"
	case c.cfg.Depth > 0:
		r.why = "a depth is set"
	case timed && c.cfg.Drift <= 0 && !now.Equal(c.last.fullAt):
		r.why = "the order moved with time"
	case timed && c.cfg.Drift > 0 && now.Sub(c.last.fullAt) >= c.cfg.Drift:
		r.why = "the order drifted"
	}
	if c.cfg.Weights != nil {
		r.base = c.orderBase()
		if r.why == "" && !r.base.ranksAs(c.last.base) {
			// A run queued or gone changed the fairshare tree's siblings,
			// or the largest QOS or tier: the others' factors moved.
			r.why = "the priority factors' scales changed"
		}
	}
	r.full = r.why != ""
	snap := c.snapshot()
	snap.Nodes = append(r.snap.Nodes, c.nodes...)
	snap.Running, snap.Pending = r.snap.Running, r.snap.Pending
	r.snap = snap
	r.running = append(r.running, c.running...)
	r.all = append(r.all, c.pending...)
	weights := c.cfg.Weights != nil
	if weights {
		for _, w := range c.pendAcct {
			r.allFair = append(r.allFair, w.factor)
		}
	}
	if !r.full {
		in := make(map[int64]bool, len(c.fresh)+len(c.last.order)+1)
		add := func(id int64) {
			if i, ok := c.pendingAt[id]; ok && !in[id] {
				in[id] = true
				r.cands = append(r.cands, c.pending[i])
				if weights {
					r.candFair = append(r.candFair, c.pendAcct[i].factor)
				}
			}
		}
		for id := range c.fresh {
			add(id)
		}
		r.keep = make(map[int64]reservation, len(c.last.order))
		for k, id := range c.last.order {
			if _, ok := c.pendingAt[id]; ok {
				r.keep[id] = c.last.res[k]
			}
			add(id)
		}
		if _, ok := c.pendingAt[c.last.first]; ok {
			r.first = c.last.first
		}
		add(c.last.first)
		// A run that may preempt finds victims among runs started since
		// it was last considered: every one is considered again.
		for id := range c.preemptors {
			add(id)
		}
	}
}

// orderBase is the priority factors' base over the whole queue: the
// scales of the QOS and tier factors, every waiting account's fairshare.
// It is computed again only when the usage tree, the queue's accounts or
// the policy changed.
func (c *Cycle) orderBase() *orderBase {
	if b := c.base; b != nil && b.version == c.usage.version && b.gen == c.cfgGen {
		return b
	}
	b := &orderBase{fair: make([]accountFactor, 0, len(c.usage.waiting)), version: c.usage.version, gen: c.cfgGen}
	for _, q := range c.cfg.QOS {
		b.maxQOS = max(b.maxQOS, q.Priority)
	}
	for q := range c.qosCount {
		b.maxQOS = max(b.maxQOS, q)
	}
	for t := range c.tierCount {
		b.maxTier = max(b.maxTier, t)
	}
	fs := c.usage.fairshare()
	for _, w := range c.usage.waiting {
		w.factor = fs.computeWith(w.a, w.usage)
		b.fair = append(b.fair, accountFactor{w, w.factor})
	}
	c.base = b
	return b
}

// ranksAs tells whether every run of an account in was gets the same
// factors under b as under was. b must be the base computed last (its
// factors are the accounts' own).
func (b *orderBase) ranksAs(was *orderBase) bool {
	if b == was {
		return true
	}
	if was == nil || b.maxQOS != was.maxQOS || b.maxTier != was.maxTier {
		return false
	}
	for _, e := range was.fair {
		if e.w.n > 0 && e.w.factor != e.factor {
			return false // an account that still waits (gone ones: n is 0)
		}
	}
	return true
}

// accountFactor is an account's fairshare factor in one base.
type accountFactor struct {
	w      *waitingAccount
	factor float64
}

// Full tells whether the round is a full pass, and why ("" when it is
// incremental). Compute may make an incremental round full.
func (r *Round) Full() (bool, string) { return r.full, r.why }

// Compute decides the pass: Schedule over the round's copy, its waiting
// runs as Prepare chose them. It reads nothing of the Cycle.
func (r *Round) Compute() Plan {
	if !r.full {
		r.fill(r.cands, r.candFair)
		p := schedule(r.reuse, &r.snap, r.now, r.ranking(), r.options())
		if r.same(p) {
			r.pass = p
			return p.plan
		}
		r.full, r.why = true, "a reservation moved"
	}
	r.fill(r.all, r.allFair)
	r.pass = schedule(r.reuse, &r.snap, r.now, r.ranking(), r.options())
	return r.pass.plan
}

// options are what the round asks of its pass.
func (r *Round) options() passOptions {
	return passOptions{record: true, plain: r.plain, track: r.first}
}

// ranking is what the round gives the pass of its runs' priority factors:
// nil without Weights.
func (r *Round) ranking() *ranking {
	if r.base == nil {
		return nil
	}
	return &r.rank
}

// fill copies the round's running runs and the given waiting runs, with
// their fairshare factors, into its snapshot.
func (r *Round) fill(pending []*Pending, fair []float64) {
	if r.base != nil {
		r.rank = ranking{maxQOS: r.base.maxQOS, maxTier: r.base.maxTier, fairAt: fair}
	}
	r.snap.Running = r.snap.Running[:0]
	for _, x := range r.running {
		r.snap.Running = append(r.snap.Running, *x)
	}
	r.snap.Pending = r.snap.Pending[:0]
	for _, x := range pending {
		r.snap.Pending = append(r.snap.Pending, *x)
	}
}

// same tells whether an incremental pass left every reservation of the
// last pass where it was, and its first waiting run waiting (a start since
// may have put it behind a limit): then no run it did not consider could
// do otherwise than it did in the last pass (README.md).
func (r *Round) same(p *pass) bool {
	if r.first != 0 && !p.trackWaited {
		return false
	}
	kept := 0
	for k, id := range p.plan.Reserved {
		res, ok := r.keep[id]
		if !ok {
			continue
		}
		if !p.reservedOn[k].same(res) {
			return false
		}
		kept++
	}
	return kept == len(r.keep)
}

// Commit records a computed round's outcome: its reservations, first
// waiting run and preemptors are what the next incremental pass considers
// again. The changes the round saw are cleared, not those that came after
// Prepare.
func (c *Cycle) Commit(r *Round) {
	if r.pass == nil {
		return // not computed
	}
	for id, g := range c.fresh {
		if g <= r.gen {
			delete(c.fresh, id)
		}
	}
	if c.full != 0 && c.full <= r.gen {
		c.full, c.fullWhy = 0, ""
	}
	p := r.pass
	c.last.done, c.last.at = true, r.now
	if r.full {
		c.last.fullAt = r.now
	}
	c.last.order = append(c.last.order[:0], p.plan.Reserved...)
	c.last.res = append(c.last.res[:0], p.reservedOn...)
	c.last.reserved = nil
	c.last.base = r.base
	c.last.first = 0
	if len(p.first) > 0 {
		c.last.first = p.first[0]
	}
}

// Pass is Prepare, Compute and Commit at once, for a caller that does
// nothing in between (the simulator): one pass at now. It reuses the
// memory of the passes before it, its plan's included: the plan holds
// until the next Pass.
func (c *Cycle) Pass(now time.Time) Plan {
	r := &c.scratch
	c.prepare(now, r)
	if r.reuse == nil {
		r.reuse = &pass{mem: passMemory{reusePlan: true}}
	}
	plan := r.Compute()
	c.Commit(r)
	r.pass = nil
	return plan
}

// qosPriorityIn is a run's QOS priority under a QOS table.
func qosPriorityIn(qos map[string]QOS, p *Pending) int {
	if q, ok := qos[p.QOS]; ok {
		return q.Priority
	}
	return p.QOSPriority
}
