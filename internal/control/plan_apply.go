package control

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// The plan applier. A plan is computed off the lock against the round's
// copy of the Cycle (pass.go); by the time it is applied, the state may
// have moved on. The round is committed first (the Cycle records what
// the pass reserved), then, As Nomad's plan applier does (nomad/plan_apply.go), each
// decision is checked again against the state as it is now, and only what
// still holds is applied:
//
//   - a start, if its run still waits unchanged — not stopped, held,
//     updated, requeued, its dependencies not changed (any such change puts
//     the run in fresh), the policy not reloaded — and every node it was
//     placed on is still there, online, not drained, the same node, and has
//     what the placement takes free. A start that fails the check is
//     dropped whole; the run stays waiting, and a full pass follows at once
//     (the Cycle's Rescan: what it would have taken is free, and the
//     plan's later decisions counted on it); one that holds is the
//     Cycle's Start;
//   - a preemption, if its victim still runs and is not being stopped, and
//     the run it makes room for still waits unchanged;
//   - a pending reason, estimate or blocker, if the run still waits
//     unchanged (the next pass gives the others theirs). Only those that
//     differ from what was last applied to the run are looked at under
//     the lock (newReasons, pass.go).
//
// A plan computed under a policy that has since been reloaded is dropped,
// its round not committed: its fleets, limits and QOS no longer hold, and
// the reload asked for a full pass.

// applyPlanLocked applies plan's starts and preemptions that still hold,
// and the given reasons (NewReasons) of the runs that still wait
// unchanged.
func (s *Cluster) applyPlanLocked(p *Pass, plan sched.Plan, reasons []reasonUpdate, now time.Time) {
	b := &store.Batch{}
	var after []Effect
	if s.rules.Load() != p.rules {
		s.log.Debug("plan dropped: the policy changed during the pass")
		s.flushReasonsLocked(b, now)
		if !b.Empty() {
			s.emit(b)
		}
		return
	}
	s.cycle.Commit(p.round)
	for _, pr := range plan.Preemptions {
		if why := s.preemptionStaleLocked(pr); why != "" {
			s.log.Debug("preemption dropped", "run_id", pr.Victim, "by", pr.By, "why", why)
			continue
		}
		after = append(after, s.preemptLocked(pr, now, b)...)
	}
	skipped := false
	for _, st := range plan.Starts {
		rs, why := s.startStaleLocked(p, st)
		if why != "" {
			s.log.Debug("start dropped", "run_id", st.RunID, "why", why)
			skipped = true
			continue
		}
		after = s.startLocked(rs, st, now, b, after)
		delete(s.applied, st.RunID)
	}
	if skipped {
		// What the dropped starts would have taken is free, and the plan's
		// later decisions counted on it: a full pass, at once.
		s.cycle.Rescan()
		s.cycDirty, s.wakeNow = true, true
	}
	if s.applied == nil {
		s.applied = map[int64]uint64{}
	}
	var sameNodes *bool
	for _, u := range reasons {
		id, reason, est := u.id, u.reason, u.estimate
		rs := s.unchangedLocked(id)
		if rs == nil {
			continue // its next pass gives it its reason
		}
		if reason == sched.ReasonNoNode && rs.r().retryPolicy != nil {
			// It fails the run unless it may wait: only on the nodes it
			// was judged against.
			if sameNodes == nil {
				same := s.nodesSameLocked(p)
				sameNodes = &same
			}
			if *sameNodes && s.noCapacityLocked(rs, now, b) {
				continue
			}
		}
		s.applied[id] = u.reasonEntry.sum()
		rs.blockedBy = u.blockedBy
		if rs.rec.Reason != reason || !rs.rec.EstimatedStart.Equal(est) {
			rs.rec.Reason, rs.rec.EstimatedStart = reason, est
			if len(s.reasons) == 0 {
				s.reasonsDue = now.Add(reasonFlush)
			}
			s.reasons[id] = rs
		}
	}
	s.flushReasonsLocked(b, now)
	if !b.Empty() {
		s.emit(b, after...)
	}
}

// unchangedLocked is run id if it still waits and has not changed since
// the pass was copied (nil otherwise).
func (s *Cluster) unchangedLocked(id int64) *runState {
	rs, ok := s.pending[id]
	if !ok {
		return nil
	}
	if _, changed := s.fresh[id]; changed {
		return nil
	}
	return rs
}

// startStaleLocked checks a start against the state now: it returns the
// run to start, or why the start no longer holds.
func (s *Cluster) startStaleLocked(p *Pass, st sched.Start) (*runState, string) {
	rs, ok := s.pending[st.RunID]
	switch {
	case !ok:
		return nil, "the run no longer waits"
	case s.fresh[st.RunID] != nil:
		return nil, "the run changed during the pass"
	case rs.held || rs.hold != "" || rs.beginAt().After(p.now):
		return nil, "the run is held"
	case len(st.Placements) != max(len(rs.jobs), int(rs.unmade.n)):
		return nil, "the run's jobs changed"
	}
	for k, pl := range st.Placements {
		if u := rs.unmade; u.n > 0 {
			if pl.JobID != u.first+int64(k) {
				return nil, "the run's jobs changed"
			}
		} else if js := rs.jobs[k]; js.rec.ID != pl.JobID || api.Status(js.rec.Status) != api.StatusSubmitted {
			return nil, "the run's jobs changed"
		}
	}
	for _, pl := range st.Placements {
		if why := s.placementStaleLocked(p, pl); why != "" {
			return nil, "node " + pl.Node + ": " + why
		}
	}
	return rs, ""
}

