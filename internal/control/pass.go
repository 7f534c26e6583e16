package control

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// A scheduling pass is two inputs with the computation between them, so
// that its owner need not serialise the long part (the server runs it off
// its lock, schedLoop):
//
//  1. PassInput (preparePassLocked): choose the candidates (the
//     incremental rule: fresh, reserved, or every waiting run after a
//     freeing), decide their holds, copy the cluster and the candidates'
//     views (for a full pass, those of the waiting index) into a Pass.
//     Nothing in the Pass is changed in place by later inputs: it may be
//     read beside them.
//  2. Pass.Schedule, beside other inputs: a pass over 100,000 waiting runs
//     on 10,000 nodes takes about half a second, and submissions, stops and
//     agents' reports go on meanwhile. They leave their marks as ever (a
//     new or changed run in fresh, a release in freed), so the next pass
//     sees them: nothing that happens during a pass is lost.
//  3. PlanInput (applyPlanLocked, plan_apply.go): every decision is
//     re-checked against the state as it is now, and what no longer holds
//     is dropped (a full pass follows).
//
// One pass at a time: a plan is never applied over another computed
// beside it.

// Pass is one scheduling pass between its two inputs.
type Pass struct {
	now   time.Time
	full  bool           // every waiting run is a candidate
	rules *policy.Policy // in force when the pass was copied
	// snap is the Cluster as copied (its Pending is filled by snapshot).
	snap  sched.Snapshot
	views []*pendingView
	holds map[int64]string
	// maybeHeld are the candidates a hold may apply to (see
	// pendingView.plain); gone those holdsLocked ended.
	maybeHeld map[int64]*runState
	gone      map[int64]bool
	// index is the waiting index, when the pass's views are its own (a
	// full pass): it is indexed off the lock (snapshot).
	index *waitingIndex
	// nodes are the nodes' kept views, by name (snapshot copies them into
	// snap.Nodes, and groups their placed jobs into snap.Running);
	// stopGrace is how soon a run being stopped gives its jobs back.
	nodes     []*nodeView
	stopGrace time.Duration
}

// nodeView is a node as the scheduler sees it and its placed jobs as a
// pass needs them, kept on the node between passes: a pass copies a
// pointer to it, not 10,000 nodes and their jobs, while inputs wait. A
// view is never changed once built; staleNode drops it when the node
// changes (a job placed or released, its stream, drain, health or
// resources) or when a run placed on it does (staleNodesOf: its status,
// stop, start, time limit, priority, QOS), and the next pass builds it
// again; a policy reload makes every view stale (rules).
type nodeView struct {
	rules *policy.Policy
	node  sched.Node
	held  []heldJob
}

// staleNode drops ns's kept view.
func staleNode(ns *nodeState) { ns.view = nil }

// staleNodesOf drops the kept views of the nodes rs's jobs are placed on.
func (s *Cluster) staleNodesOf(rs *runState) {
	for _, js := range rs.jobs {
		if ns, ok := s.nodes[js.rec.Node]; ok {
			staleNode(ns)
		}
	}
}

// nodeViewLocked is ns's kept view, built anew when stale.
func (s *Cluster) nodeViewLocked(ns *nodeState, rules *policy.Policy) *nodeView {
	if v := ns.view; v != nil && v.rules == rules {
		return v
	}
	v := &nodeView{rules: rules, node: s.schedNode(ns), held: make([]heldJob, 0, len(ns.jobs))}
	for _, js := range ns.jobs {
		rs := js.run
		h := heldJob{node: ns.info.Name, job: js.rec.ID, run: js.rec.RunID, cpus: js.alloc.CPUs, memory: js.alloc.Memory, gpus: js.alloc.GPUs,
			end: rs.expectedEnd(), start: rs.rec.StartedAt, user: rs.user, project: rs.project, qos: rs.qos,
			priority: int64(rs.rec.Priority), ending: rs.rec.StopReq > 0}
		if rs.rec.ArrayID != 0 {
			h.array = arrayKey(rs)
		}
		v.held = append(v.held, h)
	}
	ns.view = v
	return v
}

