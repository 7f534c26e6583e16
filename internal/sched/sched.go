package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bytes is an amount of memory.
type Bytes int64

// GPU is one device of a node.
type GPU struct {
	Index  int
	Vendor string
	Name   string
	Memory Bytes
}

// Node is a host as the scheduler sees it: what it has and what is free.
type Node struct {
	Name       string
	Fleet      string // the fleet (partition) it belongs to; "" none
	Online     bool
	CPUs       int
	Memory     Bytes
	GPUs       []GPU
	FreeCPUs   int
	FreeMemory Bytes
	FreeGPUs   []int // indices into GPUs' Index values that no job holds
	// Blocks splits the node in that many equal shares of CPUs, memory and
	// GPUs (dstack's blocks); a job takes whole blocks. 0 or 1: not split.
	Blocks int
	// Containers: the node has a container engine.
	Containers bool
}

// GPURequest is what a run needs of GPUs on each node.
type GPURequest struct {
	Count     int
	Vendor    string   // "" any
	Names     []string // any of these models; empty: any model
	MinMemory Bytes    // per GPU
	MaxMemory Bytes    // 0: no upper bound
}

// Request is what each job of a run needs on its node.
type Request struct {
	CPUs   int
	Memory Bytes
	GPU    GPURequest
	// Fleets are the fleets (partitions) the run may use; empty: any node.
	Fleets []string
	// NotFleets are fleets the run may not use (their time limit is
	// shorter than its own), when it names none.
	NotFleets []string
	// Exclusive jobs take their whole node, whatever they ask for.
	Exclusive bool
	// Containers: the run has an image and needs a node with an engine.
	Containers bool
}

// inFleet tells whether r may use node n.
func (r Request) inFleet(n *Node) bool {
	if r.Containers && !n.Containers {
		return false
	}
	if len(r.Fleets) == 0 {
		return len(r.NotFleets) == 0 || !slices.Contains(r.NotFleets, n.Fleet)
	}
	return slices.Contains(r.Fleets, n.Fleet)
}

// Pending is a run waiting to start.
type Pending struct {
	RunID       int64
	Priority    int
	SubmittedAt time.Time
	Nodes       int     // how many jobs, each on its own node
	JobIDs      []int64 // one per node, in job order
	Request     Request
	// Limit is the run's time limit (its estimate, for reservations);
	// 0: none, the run may hold what it takes for ever.
	Limit time.Duration
	// User, Project, QOS, QOSPriority, Tier and Nice feed the multifactor
	// priority (see Priorities); Priority is the run's own 0..100. User,
	// Project and QOS also say which limits apply (Snapshot.Limits) and
	// whom the run may preempt (Snapshot.QOS).
	User        string
	Project     string
	QOS         string
	QOSPriority int // used when Snapshot.QOS does not define QOS
	Tier        int // the highest priority tier of the fleets it may use
	Nice        int64
	// Groups, when set, make the run heterogeneous (Slurm's hetjob): each
	// group's jobs need its own request, on nodes of their own, all groups
	// at once or none. Nodes is then the total and Request the first
	// group's (for the size factor); JobIDs go group by group.
	Groups []Group
	// Array names the array the run is a task of ("": none), for the
	// array's throttle (a ScopeArray limit).
	Array string
	// Hold, when set, is why the run is not eligible yet (Slurm's
	// Dependency, BeginTime, JobHeldUser, ...): it waits with that reason,
	// neither starts nor reserves, and holds no one up.
	Hold string
}

// Group is one component of a heterogeneous run.
type Group struct {
	Nodes   int
	Request Request
}

// Running is a run that holds resources now.
type Running struct {
	RunID      int64
	Placements []Placement
	// End is when the run is expected to give its resources back (start +
	// time limit); zero: never, as far as planning knows.
	End time.Time
	// User, Project and QOS count its resources against limits and say
	// whether a higher QOS may preempt it.
	User    string
	Project string
	QOS     string
	Array   string
	// Priority ranks victims for preemption (lower goes first); Start is
	// when it started (run time lost); Ending: it is being stopped already.
	Priority int64
	Start    time.Time
	Ending   bool
}

// Policy is how runs that cannot start now are treated.
type Policy int

