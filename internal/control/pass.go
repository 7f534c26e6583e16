package control

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// The scheduler's state between passes is a sched.Cycle (s.cycle): the
// nodes, the running and waiting runs as the scheduler sees them, the
// fairshare usage and its decay, the arrays' throttles and what the last
// pass reserved. The Cluster feeds it each change as it makes it (the
// Cycle's README, "Driving a Cycle"):
//
//   - a node registered, connected, gone away, drained or resumed, or its
//     fleet's blocks changed by a reload: SetNode (syncNode, only when the
//     scheduler's view of it changed);
//   - a placed run's placements, expected end, priority or stop changed,
//     or its jobs gave back what they held: Run, Stopping (once, at
//     stopBy: the stop's time plus the run's grace) or End (syncRun, only
//     when something changed);
//   - a waiting run came or changed: Queue, at the next pass (a run
//     changed three times is queued once), with its hold, which stays the
//     Cluster's (holds below); it left the queue without starting: Dequeue;
//   - a job ended: AddUsage; a throttle changed: SetArrayLimit; a policy
//     reload: Configure; the safety-net timer or a start dropped: Rescan.
//
// A pass is then two inputs with the computation between them, so that
// the owner need not serialise the long part (the server runs it off its
// lock, schedLoop):
//
//  1. PassInput (preparePassLocked): queue the runs changed since the
//     last pass, decide the holds that may have changed, and Prepare a
//     round of the Cycle (it copies what the pass needs; nothing in it is
//     changed in place by later inputs).
//  2. Pass.Schedule, beside other inputs: the round's Compute. A pass over
//     100,000 waiting runs on 10,000 nodes takes about half a second, and
//     submissions, stops and agents' reports go on meanwhile. They leave
//     their marks as ever (a new or changed run in fresh, the Cycle told
//     of the rest), so the next pass sees them.
//  3. PlanInput (applyPlanLocked, plan_apply.go): Commit the round, then
//     re-check every decision against the state as it is now, Start what
//     still holds and drop the rest (a full pass follows: Rescan).
//
// One pass at a time: a plan is never applied over another computed
// beside it.

// Pass is one scheduling pass between its two inputs.
type Pass struct {
	now   time.Time
	rules *policy.Policy // in force when the pass was prepared
	round *sched.Round
	// nodes are the nodes as the round copied them, by name: the
	// re-check's reference (plan_apply.go). Each is never changed once
	// given to the Cycle (syncNode makes a new one).
	nodes []*sched.Node
	plan  sched.Plan
	depth int
}

// Schedule computes the pass's plan. It reads only the pass: it runs
// without the owner's serialisation, beside other inputs.
func (p *Pass) Schedule() sched.Plan {
	p.plan = p.round.Compute()
	return p.plan
}

// cycleConfig is what the Cycle schedules by under the policy rules.
func (s *Cluster) cycleConfig(rules *policy.Policy) sched.CycleConfig {
	return sched.CycleConfig{Policy: s.cfg.Policy, Weights: s.cfg.Weights, Shares: rules.Shares, Limits: rules.Limits, QOS: rules.QOS,
		Topology: rules.Topology, Depth: s.cfg.Depth, HalfLife: s.cfg.HalfLife, Drift: s.cfg.Drift}
}

// syncNode tells the Cycle of ns when the scheduler's view of it changed
// (its resources, stream, drain or health, its fleet's blocks); what its
// jobs hold the Cycle counts from the running runs.
func (s *Cluster) syncNode(ns *nodeState) {
	n := s.schedNode(ns)
	if was := ns.cyc; was != nil && sameNode(was, n) {
		return
	}
	ns.cyc = &n
	s.cycle.SetNode(n)
	s.cycDirty = true
}

// runningOf is rs as the scheduler sees a run that holds resources: the
// placements of its jobs that their nodes hold, in job order, and when it
// is expected to give them back; ok is false when it holds nothing.
func (s *Cluster) runningOf(rs *runState) (r sched.Running, ok bool) {
	for _, js := range rs.jobs {
		if ns, ok := s.nodes[js.rec.Node]; !ok || ns.jobs[js.rec.ID] != js {
			continue
		}
		r.Placements = append(r.Placements, sched.Placement{JobID: js.rec.ID, Node: js.rec.Node, CPUs: js.alloc.CPUs,
			Memory: sched.Bytes(js.alloc.Memory), GPUs: js.alloc.GPUs})
	}
	if len(r.Placements) == 0 {
		return sched.Running{}, false
	}
	r.RunID, r.End, r.User, r.Project, r.QOS, r.Array = rs.rec.ID, rs.expectedEnd(), rs.user, rs.project, rs.r().qos, arrayKey(rs)
	r.Priority, r.Start, r.Ending = int64(rs.rec.Priority), rs.startedAt(), rs.rec.StopReq > 0
	if stopBy := rs.r().stopBy; r.Ending && (r.End.IsZero() || stopBy.Before(r.End)) {
		r.End = stopBy // gone within its grace period
	}
	return r, true
}