// pendingView is a waiting run as the scheduler sees it (but for its
// hold), kept on the run between passes: a pass copies a pointer to it
// under the lock, and the view itself after, instead of building 100,000
// of them under the lock (which was most of the time a pass held it).
// A view is never changed once built; a new one replaces it when the run
// changes. Every change to a waiting run that the scheduler sees — a hold
// or release, an update of its priority, nice or time limit, new jobs
// (a requeue) — puts the run in fresh, for the incremental rule, and the
// next pass drops the views of the fresh runs (dropChangedViewsLocked); a
// policy reload, which resolves every waiting run's request again, makes
// every view stale (rules). Nothing else is checked on use: a pass reads
// two cache lines of a waiting run, not its whole record.
//
// A view is kept on every waiting run, so it is compact: it shares the
// run's request and groups (replaced, never changed in place) and names
// its jobs by the first ID (a run's jobs are made together, with
// consecutive IDs); pending() makes the scheduler's entry of it, off the
// lock.
type pendingView struct {
	rules *policy.Policy
	id    int64
	// firstJob is its first job's ID, the others following (but see
	// rare.jobs).
	firstJob  int64
	priority  int
	submitted int64 // Unix ns
	req       *sched.Request
	limit     time.Duration
	nice      int64
	acct      *account
	array     string
	rare      *viewRare // nil: no groups, jobs that follow one another
	nodes     int32     // how many jobs
	tier      int32
	// plain: no hold can apply (no partition hold, user hold, begin time,
	// retry, dependency or singleton), so holdsLocked need not look at it.
	plain bool
}

// viewRare is what few views have: a heterogeneous run's groups, and the
// job IDs of a run whose jobs do not follow one another.
type viewRare struct {
	groups []sched.Group
	jobs   []int64
}

// account is whose a run is and under which QOS, shared by the views of
// every run of the same (accounts).
type account struct{ user, project, qos string }

// accounts interns the views' accounts (Cluster.accts). Its entries are
// never dropped: there are as many as user, project and QOS combinations
// in use.
type accounts map[account]*account

// of is the shared account of user, project and qos.
func (as accounts) of(user, project, qos string) *account {
	a := account{user, project, qos}
	p, ok := as[a]
	if !ok {
		p = &a
		as[a] = p
	}
	return p
}

// pending is the scheduler's entry of the run; ids holds room for its job
// IDs (at least v.nodes).
func (v *pendingView) pending(ids []int64) sched.Pending {
	ids = ids[:v.nodes:v.nodes]
	var groups []sched.Group
	if r := v.rare; r != nil && r.jobs != nil {
		copy(ids, r.jobs)
	} else {
		for k := range ids {
			ids[k] = v.firstJob + int64(k)
		}
	}
	if v.rare != nil {
		groups = v.rare.groups
	}
	return sched.Pending{RunID: v.id, Priority: v.priority, SubmittedAt: time.Unix(0, v.submitted).UTC(), Nodes: int(v.nodes), JobIDs: ids,
		Request: *v.req, Limit: v.limit, User: v.acct.user, Project: v.acct.project, QOS: v.acct.qos, Tier: int(v.tier), Nice: v.nice,
		Array: v.array, Groups: groups}
}

// viewOf is rs's view, built again when it is missing or stale.
func (s *Cluster) viewOf(rs *runState, rules *policy.Policy) *pendingView {
	if v := rs.view; v != nil && v.rules == rules {
		return v
	}
	v := s.newView(rs, rules)
	rs.view = v
	return v
}

// newView builds rs's view.
func (s *Cluster) newView(rs *runState, rules *policy.Policy) *pendingView {
	v := &pendingView{rules: rules, id: rs.rec.ID, priority: rs.rec.Priority, submitted: rs.rec.SubmittedAt.UnixNano(), nodes: int32(len(rs.jobs)),
		req: rs.req, limit: rs.limit, acct: s.accts.of(rs.user, rs.project, rs.qos), tier: rs.tier, nice: rs.nice,
		array: arrayKey(rs)}
	if len(rs.groups) > 0 {
		v.rare = &viewRare{groups: rs.groups}
	}
	if u := rs.unmade; u.n > 0 {
		v.nodes, v.firstJob = u.n, u.first
	} else if len(rs.jobs) > 0 {
		v.firstJob = rs.jobs[0].rec.ID
	}
	for k, js := range rs.jobs {
		if js.rec.ID != v.firstJob+int64(k) {
			if v.rare == nil {
				v.rare = &viewRare{}
			}
			v.rare.jobs = make([]int64, len(rs.jobs))
			for i, o := range rs.jobs {
				v.rare.jobs[i] = o.rec.ID
			}
			break
		}
	}
	v.plain = rs.hold == "" && !rs.held && rs.begin == nil && rs.retry == nil && rs.retryPolicy == nil && len(rs.deps) == 0 && !rs.singleton
	return v
}