// placementStaleLocked says why a placement no longer fits its node ("":
// it fits). The run's jobs each go on a node of their own, so each is
// checked against the node as it is, with the starts applied before it.
func (s *Cluster) placementStaleLocked(p *Pass, pl sched.Placement) string {
	ns, ok := s.nodes[pl.Node]
	switch {
	case !ok:
		return "gone"
	case !ns.online:
		return "offline"
	case ns.condition().drained():
		return "drained"
	}
	if was, ok := p.node(pl.Node); !ok || !sameNode(was, s.schedNode(ns)) {
		return "registered again with other resources"
	}
	if ns.info.CPUs-ns.usedCPU < pl.CPUs || ns.info.Memory-ns.usedMem < int64(pl.Memory) {
		return "its CPUs or memory were taken"
	}
	for _, g := range pl.GPUs {
		if _, used := ns.usedGPU[g]; used || !slices.ContainsFunc(ns.info.GPUs, func(x api.GPU) bool { return x.Index == g }) {
			return "its GPUs were taken"
		}
	}
	return ""
}

// node is the pass's copy of a node (its nodes are sorted by name).
func (p *Pass) node(name string) (*sched.Node, bool) {
	i := sort.Search(len(p.nodes), func(i int) bool { return p.nodes[i].Name >= name })
	if i == len(p.nodes) || p.nodes[i].Name != name {
		return nil, false
	}
	return p.nodes[i], true
}

// nodesSameLocked reports whether the nodes are those the pass saw: none
// added, removed, gone offline or drained, or registered again otherwise.
func (s *Cluster) nodesSameLocked(p *Pass) bool {
	if len(s.nodes) != len(p.nodes) {
		return false
	}
	for _, was := range p.nodes {
		ns, ok := s.nodes[was.Name]
		if !ok || !sameNode(was, s.schedNode(ns)) {
			return false
		}
	}
	return true
}

// preemptionStaleLocked says why a preemption no longer holds ("": it
// does). preemptLocked itself passes over victims already being stopped.
func (s *Cluster) preemptionStaleLocked(pr sched.Preemption) string {
	rs, ok := s.runs[pr.Victim]
	switch {
	case !ok:
		return "the victim has ended"
	case rs.rec.StopReq > 0:
		return "the victim is being stopped"
	case s.pending[pr.Victim] != nil:
		return "the victim waits again"
	case s.unchangedLocked(pr.By) == nil:
		return "the run it made room for no longer waits unchanged"
	}
	return ""
}

// startLocked places rs's jobs as st says, records it in b and adds to
// after the assignments to send once b is committed.
func (s *Cluster) startLocked(rs *runState, st sched.Start, now time.Time, b *store.Batch, after []Effect) []Effect {
	rs.w().placedAt, rs.rare.stopBy, rs.rec.EstimatedStart = now.UnixNano(), time.Time{}, time.Time{}
	delete(s.pending, st.RunID)
	// Placed: its agents need all of its configuration.
	rs.keepTask()
	orderPlacements(rs.task(), st.Placements) // dist.go: SLURM_NODEID 0 is the first host of SLURM_JOB_NODELIST
	nodeIPs := make([]string, len(st.Placements))
	hosts := make([]string, len(st.Placements))
	for k, p := range st.Placements {
		nodeIPs[k] = s.nodes[p.Node].info.Addr
		hosts[k] = p.Node
	}
	s.jobsLocked(rs)
	for k, p := range st.Placements {
		js := rs.jobs[k]
		ns := s.nodes[p.Node]
		js.rec.Status, js.rec.Node = string(api.StatusProvisioning), p.Node
		js.alloc = api.Alloc{CPUs: p.CPUs, Memory: int64(p.Memory), GPUs: p.GPUs}
		ns.take(js)
		b.Jobs = append(b.Jobs, jobCopy(js))
	}
	// Each assignment carries what all the jobs hold (hostfile, GPU
	// total): they go out once every job is placed.
	for k, p := range st.Placements {
		js, ns := rs.jobs[k], s.nodes[p.Node]
		js.held = startupHeld(rs.task(), k, func(int) bool { return false }, len(rs.jobs))
		if ns.online && !js.held {
			asg := s.assignment(js, hosts, nodeIPs)
			after = append(after, sendEffect(ns, api.AgentMessage{Type: "assign", Jobs: []api.Assignment{asg}}))
		}
	}
	// The Cycle places it as the plan did (the placements in job order, as
	// runningOf reads them back).
	if err := s.cycle.Start(st, now); err != nil {
		s.log.Error("the scheduler's cycle did not hold a run it started", "run_id", rs.rec.ID, "err", err)
		s.cycle.Rescan()
	}
	s.unqueueLocked(rs, true)
	if r, ok := s.runningOf(rs); ok {
		rs.w().cyc = &r
	}
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "placed", Message: "on " + strings.Join(hosts, ",")})
	s.aggregate(rs, now, b)
	return after
}