// startedAt is when the run started, or was placed until it has.
func (rs *runState) startedAt() time.Time {
	if !rs.rec.StartedAt.IsZero() {
		return rs.rec.StartedAt
	}
	return time.Unix(0, rs.r().placedAt).UTC()
}

// syncRun tells the Cycle of a placed run whose view changed: its
// placements (a job ended), expected end (started, a new time limit), its
// priority or QOS, a stop (Stopping, once), or that it holds nothing any
// more (End).
func (s *Cluster) syncRun(rs *runState) {
	r, ok := s.runningOf(rs)
	was := rs.r().cyc
	switch {
	case !ok && was == nil:
		return
	case !ok:
		rs.rare.cyc = nil // was is set: rare exists
		s.cycle.End(rs.rec.ID)
	case was != nil && sameRunning(was, &r):
		return
	case was != nil && !was.Ending && r.Ending && sameRunning(was, &sched.Running{RunID: r.RunID, Placements: r.Placements,
		End: was.End, User: r.User, Project: r.Project, QOS: r.QOS, Array: r.Array, Priority: r.Priority, Start: r.Start}):
		// Only the stop: the run is expected gone by stopBy.
		rs.rare.cyc = &r
		s.cycle.Stopping(rs.rec.ID, rs.rare.stopBy)
	default:
		rs.w().cyc = &r
		s.cycle.Run(r)
	}
	s.cycDirty = true
}

// sameRunning reports whether two views of a running run agree.
func sameRunning(a, b *sched.Running) bool {
	return a.RunID == b.RunID && a.End.Equal(b.End) && a.User == b.User && a.Project == b.Project && a.QOS == b.QOS &&
		a.Array == b.Array && a.Priority == b.Priority && a.Start.Equal(b.Start) && a.Ending == b.Ending &&
		slices.EqualFunc(a.Placements, b.Placements, func(x, y sched.Placement) bool {
			return x.JobID == y.JobID && x.Node == y.Node && x.CPUs == y.CPUs && x.Memory == y.Memory && slices.Equal(x.GPUs, y.GPUs)
		})
}

// pendingOf is the scheduler's entry of a waiting run, with its hold. Its
// slices are never changed afterwards (the Cycle keeps them): the job IDs
// are made for it, the request and groups are replaced, never changed in
// place (resolveFleets).
func (s *Cluster) pendingOf(rs *runState, hold string) sched.Pending {
	ids := make([]int64, max(len(rs.jobs), int(rs.unmade.n)))
	if u := rs.unmade; u.n > 0 {
		for k := range ids {
			ids[k] = u.first + int64(k)
		}
	} else {
		for k, js := range rs.jobs {
			ids[k] = js.rec.ID
		}
	}
	return sched.Pending{RunID: rs.rec.ID, Priority: rs.rec.Priority, SubmittedAt: rs.rec.SubmittedAt, Nodes: len(ids), JobIDs: ids,
		Request: rs.req, Limit: rs.limit, User: rs.user, Project: rs.project, QOS: rs.r().qos, Tier: int(rs.tier), Nice: rs.r().nice,
		Array: arrayKey(rs), Groups: rs.r().groups, Hold: hold}
}

// plain tells whether no hold can apply to the run (no partition hold,
// user hold, begin time, retry, dependency or singleton): its hold need
// not be decided again when time passes or other runs change.
func (rs *runState) plain() bool {
	x := rs.r()
	return rs.hold == "" && !rs.held && x.begin.IsZero() && x.retry == nil && x.retryPolicy == nil && len(x.deps) == 0 && !x.singleton
}

// queueLocked queues (or queues again) a waiting run in the Cycle, with
// its hold.
func (s *Cluster) queueLocked(rs *runState, hold string) {
	s.cycle.Queue(s.pendingOf(rs, hold))
	rs.queued, rs.queuedHold = true, hold
	if rs.plain() {
		delete(s.maybeHeld, rs.rec.ID)
	} else {
		s.maybeHeld[rs.rec.ID] = rs
	}
	s.cycDirty = true
}