// dropChangedViewsLocked drops the views of the runs changed since the
// last pass: they are all in fresh.
func (s *Cluster) dropChangedViewsLocked() {
	for _, rs := range s.fresh {
		rs.view = nil
	}
}

// preparePassLocked is a pass's first step: it returns the pass to compute,
// or nil when there is nothing to schedule. What it changes (arrays'
// tasks, runs a hold ends, reasons due) is queued before it returns.
func (s *Cluster) preparePassLocked(now time.Time) *Pass {
	b := &store.Batch{}
	if h := s.holdUntil; !h.IsZero() && !now.Before(h) {
		s.holdUntil, s.freed = time.Time{}, true // held runs are due: a full pass
	}
	s.topUpArraysLocked(now, b)
	s.dropChangedViewsLocked()
	candidates := s.fresh
	if s.freed {
		candidates = s.pending
	} else {
		// Only runs that wait: fresh may name others (an array's own run,
		// held or released with its tasks). Runs that hold reservations
		// keep them against the new ones.
		candidates = maps.Clone(s.fresh)
		maps.DeleteFunc(candidates, func(id int64, _ *runState) bool { return s.pending[id] == nil })
		for _, id := range s.reserved {
			if rs, ok := s.pending[id]; ok {
				candidates[id] = rs
			}
		}
	}
	if len(candidates) == 0 {
		s.flushReasonsLocked(b, now)
		if !b.Empty() {
			s.emit(b)
		}
		return nil
	}
	full := s.freed
	s.freed = false
	fresh := s.fresh
	s.fresh = map[int64]*runState{}
	p := s.copyClusterLocked(now)
	p.full = full
	s.waiting.updateLocked(s, fresh, p.rules)
	if full {
		if !s.waiting.ok || len(s.waiting.views) != len(s.pending) {
			s.waiting.rebuildLocked(s, p.rules)
		}
		// A copy of the pointers (a memmove): the index changes as the
		// plan is applied.
		p.index = &s.waiting
		p.views, p.maybeHeld = slices.Clone(s.waiting.views), s.waiting.maybeHeld
	} else {
		p.views, p.maybeHeld = s.viewsLocked(candidates, p.rules)
	}
	ids := slices.Collect(maps.Keys(p.maybeHeld))
	p.holds = s.holdsLocked(p.maybeHeld, now, b)
	for _, id := range ids {
		if _, ok := p.maybeHeld[id]; !ok {
			// Ended by its hold (a retry's duration passed, a dependency
			// never satisfied): not for this pass (and the index, one
			// longer than the queue now, is built again next time).
			if p.gone == nil {
				p.gone = map[int64]bool{}
			}
			p.gone[id] = true
		}
	}
	if !b.Empty() {
		s.emit(b)
	}
	return p
}

// viewsLocked collects the views of the given waiting runs, and those a
// hold may apply to.
func (s *Cluster) viewsLocked(pending map[int64]*runState, rules *policy.Policy) ([]*pendingView, map[int64]*runState) {
	views := make([]*pendingView, 0, len(pending))
	maybeHeld := map[int64]*runState{}
	for id, rs := range pending {
		v := s.viewOf(rs, rules)
		if !v.plain {
			maybeHeld[id] = rs
		}
		views = append(views, v)
	}
	return views, maybeHeld
}