const (
	// EASY backfill: the highest-priority run that cannot start gets a
	// reservation; a lower run starts now only if it does not delay it.
	EASY Policy = iota
	// FCFS: no run starts while a higher-priority run waits.
	FCFS
	// Conservative backfill: every run that cannot start gets a
	// reservation; a run starts now only if it delays none of them.
	Conservative
	// Berth is backfill with several reservations in multifactor priority
	// order, with aging: the first BerthReservations runs that cannot start
	// get a reservation, in priority order, and a run's priority grows by
	// BerthAging points for every hour it has waited, without cap. The expansion factor and fairshare let
	// short runs and light users go first, the reservations keep later runs
	// from pushing back the ones ahead, and the aging bounds how long any run
	// can be overtaken: on the archive's traces no run waits longer than
	// under EASY (docs/simulator.md).
	Berth
)

// BerthAging is the priority a run gains per hour waited under Berth: as
// much as the whole fairshare or expansion-factor range (10,000 with the
// default weights) in a little over three hours. Tuned on the archive's
// traces: 1,000 or 2,000 let whole-machine runs of heavy users wait
// longer than under EASY, 5,000 or more give back most of the slowdown
// gained (docs/simulator.md).
const BerthAging = 3000

// BerthReservations is how many waiting runs hold a reservation under
// Berth, the first in priority order. Every one costs a search of the
// profiles (earliest), which on a large cluster is most of a pass; 16 is
// the fewest that keeps every run's wait within EASY's on the archive's
// traces with BerthAging (8 let KTH-SP2's longest wait exceed EASY's by
// 431 s; unbounded, a pass over 1,000 pending runs took seconds).
const BerthReservations = 16

// Snapshot is the cluster as one scheduling pass sees it. Node's Free*
// fields already exclude what Running holds. Schedule does not modify it.
type Snapshot struct {
	Nodes   []Node
	Running []Running
	Pending []Pending
	Policy  Policy
	// Weights, when set, order runs by multifactor priority (Priorities);
	// nil orders by the runs' own Priority field alone.
	Weights *Weights
	Usage   Usage
	Shares  *Shares // the fairshare tree; nil: one share each
	// Depth bounds how many pending runs a pass considers, in priority
	// order (Slurm's bf_max_job_test); the rest wait with reason Priority.
	// 0: all of them, the default.
	Depth int
	// Limits bound what users, projects and QOS may hold at once.
	Limits map[LimitKey]Limits
	// QOS defines the qualities of service runs may name.
	QOS map[string]QOS
	// Topology is the switch tree multi-node runs are placed on (nil: flat).
	Topology *Topology
}

// Placement puts one job on one node.
type Placement struct {
	JobID  int64
	Node   string
	CPUs   int
	Memory Bytes
	GPUs   []int
}

// Start is a run that starts now, with one placement per job.
type Start struct {
	RunID      int64
	Placements []Placement
}

// Plan is the outcome of one pass: what starts, and why the rest waits.
type Plan struct {
	Starts  []Start
	Reasons map[int64]string // run ID -> Slurm-style pending reason
	// Estimates are the expected start times of runs that wait (absent:
	// unknown, e.g. behind runs without a time limit).
	Estimates map[int64]time.Time
	// Reserved are the waiting runs that hold a reservation, in priority
	// order.
	Reserved []int64
	// BlockedBy are, for a waiting run, the runs it waits for: for a run
	// with a reservation, those that hold or have reserved resources on its
	// reserved nodes; for a run that waits behind a higher one, that run;
	// for a run that preempts, its victims.
	BlockedBy map[int64][]int64
	// Preemptions are the running runs to stop for higher-QOS runs.
	Preemptions []Preemption
}

// preempt records the victims chosen for pd: those not ending yet are to be
// stopped, all of them are what pd waits for.
func (plan *Plan) preempt(s Snapshot, pd *Pending, vs []*Running) {
	var by []int64
	for _, v := range vs {
		by = append(by, v.RunID)
		if v.Ending {
			continue
		}
		mode := s.QOS[pd.QOS].Mode
		if q, ok := s.QOS[v.QOS]; ok {
			mode = q.Mode
		}
		plan.Preemptions = append(plan.Preemptions, Preemption{Victim: v.RunID, By: pd.RunID, Mode: mode})
	}
	slices.Sort(by)
	plan.BlockedBy[pd.RunID] = by
}