// unqueueLocked takes a run that no longer waits out of the Cycle's queue
// (started: the Cycle's Start took it already).
func (s *Cluster) unqueueLocked(rs *runState, started bool) {
	delete(s.maybeHeld, rs.rec.ID)
	if !rs.queued {
		return
	}
	rs.queued = false
	if !started {
		s.cycle.Dequeue(rs.rec.ID)
		s.cycDirty = true
	}
}

// preparePassLocked is a pass's first step: it returns the pass to compute,
// or nil when there is nothing to schedule. What it changes (arrays'
// tasks, runs a hold ends, reasons due) is queued before it returns.
func (s *Cluster) preparePassLocked(now time.Time) *Pass {
	b := &store.Batch{}
	// Holds other runs or time may have changed are decided again after
	// anything that may end them: a run's end (singleton), a node, a
	// reload, the safety net, a held run's time come.
	recheck := s.freed
	if h := s.holdUntil; !h.IsZero() && !now.Before(h) {
		// A time a run waited for has come (a begin time, a retry's
		// back-off, or its duration: a run no node can hold then fails,
		// which only a pass that considers it finds): a full pass.
		s.holdUntil, recheck = time.Time{}, true
		s.cycle.Rescan()
		s.cycDirty = true
	}
	s.freed = false
	s.topUpArraysLocked(now, b)
	s.queueChangesLocked(now, recheck, b)
	if !s.cycDirty || s.cycle.Waiting() == 0 {
		s.flushReasonsLocked(b, now)
		if !b.Empty() {
			s.emit(b)
		}
		return nil
	}
	s.cycDirty = false
	rules := s.rules.Load()
	p := &Pass{now: now, rules: rules, round: s.cycle.Prepare(now), depth: s.cfg.Depth}
	if len(s.nodeNames) != len(s.nodes) {
		s.nodeNames = slices.Sorted(maps.Keys(s.nodes))
	}
	p.nodes = make([]*sched.Node, 0, len(s.nodeNames))
	for _, name := range s.nodeNames {
		ns, ok := s.nodes[name]
		if !ok { // a node gone and another come: the names again
			s.nodeNames = slices.Sorted(maps.Keys(s.nodes))
			return s.preparePassLocked(now)
		}
		p.nodes = append(p.nodes, ns.cyc)
	}
	if !b.Empty() {
		s.emit(b)
	}
	return p
}

// queueChangesLocked queues in the Cycle the waiting runs changed since
// the last pass (fresh), and those whose hold changed: with recheck, every
// run a hold may apply to is looked at again; a new singleton run makes
// every such run looked at (which of the same name goes first).
func (s *Cluster) queueChangesLocked(now time.Time, recheck bool, b *store.Batch) {
	fresh := s.fresh
	s.fresh = map[int64]*runState{}
	cands := make(map[int64]*runState, len(fresh))
	single := false
	for id, rs := range fresh {
		if s.pending[id] == rs {
			cands[id] = rs
			single = single || rs.r().singleton
		}
	}
	if recheck || single {
		for id, rs := range s.maybeHeld {
			if s.pending[id] == rs {
				cands[id] = rs
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	maybe := map[int64]*runState{}
	for id, rs := range cands {
		if !rs.plain() {
			maybe[id] = rs
		}
	}
	holds := s.holdsLocked(maybe, now, b)
	ids := slices.Sorted(maps.Keys(cands))
	for _, id := range ids {
		rs := cands[id]
		if s.pending[id] != rs {
			continue // ended by its hold (a retry's time passed, a dependency never met)
		}
		h := holds[id]
		if _, changed := fresh[id]; !changed && rs.queued && h == rs.queuedHold {
			continue
		}
		s.queueLocked(rs, h)
	}
}

// sameNode reports whether two views of a node agree on what it is (not
// on what is free on it).
func sameNode(a *sched.Node, b sched.Node) bool {
	return a.Name == b.Name && a.Fleet == b.Fleet && a.Online == b.Online && a.CPUs == b.CPUs && a.Memory == b.Memory &&
		a.Blocks == b.Blocks && a.Containers == b.Containers && a.Project == b.Project && slices.Equal(a.GPUs, b.GPUs)
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
	if !p.Full() {
		return
	}
	for id := range s.applied {
		if _, ok := plan.Reasons[id]; !ok {
			delete(s.applied, id)
		}
	}
}