// copyClusterLocked copies what every pass needs: the nodes, what running
// runs hold, the policy.
func (s *Cluster) copyClusterLocked(now time.Time) *Pass {
	rules := s.rules.Load()
	p := &Pass{now: now, rules: rules}
	snap := &p.snap
	if len(s.nodeNames) != len(s.nodes) {
		s.nodeNames = slices.Sorted(maps.Keys(s.nodes))
	}
	p.nodes = make([]*nodeView, 0, len(s.nodeNames))
	for _, name := range s.nodeNames {
		ns, ok := s.nodes[name]
		if !ok { // a node gone and another come: the names again
			s.nodeNames = nil
			return s.copyClusterLocked(now)
		}
		p.nodes = append(p.nodes, s.nodeViewLocked(ns, rules))
	}
	p.stopGrace = s.cfg.StopGrace
	snap.Policy = s.cfg.Policy
	snap.Weights = s.cfg.Weights
	snap.Depth = s.cfg.Depth
	snap.Usage = s.usageAtLocked(now)
	snap.Limits, snap.QOS, snap.Shares, snap.Topology = s.arrayLimitsLocked(rules.Limits), rules.QOS, rules.Shares, rules.Topology
	return p
}

// heldJob is a placed job as a pass copies it under the lock, with what the
// scheduler needs of its run.
type heldJob struct {
	node                      string
	job, run                  int64
	cpus                      int
	memory                    int64
	gpus                      []int // the job's allocation, never changed in place
	end, start                time.Time
	user, project, qos, array string
	priority                  int64
	ending                    bool
}

// running groups the pass's placed jobs into the runs that hold them, in
// run ID order, each run's placements in node order. It needs no lock.
func (p *Pass) running() []sched.Running {
	n := 0
	for _, v := range p.nodes {
		n += len(v.held)
	}
	at := make(map[int64]int, n)
	var out []sched.Running
	for _, v := range p.nodes {
		out = p.group(v.held, at, out)
	}
	slices.SortFunc(out, func(a, b sched.Running) int { return cmp.Compare(a.RunID, b.RunID) })
	return out
}

// group adds held's jobs to the runs that hold them (at: where each run
// is in out).
func (p *Pass) group(held []heldJob, at map[int64]int, out []sched.Running) []sched.Running {
	for _, h := range held {
		k, ok := at[h.run]
		if !ok {
			r := sched.Running{RunID: h.run, End: h.end, User: h.user, Project: h.project, QOS: h.qos,
				Priority: h.priority, Start: h.start, Ending: h.ending, Array: h.array}
			if r.Ending {
				// Being stopped: gone within the grace period.
				if by := p.now.Add(p.stopGrace); r.End.IsZero() || by.Before(r.End) {
					r.End = by
				}
			}
			k = len(out)
			at[h.run] = k
			out = append(out, r)
		}
		out[k].Placements = append(out[k].Placements, sched.Placement{JobID: h.job, Node: h.node, CPUs: h.cpus,
			Memory: sched.Bytes(h.memory), GPUs: h.gpus})
	}
	return out
}

// Schedule computes the pass's plan. It reads only the pass: it runs
// without the owner's serialisation, beside other inputs.
func (p *Pass) Schedule() sched.Plan { return sched.Schedule(p.snapshot(), p.now) }

// snapshot is the pass's snapshot, its waiting runs copied from their
// views with the pass's holds, the running runs from the placed jobs. It
// needs no lock.
func (p *Pass) snapshot() sched.Snapshot {
	if p.index != nil {
		p.index.index()
	}
	if p.snap.Nodes == nil {
		p.snap.Nodes = make([]sched.Node, len(p.nodes))
		for i, v := range p.nodes {
			p.snap.Nodes[i] = v.node
		}
	}
	snap := p.snap
	snap.Running = p.running()
	snap.Pending = make([]sched.Pending, 0, len(p.views))
	n := 0
	for _, v := range p.views {
		n += int(v.nodes)
	}
	ids := make([]int64, n) // every run's job IDs, in one allocation
	for _, v := range p.views {
		if p.gone[v.id] {
			continue
		}
		pd := v.pending(ids)
		ids = ids[v.nodes:]
		if len(p.holds) > 0 {
			pd.Hold = p.holds[pd.RunID]
		}
		snap.Pending = append(snap.Pending, pd)
	}
	return snap
}

// reasonEntry is what a plan says of a waiting run that does not start.
type reasonEntry struct {
	reason    string
	estimate  time.Time
	blockedBy []int64
}