// Pending reasons, as Slurm names them.
const (
	ReasonResources = "Resources"       // the highest-priority waiting run: not enough free now
	ReasonPriority  = "Priority"        // a higher-priority run waits, or holds a reservation this one would delay
	ReasonNoNode    = "ReqNodeNotAvail" // no node could ever hold it
)

// Schedule decides one pass. Runs are taken in priority order (higher
// first, then older, then lower ID). Each starts now if it fits, for its
// time limit, in the nodes' profiles — what running runs hold until their
// expected end, and what higher runs have reserved. One that does not fit
// waits; under EASY the first of those, under Conservative every one, gets
// a reservation at the earliest time it fits, which later runs then cannot
// use; under FCFS nothing starts after the first that waits.
func Schedule(s Snapshot, now time.Time) Plan {
	// Most pending runs get a reason and a blocker: sized once, the maps do
	// not grow pass after pass.
	plan := Plan{Reasons: make(map[int64]string, len(s.Pending)), Estimates: map[int64]time.Time{}, BlockedBy: make(map[int64][]int64, len(s.Pending))}
	holders := map[string][]int64{} // node -> runs holding or reserving on it
	profiles := make([]*profile, 0, len(s.Nodes))
	byName := map[string]*profile{}
	for i := range s.Nodes {
		if !s.Nodes[i].Online {
			continue
		}
		p := newProfile(&s.Nodes[i], now)
		profiles = append(profiles, p)
		byName[p.node.Name] = p
	}
	for _, r := range s.Running {
		for _, pl := range r.Placements {
			holders[pl.Node] = append(holders[pl.Node], r.RunID)
		}
		if r.End.IsZero() {
			continue // holds its resources for as long as planning can see
		}
		at := r.End
		if !at.After(now) {
			at = now.Add(time.Nanosecond) // overdue: expected to end any moment
		}
		for _, pl := range r.Placements {
			if p, ok := byName[pl.Node]; ok {
				p.ends = append(p.ends, release{at, pl.CPUs, pl.Memory, pl.GPUs})
			}
		}
	}
	for _, p := range profiles {
		p.releaseAll()
	}
	// open are the nodes with a CPU free now: within a pass they only lose
	// resources, so a node that fills up leaves the list for good — lazily:
	// placeAt's first test skips full nodes, and the list is compacted once
	// half of it is full (one scan per fill would cost a pass dearly).
	open := slices.DeleteFunc(slices.Clone(profiles), func(p *profile) bool { return p.segs[0].cpus <= 0 })
	full := 0
	nodeByName := make(map[string]*Node, len(s.Nodes))
	for i := range s.Nodes {
		nodeByName[s.Nodes[i].Name] = &s.Nodes[i]
	}
	acct := newAccounts(&s, nodeByName)
	pre := newPreemptor(&s, now, profiles)
	waiting := false
	var first []int64 // the first run that waits: what later ones wait behind
	var failed misses
	order := priorityOrder(s, now)
	for k := 0; k < len(order); k++ {
		pd := &s.Pending[order[k]]
		if s.Depth > 0 && k >= s.Depth {
			plan.Reasons[pd.RunID] = ReasonPriority
			plan.BlockedBy[pd.RunID] = first
			continue
		}
		if pd.Hold != "" {
			plan.Reasons[pd.RunID] = pd.Hold
			continue
		}
		if len(pd.Groups) > 0 && !fitsGroups(s.Nodes, pd.Groups) || len(pd.Groups) == 0 && !Fits(s.Nodes, pd.Request, pd.Nodes, false) {
			plan.Reasons[pd.RunID] = ReasonNoNode
			continue
		}
		if why := acct.blocked(pd); why != "" {
			// Held by a limit: it neither starts nor reserves, and runs
			// behind it are not held up by it (Slurm does the same).
			plan.Reasons[pd.RunID] = why
			continue
		}
		if s.Policy == FCFS && waiting {
			plan.Reasons[pd.RunID] = ReasonPriority
			plan.BlockedBy[pd.RunID] = first
			continue
		}
		if len(pd.Groups) == 0 && failed.covers(pd) {
			// As large as a run that could not start: it cannot either.
		} else if picks, ok := placeAt(open, now, pd, s.Topology); ok {
			st := Start{RunID: pd.RunID}
			for k, pk := range picks {
				pk.p.take(now, end(now, pd.Limit), pk.req.CPUs, pk.req.Memory, pk.gpus)
				st.Placements = append(st.Placements, Placement{JobID: jobID(pd, k), Node: pk.p.node.Name,
					CPUs: pk.req.CPUs, Memory: pk.req.Memory, GPUs: pk.gpus})
			}
			plan.Starts = append(plan.Starts, st)
			for _, pk := range picks {
				holders[pk.p.node.Name] = append(holders[pk.p.node.Name], pd.RunID)
			}
			if acct != nil {
				acct.charge(keysOf(pd.User, pd.Project, pd.QOS, pd.Array), startTRES(st, nodeByName), 1)
			}
			for _, pk := range picks {
				if pk.p.segs[0].cpus <= 0 {
					full++
				}
			}
			if full > len(open)/2 {
				open = slices.DeleteFunc(open, func(p *profile) bool { return p.segs[0].cpus <= 0 })
				full = 0
			}
			continue
		} else if len(pd.Groups) == 0 {
			failed.add(pd)
		}
		preempting := false
		if vs, ok := pre.victims(pd); ok {
			plan.preempt(s, pd, vs)
			preempting = true
		}
		reason := ReasonPriority
		if !waiting {
			reason = ReasonResources
		}
		plan.Reasons[pd.RunID] = reason
		// A run that preempts waits for its victims to leave, not for a
		// reservation: it starts in the pass after they have gone.
		reserve := (s.Policy == Conservative || s.Policy == Berth && len(plan.Reserved) < BerthReservations || !waiting) && !preempting
		switch {
		case preempting:
		case waiting:
			plan.BlockedBy[pd.RunID] = first
		}
		if !waiting {
			first = []int64{pd.RunID}
		}
		waiting = true
		if !reserve {
			continue
		}
		at, picks, ok := earliest(profiles, now, pd, s.Topology)
		if !ok {
			continue // behind runs that never end: no estimate
		}
		plan.Estimates[pd.RunID] = at
		plan.Reserved = append(plan.Reserved, pd.RunID)
		var by []int64
		for _, pk := range picks {
			pk.p.take(at, end(at, pd.Limit), pk.req.CPUs, pk.req.Memory, pk.gpus)
			by = append(by, holders[pk.p.node.Name]...)
			holders[pk.p.node.Name] = append(holders[pk.p.node.Name], pd.RunID)
		}
		slices.Sort(by)
		plan.BlockedBy[pd.RunID] = slices.Compact(by)
	}
	return plan
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
	if len(b.Request.Fleets) > 0 && !slices.Equal(a.Request.Fleets, b.Request.Fleets) ||
		len(b.Request.NotFleets) > 0 && !slices.Equal(a.Request.NotFleets, b.Request.NotFleets) {
		return false // other nodes
	}
	ga, gb := a.Request.GPU, b.Request.GPU
	if gb.Count == 0 {
		return true
	}
	return ga.Count >= gb.Count && ga.Vendor == gb.Vendor && slices.Equal(ga.Names, gb.Names) &&
		ga.MinMemory >= gb.MinMemory && (gb.MaxMemory == 0 || ga.MaxMemory != 0 && ga.MaxMemory <= gb.MaxMemory)
}

