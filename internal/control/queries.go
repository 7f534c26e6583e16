package control

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Queries read the cluster and change nothing; their caller serialises
// them with the inputs, as Step's.

// Counts are how many runs are active, how many of them wait, how many
// jobs are active and how many nodes are known.
func (s *Cluster) Counts() (runs, waiting, jobs, nodes int) {
	return len(s.runs), len(s.pending), len(s.jobs), len(s.nodes)
}

// BlockedBy is what the last pass said waiting run id waits for; ok says
// it waits.
func (s *Cluster) BlockedBy(id int64) (by []int64, ok bool) {
	rs, ok := s.pending[id]
	if !ok {
		return nil, false
	}
	return slices.Clone(rs.blockedBy), true
}

// Nodes are the nodes as the API shows them, by name.
func (s *Cluster) Nodes() []api.Node {
	out := make([]api.Node, 0, len(s.nodes))
	for _, ns := range s.nodes {
		out = append(out, s.apiNodeLocked(ns))
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// Job is active job id's record (its allocation not encoded), and ok.
func (s *Cluster) Job(id int64) (store.Job, bool) {
	js, ok := s.jobs[id]
	if !ok {
		return store.Job{}, false
	}
	return js.rec, true
}

// ActiveRun is active run id's record and its jobs' (the current attempt's,
// by number), and ok.
func (s *Cluster) ActiveRun(id int64) (store.Run, []store.Job, bool) {
	rs, ok := s.runs[id]
	if !ok {
		return store.Run{}, nil, false
	}
	jobs := make([]store.Job, max(len(rs.jobs), int(rs.unmade.n)))
	for k := range jobs {
		if rs.unmade.n > 0 {
			jobs[k] = rs.unmade.record(id, k)
		} else {
			jobs[k] = rs.jobs[k].rec
		}
	}
	rec := rs.rec
	if len(rec.Spec) == 0 {
		rec.Spec, _ = json.Marshal(rs.task()) // an array's task: made from its array's
	}
	return rec, jobs, true
}

// ActiveRunRecord is active run id's record (no jobs, no copy of them),
// and ok.
func (s *Cluster) ActiveRunRecord(id int64) (store.Run, bool) {
	rs, ok := s.runs[id]
	if !ok {
		return store.Run{}, false
	}
	return rs.rec, true
}

// RunIDs are the active runs' IDs, in no order.
func (s *Cluster) RunIDs() []int64 {
	ids := make([]int64, 0, len(s.runs))
	for id := range s.runs {
		ids = append(ids, id)
	}
	return ids
}

// Priorities is the scheduler's view of every waiting run at now, for
// their priority factors, with each run's name and user: the Cycle's
// (its usage scaled by a factor common to all accounts, which fairshare
// does not see), with the runs changed since the last pass as they are
// now.
func (s *Cluster) Priorities(now time.Time) (sched.Snapshot, map[int64][2]string) {
	snap := s.cycle.Snapshot(now)
	at := make(map[int64]int, len(snap.Pending))
	for i, p := range snap.Pending {
		at[p.RunID] = i
	}
	for _, id := range slices.Sorted(maps.Keys(s.fresh)) {
		rs, ok := s.pending[id]
		if !ok {
			continue
		}
		if i, ok := at[id]; ok {
			snap.Pending[i] = s.pendingOf(rs, snap.Pending[i].Hold)
		} else {
			snap.Pending = append(snap.Pending, s.pendingOf(rs, ""))
		}
	}
	names := map[int64][2]string{}
	for id, rs := range s.pending {
		names[id] = [2]string{rs.rec.Name, rs.user}
	}
	return snap, names
}

// PrioritiesOf is Priorities for the waiting runs among ids only: their
// factors (Priorities' over every waiting run) and names and users,
// computed without copying the queue. False when it cannot: a run queued
// since the last pass brings an account the Cycle's fairshare tree does
// not count yet (the caller copies the queue then, as Priorities does).
func (s *Cluster) PrioritiesOf(now time.Time, ids []int64) (map[int64]sched.Factors, map[int64][2]string, bool) {
	for _, rs := range s.fresh {
		if _, waits := s.pending[rs.rec.ID]; waits && !s.cycle.Counts(sched.Account{Project: rs.project, User: rs.user}) {
			return nil, nil, false
		}
	}
	var ps []sched.Pending
	names := map[int64][2]string{}
	for _, id := range ids {
		rs, ok := s.pending[id]
		if !ok || names[id] != ([2]string{}) {
			continue
		}
		p, ok := s.cycle.PendingOf(id)
		if _, fresh := s.fresh[id]; fresh || !ok {
			p = s.pendingOf(rs, p.Hold)
		}
		ps = append(ps, p)
		names[id] = [2]string{rs.rec.Name, rs.user}
	}
	out := make(map[int64]sched.Factors, len(ps))
	for i, f := range s.cycle.FactorsOf(now, ps) {
		out[ps[i].RunID] = f
	}
	return out, names, true
}

// Plan is what a configuration would ask of the nodes under the rules in
// force (held: its time limit is over every fleet's), and the nodes as the
// scheduler sees them now, by name, with their container engines.
func (s *Cluster) Plan(t *spec.Task, project string) (req sched.Request, held bool, nodes []sched.Node, engines map[string]string) {
	rs := s.newRunState(store.Run{}, t, "", project)
	engines = map[string]string{}
	for _, ns := range s.nodes {
		nodes = append(nodes, s.schedNode(ns))
		engines[ns.info.Name] = ns.info.Containers
	}
	sort.Slice(nodes, func(i, k int) bool { return nodes[i].Name < nodes[k].Name })
	return *rs.req, rs.hold != "", nodes, engines
}

// Due is when the cluster next needs a pass whatever happens meanwhile:
// a held run's back-off ends, or changed pending reasons must be written
// (zero: no such time).
func (s *Cluster) Due() time.Time {
	due := s.holdUntil
	if len(s.reasons) > 0 && (due.IsZero() || s.reasonsDue.Before(due)) {
		due = s.reasonsDue
	}
	return due
}

// Check verifies what must hold of the cluster after every input, and
// names the first thing that does not: every job is held by at most one
// node, the node it is placed on; a node's count of used CPUs is the sum
// of its jobs' and within what it has; no final run stays in memory; the
// scheduler's Cycle holds what the cluster does (checkCycle).
func (s *Cluster) Check() error {
	if !reflect.ValueOf(noRare).IsZero() {
		return fmt.Errorf("the shared empty rare part of runs was written: %+v", noRare)
	}
	seen := map[int64]string{}
	for name, ns := range s.nodes {
		cpus := 0
		for id, js := range ns.jobs {
			if other, dup := seen[id]; dup {
				return fmt.Errorf("job %d is on %s and %s", id, other, name)
			}
			seen[id] = name
			if js.rec.Node != name {
				return fmt.Errorf("job %d is held by %s but placed on %s", id, name, js.rec.Node)
			}
			cpus += js.alloc.CPUs
		}
		if cpus != ns.usedCPU || cpus > ns.info.CPUs {
			return fmt.Errorf("node %s holds %d CPUs of %d (used count %d)", name, cpus, ns.info.CPUs, ns.usedCPU)
		}
	}
	for id, rs := range s.runs {
		if api.Status(rs.rec.Status).Finished() {
			return fmt.Errorf("final run %d is still in memory", id)
		}
	}
	if err := s.checkRecords(); err != nil {
		return err
	}
	return s.checkCycle()
}

// checkCycle verifies that the scheduler's Cycle holds what the cluster
// does: every node as it is now (syncNode was called at each change), what
// is free on it counted from the running runs it was told of, each placed
// run as runningOf reads it (syncRun), and no run waiting in it that does
// not wait here.
func (s *Cluster) checkCycle() error {
	snap := s.cycle.Snapshot(time.Time{})
	if len(snap.Nodes) != len(s.nodes) {
		return fmt.Errorf("the cycle has %d nodes, the cluster %d", len(snap.Nodes), len(s.nodes))
	}
	for _, n := range snap.Nodes {
		ns, ok := s.nodes[n.Name]
		if !ok {
			return fmt.Errorf("the cycle has node %s, the cluster none", n.Name)
		}
		now := s.schedNode(ns)
		if !sameNode(&n, now) || n.FreeCPUs != now.FreeCPUs || n.FreeMemory != now.FreeMemory || !slices.Equal(n.FreeGPUs, now.FreeGPUs) {
			return fmt.Errorf("node %s: the cycle has %+v, the cluster %+v", n.Name, n, now)
		}
	}
	held := 0
	for id, rs := range s.runs {
		r, ok := s.runningOf(rs)
		if !ok {
			if rs.r().cyc != nil {
				return fmt.Errorf("run %d holds nothing, the cycle has it running", id)
			}
			continue
		}
		held++
		if cyc := rs.r().cyc; cyc == nil || !sameRunning(cyc, &r) {
			return fmt.Errorf("run %d: the cycle has it running as %+v, the cluster as %+v", id, cyc, r)
		}
	}
	running := map[int64]bool{}
	for _, r := range snap.Running {
		running[r.RunID] = true
		rs, ok := s.runs[r.RunID]
		if cyc := rs.r().cyc; !ok || cyc == nil || !sameRunning(cyc, &r) {
			return fmt.Errorf("run %d: the cycle has it running as %+v, the cluster does not", r.RunID, r)
		}
	}
	if held != len(snap.Running) {
		return fmt.Errorf("the cycle has %d runs running, the cluster %d", len(snap.Running), held)
	}
	for _, p := range snap.Pending {
		if rs, ok := s.pending[p.RunID]; !ok || !rs.queued {
			return fmt.Errorf("run %d waits in the cycle, not in the cluster", p.RunID)
		}
	}
	return nil
}

// Waiting is a waiting run as the last pass left it.
type Waiting struct {
	ID             int64
	Reason         string
	EstimatedStart time.Time
	BlockedBy      []int64
}

// Waiting are the waiting runs as the last passes left them, by ID.
func (s *Cluster) Waiting() []Waiting {
	out := make([]Waiting, 0, len(s.pending))
	for id, rs := range s.pending {
		out = append(out, Waiting{ID: id, Reason: rs.rec.Reason, EstimatedStart: rs.rec.EstimatedStart, BlockedBy: slices.Clone(rs.blockedBy)})
	}
	slices.SortFunc(out, func(a, b Waiting) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// checkRecords verifies that each active array's and schedule's own record
// agrees with the cluster: an array's counts with its tasks (every task
// made has ended done or failed, or is live), a schedule's next fire with
// its run row's estimate.
func (s *Cluster) checkRecords() error {
	for id, rs := range s.arrays {
		a := rs.array
		if a == nil || a.rec.ID != id || !a.rec.Active {
			return fmt.Errorf("array %d: record %+v", id, a)
		}
		if ended := len(a.tasks) - len(a.live); a.rec.Done+a.rec.Failed != ended {
			return fmt.Errorf("array %d: %d tasks ended, the record counts %d done and %d failed", id, ended, a.rec.Done, a.rec.Failed)
		}
		if a.rec.Next < len(a.tasks) || a.rec.Next > a.count() {
			return fmt.Errorf("array %d: %d tasks made of %d, the record says %d", id, len(a.tasks), a.count(), a.rec.Next)
		}
	}
	for id, rs := range s.schedules {
		st := rs.r().sched
		if st == nil || st.rec.ID != id || !st.rec.Active || !st.rec.NextFire.Equal(rs.rec.EstimatedStart) {
			return fmt.Errorf("schedule %d: record %+v, run estimate %v", id, st, rs.rec.EstimatedStart)
		}
	}
	return nil
}