// sum is a 64-bit digest of the entry: what the passes keep of each
// entry they applied (s.applied), so as to tell a new one from it at a
// sixteenth of the memory. Two different entries share a digest once in
// 2^64; then a changed reason waits for its next change.
func (e reasonEntry) sum() uint64 {
	h := fnv.New64a()
	var b [8]byte
	h.Write([]byte(e.reason))
	binary.LittleEndian.PutUint64(b[:], uint64(e.estimate.UnixNano()))
	h.Write(b[:])
	for _, id := range e.blockedBy {
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		h.Write(b[:])
	}
	return h.Sum64()
}

// reasonUpdate is one entry of a plan to apply to run id.
type reasonUpdate struct {
	id int64
	reasonEntry
}

// NewReasons picks, without the lock, the plan's reasons to apply: those
// that differ from what the passes last applied to the run (s.applied).
// While a run waits only the plan applier writes its reason, estimate and
// blockers, so the others are in place already: from one full pass to the
// next over a long queue, most are. ReqNodeNotAvail is always applied: it
// may end a run with a retry policy whose time has come.
func (s *Cluster) NewReasons(plan sched.Plan) []reasonUpdate {
	var out []reasonUpdate
	for id, reason := range plan.Reasons {
		e := reasonEntry{reason: reason, estimate: plan.Estimates[id], blockedBy: plan.BlockedBy[id]}
		if was, ok := s.applied[id]; ok && reason != sched.ReasonNoNode && was == e.sum() {
			continue
		}
		out = append(out, reasonUpdate{id: id, reasonEntry: e})
	}
	return out
}

// ForgetReasons drops, after a full pass and without the lock, what was
// applied to runs the pass no longer had waiting.
func (s *Cluster) ForgetReasons(p *Pass, plan sched.Plan) {
	if !p.full {
		return
	}
	for id := range s.applied {
		if _, ok := plan.Reasons[id]; !ok {
			delete(s.applied, id)
		}
	}
}

// waitingIndex keeps every waiting run's view between passes, so that a
// full pass over a long queue need not walk the queue under the lock: it
// is brought up to date from fresh (every run that came to wait, changed,
// or — by a hold, release or update of an array — was named there), and
// from the starts applied; a run that ended while it waited (stopped,
// cancelled) is not named anywhere, but then the index holds more runs than
// wait, and the pass builds it again by walking the queue, as it does
// after a policy reload and on the safety-net timer. Only the pass uses it,
// one at a time: under the lock to bring it up to date, without it to
// index it (at).
type waitingIndex struct {
	ok    bool
	rules *policy.Policy
	views []*pendingView
	// maybeHeld are the waiting runs a hold may apply to.
	maybeHeld map[int64]*runState
	// at is each run's place in views; nil until indexed.
	at map[int64]int
}

// rebuildLocked builds the index from every waiting run.
func (w *waitingIndex) rebuildLocked(s *Cluster, rules *policy.Policy) {
	w.views, w.maybeHeld = s.viewsLocked(s.pending, rules)
	w.rules, w.at, w.ok = rules, nil, true
}

// index fills at, without the lock.
func (w *waitingIndex) index() {
	if w.at != nil {
		return
	}
	w.at = make(map[int64]int, len(w.views))
	for i, v := range w.views {
		w.at[v.id] = i
	}
}

// updateLocked brings the index up to date with the runs named in fresh.
func (w *waitingIndex) updateLocked(s *Cluster, fresh map[int64]*runState, rules *policy.Policy) {
	if !w.ok || w.at == nil || w.rules != rules {
		w.ok = false
		return
	}
	for id, rs := range fresh {
		if s.pending[id] != rs {
			w.removeLocked(id)
			continue
		}
		v := s.viewOf(rs, rules)
		if i, ok := w.at[id]; ok {
			w.views[i] = v
		} else {
			w.at[id] = len(w.views)
			w.views = append(w.views, v)
		}
		if v.plain {
			delete(w.maybeHeld, id)
		} else {
			w.maybeHeld[id] = rs
		}
	}
}

// removeLocked drops run id (started, or no longer waiting).
func (w *waitingIndex) removeLocked(id int64) {
	if !w.ok {
		return
	}
	if w.at == nil {
		w.ok = false
		return
	}
	i, ok := w.at[id]
	if !ok {
		return
	}
	last := len(w.views) - 1
	w.views[i] = w.views[last]
	w.at[w.views[i].id] = i
	w.views[last] = nil
	w.views = w.views[:last]
	delete(w.at, id)
	delete(w.maybeHeld, id)
}