// priorityOrder is the order runs are considered in: by multifactor
// priority when the snapshot has weights, else by their own priority; then
// older first, then lower ID.
func priorityOrder(s Snapshot, now time.Time) []int {
	pending := s.Pending
	key := make([]int64, len(pending))
	if s.Weights != nil && len(pending) > 1 { // one run needs no ranking, and the factors cost a walk over all usage
		pr := newPrioritizer(&s, now)
		for i := range pending {
			key[i] = pr.factors(&pending[i]).Total
		}
	} else {
		for i, p := range pending {
			key[i] = int64(p.Priority)
		}
	}
	order := make([]int, len(pending))
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

func jobID(p *Pending, k int) int64 {
	if k < len(p.JobIDs) {
		return p.JobIDs[k]
	}
	return 0
}

type pick struct {
	p    *profile
	req  Request // what the job takes there (whole blocks, whole node)
	gpus []int
}

// placeAt finds distinct nodes for every job of pd over [at, at+limit): the
// first that fit, or on a switch tree those under the fewest switches.
func placeAt(profiles []*profile, at time.Time, pd *Pending, topo *Topology) ([]pick, bool) {
	if len(pd.Groups) > 0 {
		return placeGroups(profiles, at, pd)
	}
	want := max(pd.Nodes, 1)
	to := end(at, pd.Limit)
	var picks []pick
	now := len(profiles) > 0 && at.Equal(profiles[0].segs[0].at)
	collect := topo != nil && want > 1
	exclusive := pd.Request.Exclusive
	for _, p := range profiles {
		r := &pd.Request
		if exclusive || p.node.Blocks > 1 {
			eff, ok := pd.Request.on(p.node, pd.Nodes)
			if !ok {
				continue
			}
			r = &eff
		}
		// Starting now needs the first segment to hold it: the cheap test
		// that rejects most nodes of a busy cluster.
		if now && (p.segs[0].cpus < r.CPUs || p.segs[0].mem < r.Memory || len(p.segs[0].gpus) < r.GPU.Count) {
			continue
		}
		if g, ok := p.fits(at, to, *r); ok {
			picks = append(picks, pick{p: p, req: *r, gpus: g})
			if len(picks) == want && !collect {
				return picks, true
			}
		}
	}
	if collect && len(picks) >= want {
		return topo.choose(picks, want), true
	}
	return nil, false
}

// placeGroups places a heterogeneous run: each group's jobs on nodes no
// other job of the run uses, first fit, every group or none.
func placeGroups(profiles []*profile, at time.Time, pd *Pending) ([]pick, bool) {
	to := end(at, pd.Limit)
	used := map[*profile]bool{}
	var picks []pick
	for _, g := range pd.Groups {
		n := 0
		for _, p := range profiles {
			if n == max(g.Nodes, 1) {
				break
			}
			if used[p] {
				continue
			}
			r, ok := g.Request.on(p.node, pd.Nodes)
			if !ok {
				continue
			}
			if gpus, ok := p.fits(at, to, r); ok {
				picks = append(picks, pick{p: p, req: r, gpus: gpus})
				used[p] = true
				n++
			}
		}
		if n < max(g.Nodes, 1) {
			return nil, false
		}
	}
	return picks, true
}

// fitsGroups tells whether every group of a heterogeneous run could ever
// find its nodes (each group alone: a necessary condition).
func fitsGroups(nodes []Node, groups []Group) bool {
	for _, g := range groups {
		if !Fits(nodes, g.Request, g.Nodes, false) {
			return false
		}
	}
	return true
}

// earliest is the first time at which every job of pd fits: a profile only
// changes at its segments' starts, so those are the only candidates.
func earliest(profiles []*profile, now time.Time, pd *Pending, topo *Topology) (time.Time, []pick, bool) {
	if len(profiles) == 1 && len(pd.Groups) == 0 && pd.Nodes <= 1 && pd.Request.GPU.Count == 0 &&
		!pd.Request.Exclusive && profiles[0].node.Blocks <= 1 {
		return earliestOnOne(profiles[0], now, pd)
	}
	if len(pd.Groups) == 0 && pd.Nodes <= 1 {
		return earliestOneJob(profiles, now, pd)
	}
	var times []time.Time
	if len(profiles) == 1 {
		times = profiles[0].changes() // sorted and distinct already
	} else {
		for _, p := range profiles {
			times = append(times, p.changes()...)
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		times = slices.CompactFunc(times, func(a, b time.Time) bool { return a.Equal(b) })
	}
	for _, t := range times {
		if t.Before(now) {
			continue
		}
		if picks, ok := placeAt(profiles, t, pd, topo); ok {
			return t, picks, true
		}
	}
	return time.Time{}, nil, false
}

// earliestOnOne is earliest for one job of CPUs and memory on one node (a
// pool, as the simulator models a machine), in one walk: where the
// interval from one start fails on a segment, so does every interval
// starting up to that segment, which therefore is skipped. Under
// conservative backfill every waiting run asks, and each reservation
// lengthens the profile: asked start by start, a long queue costs the
// square of its length at every pass.
func earliestOnOne(p *profile, now time.Time, pd *Pending) (time.Time, []pick, bool) {
	r := pd.Request
	if !r.inFleet(p.node) {
		return time.Time{}, nil, false
	}
	for i := 0; i < len(p.segs); {
		from := p.segs[i].at
		if from.Before(now) {
			i++
			continue
		}
		to := end(from, pd.Limit)
		bad := -1
		for j := i; j < len(p.segs); j++ {
			s := &p.segs[j]
			if !to.IsZero() && !s.at.Before(to) {
				break
			}
			if s.cpus < r.CPUs || s.mem < r.Memory {
				bad = j
				break
			}
		}
		if bad < 0 {
			return from, []pick{{p: p, req: r}}, true
		}
		i = bad + 1
	}
	return time.Time{}, nil, false
}

// earliestOneJob is earliest for a run of one job: if the job fits on a
// node from some time on, it fits there from the start of the segment that
// time falls in too (the interval from there covers fewer segments), so
// each node's earliest fit is at one of its own changes, and the run's is
// the soonest of those; the node is then the first that fits at that time,
// as placeAt picks it. Asking every node at every change of any node
// instead costs the product of the two on a large cluster, for each of the
// pass's reservations.
func earliestOneJob(profiles []*profile, now time.Time, pd *Pending) (time.Time, []pick, bool) {
	var best time.Time
	found := false
	for _, p := range profiles {
		r := pd.Request
		if r.Exclusive || p.node.Blocks > 1 {
			eff, ok := r.on(p.node, pd.Nodes)
			if !ok {
				continue
			}
			r = eff
		}
		if !r.inFleet(p.node) {
			continue
		}
		for i := range p.segs {
			at := p.segs[i].at
			if at.Before(now) {
				continue
			}
			if found && !at.Before(best) {
				break // no sooner than the best so far
			}
			if _, ok := p.fits(at, end(at, pd.Limit), r); ok {
				best, found = at, true
				break
			}
		}
	}
	if !found {
		return time.Time{}, nil, false
	}
	picks, ok := placeAt(profiles, best, pd, nil)
	return best, picks, ok
}

// on is what one job of r takes on n, and whether n could ever hold it. An
// exclusive job takes the whole node; on a node split in blocks a job takes
// whole blocks — as many as its largest need — and a run spanning several
// nodes takes every block (dstack: distributed runs do not share nodes).
func (r Request) on(n *Node, nodes int) (Request, bool) {
	split := n.Blocks > 1
	if !r.Exclusive && !split {
		return r, true
	}
	if r.CPUs > n.CPUs || r.Memory > n.Memory || r.GPU.Count > len(n.GPUs) {
		return r, false
	}
	whole := r.Exclusive || nodes > 1
	k := n.Blocks
	if !whole {
		k = max(1, blocksFor(r.CPUs, n.CPUs, n.Blocks), blocksFor(int(r.Memory/(1<<20)), int(n.Memory/(1<<20)), n.Blocks),
			blocksFor(r.GPU.Count, len(n.GPUs), n.Blocks))
		whole = k >= n.Blocks
	}
	out := r
	if whole {
		out.CPUs, out.Memory, out.GPU.Count = n.CPUs, n.Memory, len(n.GPUs)
	} else {
		b := Bytes(n.Blocks)
		out.CPUs, out.Memory, out.GPU.Count = k*(n.CPUs/n.Blocks), Bytes(k)*(n.Memory/b), k*(len(n.GPUs)/n.Blocks)
	}
	if r.GPU.Count == 0 {
		out.GPU = GPURequest{Count: out.GPU.Count} // GPUs that come with the blocks: any
	}
	return out, true
}

// blocksFor is how many of blocks equal shares of total hold need; more
// than blocks when a share is empty but something is needed.
func blocksFor(need, total, blocks int) int {
	if need <= 0 {
		return 0
	}
	per := total / blocks
	if per <= 0 {
		return blocks + 1
	}
	return (need + per - 1) / per
}

// Fits reports whether count distinct nodes could hold a job of r: now (free
// resources) or ever (total resources, offline nodes included).
func Fits(nodes []Node, r Request, count int, now bool) bool {
	want, n := max(count, 1), 0
	for i := range nodes {
		if fitsOn(&nodes[i], r, now) {
			if n++; n == want {
				return true
			}
		}
	}
	return false
}

// FitsNode reports whether one node holds a job of r now, and if not, whether
// it ever could; why says what is short.
func FitsNode(n *Node, r Request) (now, ever bool, why string) {
	if !fitsOn(n, r, false) {
		return false, false, shortOf(n, r, false)
	}
	if !fitsOn(n, r, true) {
		return false, true, shortOf(n, r, true)
	}
	return true, true, ""
}

func shortOf(n *Node, r Request, now bool) string {
	if r.Containers && !n.Containers {
		return "no container engine"
	}
	if !r.inFleet(n) {
		return "not in fleet " + strings.Join(r.Fleets, " or ")
	}
	if eff, ok := r.on(n, 1); ok {
		r = eff
	}
	cpus, mem, gpus := n.CPUs, n.Memory, len(n.GPUs)
	if now {
		if !n.Online {
			return "node offline"
		}
		cpus, mem, gpus = n.FreeCPUs, n.FreeMemory, len(n.FreeGPUs)
	}
	var why []string
	if r.CPUs > cpus {
		why = append(why, "CPUs")
	}
	if r.Memory > mem {
		why = append(why, "memory")
	}
	if r.GPU.Count > gpus {
		why = append(why, "GPUs")
	} else if r.GPU.Count > 0 {
		why = append(why, "matching GPUs")
	}
	if len(why) == 0 {
		return ""
	}
	adj := "not enough "
	if now {
		adj = "not enough free "
	}
	return adj + strings.Join(why, ", ")
}

// fitsOn tells whether a job of r fits on n: in its free resources (now) or
// in its total ones. It allocates nothing: it runs for every node of every
// pending run.
func fitsOn(n *Node, r Request, now bool) bool {
	if !r.inFleet(n) {
		return false
	}
	if r.Exclusive || n.Blocks > 1 {
		var ok bool
		if r, ok = r.on(n, 1); !ok {
			return false
		}
	}
	cpus, mem := n.CPUs, n.Memory
	if now {
		if !n.Online {
			return false
		}
		cpus, mem = n.FreeCPUs, n.FreeMemory
	}
	if r.CPUs > cpus || r.Memory > mem {
		return false
	}
	if r.GPU.Count == 0 {
		return true
	}
	count := 0
	for _, g := range n.GPUs {
		if (!now || slices.Contains(n.FreeGPUs, g.Index)) && r.GPU.matches(g) {
			if count++; count == r.GPU.Count {
				return true
			}
		}
	}
	return false
}

func gpuByIndex(gs []GPU, idx int) (GPU, bool) {
	for _, g := range gs {
		if g.Index == idx {
			return g, true
		}
	}
	return GPU{}, false
}

func (r GPURequest) matches(g GPU) bool {
	if r.Vendor != "" && !strings.EqualFold(r.Vendor, g.Vendor) {
		return false
	}
	if g.Memory < r.MinMemory || (r.MaxMemory > 0 && g.Memory > r.MaxMemory) {
		return false
	}
	if len(r.Names) == 0 {
		return true
	}
	for _, name := range r.Names {
		if modelMatches(name, g.Name) {
			return true
		}
	}
	return false
}

// modelMatches compares a requested model name ("A100") with a device name
// as drivers report it ("NVIDIA A100-SXM4-80GB"): the request must appear as
// a whole word of the device name, ignoring case.
func modelMatches(want, have string) bool {
	if strings.EqualFold(want, have) {
		return true
	}
	for len(have) > 0 {
		i := strings.IndexAny(have, " -_")
		word := have
		if i >= 0 {
			word, have = have[:i], have[i+1:]
		} else {
			have = ""
		}
		if strings.EqualFold(word, want) {
			return true
		}
	}
	return false
}

func without(have, take []int) []int {
	out := have[:0:0]
	for _, h := range have {
		keep := true
		for _, t := range take {
			if h == t {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, h)
		}
	}
	return out
}

var policyNames = map[Policy]string{EASY: "easy", FCFS: "fcfs", Conservative: "conservative", Berth: "berth"}

func (p Policy) String() string {
	if n, ok := policyNames[p]; ok {
		return n
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy reads a policy's name: easy, fcfs, conservative or berth.
func ParsePolicy(s string) (Policy, error) {
	for p, n := range policyNames {
		if n == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("sched: unknown policy %q (want easy, fcfs, conservative or berth)", s)
}
