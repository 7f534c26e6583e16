package control

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/store"
)

// Dependencies, as Slurm's: a run waits (reason Dependency) until the runs
// it names have started (after), ended (afterany), ended done (afterok) or
// ended otherwise (afternotok); aftercorr ties task i of an array to task i
// of another. A condition that can no longer be met leaves the run waiting
// with DependencyNeverSatisfied, or cancels it when it asks
// (kill_invalid_depend). singleton: one active run of a name per user.
//
// At submission every name is resolved into a canonical reference — a run
// ID, or ARRAYID_INDEX for a task of an array that may not exist yet —
// written back into the stored spec, so that a restart needs no names.

// Pending reasons of dependencies, as Slurm names them.
const (
	reasonDependency      = string(lifecycle.ReasonDependency)
	reasonDependencyNever = string(lifecycle.ReasonDependencyNever)
)

// Outcome is what a dependency needs to know of a run.
type Outcome struct {
	started bool // began to run (or ended without running)
	final   bool
	ok      bool // ended done
}

var TaskRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.+)_(\d+)$`) })

func OutcomeOf(r *store.Run) Outcome {
	st := api.Status(r.Status)
	return Outcome{started: !r.StartedAt.IsZero() || st.Finished(), final: st.Finished(), ok: st == api.StatusDone}
}

// outcomeLocked is what is known of run id now: from memory while it is
// active, else from the cache of ended runs.
func (s *Cluster) outcomeLocked(id int64) (Outcome, bool) {
	if rs, ok := s.runs[id]; ok {
		st := api.Status(rs.rec.Status)
		return Outcome{started: !rs.rec.StartedAt.IsZero() || st == api.StatusRunning}, true
	}
	o, ok := s.ended[id]
	return o, ok
}

// taskOutcomeLocked is the outcome of task index of array arrayID, which may
// not exist yet.
func (s *Cluster) taskOutcomeLocked(arrayID int64, index int) Outcome {
	if a, ok := s.runs[arrayID]; ok && a.array != nil {
		if id, ok := a.array.tasks[index]; ok {
			o, _ := s.outcomeLocked(id)
			return o
		}
		if a.array.cancelled(index) {
			return Outcome{started: true, final: true}
		}
		return Outcome{}
	}
	// The array has ended: every task has, each with its own outcome.
	if a, ok := s.doneArrays[arrayID]; ok {
		if id, ok := a.tasks[index]; ok {
			if o, ok := s.ended[id]; ok {
				return o
			}
		}
		if !a.spec.Contains(index) {
			return Outcome{started: true, final: true, ok: true} // no such task: nothing to wait for
		}
	}
	if o, ok := s.ended[arrayID]; ok {
		return Outcome{started: true, final: true, ok: o.ok}
	}
	return Outcome{started: true, final: true}
}

// met says of one condition on one reference: met, pending, or never.
type verdict int

const (
	pendingDep verdict = iota
	metDep
	neverDep
)

func judge(typ string, o Outcome) verdict {
	switch typ {
	case "after":
		if o.started {
			return metDep
		}
	case "afterany":
		if o.final {
			return metDep
		}
	case "afterok", "aftercorr":
		if o.final && o.ok {
			return metDep
		}
		if o.final {
			return neverDep
		}
	case "afternotok":
		if o.final && !o.ok {
			return metDep
		}
		if o.final {
			return neverDep
		}
	}
	return pendingDep
}

// depHoldLocked is why rs may not start yet because of its dependencies:
// "" (it may), Dependency, or DependencyNeverSatisfied.
func (s *Cluster) depHoldLocked(rs *runState) string {
	deps := rs.r().deps
	if len(deps) == 0 {
		return ""
	}
	any := rs.r().depAny
	met, never := 0, 0
	for _, d := range deps {
		v := metDep
		for _, ref := range d.Runs {
			var o Outcome
			id, index := ParseRef(ref)
			switch {
			case d.Type == "aftercorr":
				if rs.rec.ArrayID == 0 {
					continue
				}
				o = s.taskOutcomeLocked(id, rs.rec.ArrayIndex)
			case index >= 0:
				o = s.taskOutcomeLocked(id, index)
			default:
				var known bool
				if o, known = s.outcomeLocked(id); !known {
					o = Outcome{started: true, final: true} // long gone: ended, outcome unknown
				}
			}
			switch judge(d.Type, o) {
			case neverDep:
				v = neverDep
			case pendingDep:
				if v != neverDep {
					v = pendingDep
				}
			}
		}
		switch v {
		case metDep:
			met++
		case neverDep:
			never++
		}
	}
	switch {
	case any && met > 0, !any && met == len(deps):
		return ""
	case any && never == len(deps), !any && never > 0:
		return reasonDependencyNever
	}
	return reasonDependency
}

func ParseRef(ref string) (int64, int) {
	a, b, ok := strings.Cut(ref, "_")
	id, _ := strconv.ParseInt(a, 10, 64)
	if !ok {
		return id, -1
	}
	index, _ := strconv.Atoi(b)
	return id, index
}

// watchLocked records rs as waiting on the runs its dependencies name, so
// that their changes put it back in front of the scheduler.
func (s *Cluster) watchLocked(rs *runState) {
	for _, d := range rs.r().deps {
		for _, ref := range d.Runs {
			id, _ := ParseRef(ref)
			if !slices.Contains(s.waiters[id], rs.rec.ID) {
				s.waiters[id] = append(s.waiters[id], rs.rec.ID)
			}
		}
	}
}

// changedLocked tells the runs waiting on id (or on its array) that it
// changed: they are tried again in the next pass.
func (s *Cluster) changedLocked(id, arrayID int64) {
	ids := []int64{id}
	if arrayID != 0 {
		ids = append(ids, arrayID)
	}
	for _, x := range ids {
		for _, w := range s.waiters[x] {
			if ws, ok := s.pending[w]; ok {
				s.fresh[w] = ws
			}
		}
	}
}

// endedLocked remembers a final run's outcome for dependencies, bounded.
func (s *Cluster) endedLocked(rs *runState) {
	s.ended[rs.rec.ID] = OutcomeOf(&rs.rec)
	delete(s.waiters, rs.rec.ID)
	if len(s.ended) > 200_000 {
		cut := rs.rec.ID - 100_000
		for id := range s.ended {
			if id < cut {
				delete(s.ended, id)
			}
		}
	}
}

// singletonHoldsLocked returns the singleton runs among candidates that
// must wait: another run of the same name and user is active (placed or
// running), or an older one of them goes first in this pass.
func (s *Cluster) singletonHoldsLocked(candidates map[int64]*runState) map[int64]bool {
	var singles []*runState
	for _, rs := range candidates {
		if rs.r().singleton {
			singles = append(singles, rs)
		}
	}
	if len(singles) == 0 {
		return nil
	}
	key := func(rs *runState) string { return rs.user + "\x00" + rs.rec.Name }
	busy := map[string]bool{}
	for _, rs := range s.runs {
		if _, waiting := s.pending[rs.rec.ID]; !waiting && rs.array == nil {
			busy[key(rs)] = true
		}
	}
	slices.SortFunc(singles, func(a, b *runState) int {
		if c := a.rec.SubmittedAt.Compare(b.rec.SubmittedAt); c != 0 {
			return c
		}
		return int(a.rec.ID - b.rec.ID)
	})
	held := map[int64]bool{}
	for _, rs := range singles {
		if k := key(rs); busy[k] {
			held[rs.rec.ID] = true
		} else {
			busy[k] = true // the oldest goes; the others wait for it
		}
	}
	return held
}

// holdsLocked decides, for this pass's candidates, why each may not start
// yet outside the scheduler's own reasons: the run's static hold
// (PartitionTimeLimit), its dependencies, singleton. A run whose
// dependencies can never be met and that asks for it is cancelled here, in b.
func (s *Cluster) holdsLocked(candidates map[int64]*runState, now time.Time, b *store.Batch) map[int64]string {
	holds := map[int64]string{}
	singles := s.singletonHoldsLocked(candidates)
	var cancel []*runState
	for id, rs := range candidates {
		if s.retryExpiredLocked(rs, now, b) {
			delete(candidates, id)
			continue
		}
		switch {
		case rs.hold != "":
			holds[id] = rs.hold
		case rs.held:
			holds[id] = string(lifecycle.ReasonHeldUser)
		case now.Before(rs.beginAt()):
			holds[id] = string(lifecycle.ReasonBeginTime)
			s.lookAgainLocked(rs.beginAt())
		case rs.r().retry != nil && now.Before(rs.r().retry.NotBefore):
			holds[id] = string(lifecycle.ReasonBeginTime)
			s.lookAgainLocked(rs.r().retry.NotBefore)
		default:
			h := s.depHoldLocked(rs)
			if h == reasonDependencyNever && rs.r().killInvalid {
				cancel = append(cancel, rs)
				continue
			}
			if h == "" && singles[id] {
				h = reasonDependency
			}
			if h != "" {
				holds[id] = h
			}
		}
	}
	for _, rs := range cancel {
		delete(candidates, rs.rec.ID)
		b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "cancelled", Message: "a dependency can never be satisfied (kill_invalid_depend)"})
		s.stepLocked(rs, lifecycle.Event{Kind: lifecycle.Failed, Status: lifecycle.StatusTerminated, Reason: lifecycle.ReasonDependencyNever}, now, b)
	}
	return holds
}
