package server

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
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

// outcome is what a dependency needs to know of a run.
type outcome struct {
	started bool // began to run (or ended without running)
	final   bool
	ok      bool // ended done
}

var taskRef = regexp.MustCompile(`^(.+)_(\d+)$`)

// resolveDeps rewrites t's dependencies into canonical references, reading
// the store (without the server's lock): unknown runs are an error that
// names the field. It returns the outcomes of the final runs it met, for the
// in-memory cache.
func (s *Server) resolveDeps(ctx context.Context, t *spec.Task) (map[int64]outcome, error) {
	seen := map[int64]outcome{}
	for i := range t.DependsOn {
		d := &t.DependsOn[i]
		field := fmt.Sprintf("depends_on[%d].%s", i, d.Type)
		d.IDs = make([]int64, len(d.Runs))
		for k, ref := range d.Runs {
			run, index, err := s.lookupRef(ctx, ref)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
			}
			if d.Type == "aftercorr" && (!isArrayRun(run) || t.Array == "") {
				return nil, fmt.Errorf("%w: %s: aftercorr ties the tasks of two arrays: %q is not an array, or this run is not one", ErrInvalid, field, ref)
			}
			d.IDs[k] = run.ID
			d.Runs[k] = strconv.FormatInt(run.ID, 10)
			if index >= 0 {
				d.Runs[k] += "_" + strconv.Itoa(index)
			}
			if api.Status(run.Status).Finished() {
				seen[run.ID] = outcomeOf(run)
			}
		}
	}
	return seen, nil
}

// lookupRef finds the run a reference names: an ID, a name (the newest run
// of that name), or a task of an array (ID_INDEX or NAME_INDEX). For a
// task not created yet it returns the array and the index; else index -1.
func (s *Server) lookupRef(ctx context.Context, ref string) (*store.Run, int, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		run, err := s.store.GetRun(ctx, id)
		if err != nil {
			return nil, -1, fmt.Errorf("no run %d", id)
		}
		return run, -1, nil
	}
	if run, err := s.store.FindRun(ctx, s.projectID, ref); err == nil {
		return run, -1, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, -1, err
	}
	if m := taskRef.FindStringSubmatch(ref); m != nil {
		index, _ := strconv.Atoi(m[2])
		array, _, err := s.lookupRef(ctx, m[1])
		if err == nil {
			if task, err := s.store.FindArrayTask(ctx, array.ID, index); err == nil {
				return task, -1, nil
			}
			return array, index, nil
		}
	}
	return nil, -1, fmt.Errorf("no run named %q", ref)
}

func outcomeOf(r *store.Run) outcome {
	st := api.Status(r.Status)
	return outcome{started: !r.StartedAt.IsZero() || st.Finished(), final: st.Finished(), ok: st == api.StatusDone}
}

// outcomeLocked is what is known of run id now: from memory while it is
// active, else from the cache of ended runs.
func (s *cluster) outcomeLocked(id int64) (outcome, bool) {
	if rs, ok := s.runs[id]; ok {
		st := api.Status(rs.rec.Status)
		return outcome{started: !rs.rec.StartedAt.IsZero() || st == api.StatusRunning}, true
	}
	o, ok := s.ended[id]
	return o, ok
}

// taskOutcomeLocked is the outcome of task index of array arrayID, which may
// not exist yet.
func (s *cluster) taskOutcomeLocked(arrayID int64, index int) outcome {
	if a, ok := s.runs[arrayID]; ok && a.array != nil {
		if id, ok := a.array.tasks[index]; ok {
			o, _ := s.outcomeLocked(id)
			return o
		}
		if a.array.cancelled(index) {
			return outcome{started: true, final: true}
		}
		return outcome{}
	}
	// The array has ended: every task has, each with its own outcome.
	if a, ok := s.doneArrays[arrayID]; ok {
		if id, ok := a.tasks[index]; ok {
			if o, ok := s.ended[id]; ok {
				return o
			}
		}
		if !a.spec.Contains(index) {
			return outcome{started: true, final: true, ok: true} // no such task: nothing to wait for
		}
	}
	if o, ok := s.ended[arrayID]; ok {
		return outcome{started: true, final: true, ok: o.ok}
	}
	return outcome{started: true, final: true}
}

// met says of one condition on one reference: met, pending, or never.
type verdict int

const (
	pendingDep verdict = iota
	metDep
	neverDep
)

func judge(typ string, o outcome) verdict {
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
func (s *cluster) depHoldLocked(rs *runState) string {
	deps := rs.deps
	if len(deps) == 0 {
		return ""
	}
	any := rs.depAny
	met, never := 0, 0
	for _, d := range deps {
		v := metDep
		for _, ref := range d.Runs {
			var o outcome
			id, index := parseRef(ref)
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
					o = outcome{started: true, final: true} // long gone: ended, outcome unknown
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

func parseRef(ref string) (int64, int) {
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
func (s *cluster) watchLocked(rs *runState) {
	for _, d := range rs.deps {
		for _, ref := range d.Runs {
			id, _ := parseRef(ref)
			if !slices.Contains(s.waiters[id], rs.rec.ID) {
				s.waiters[id] = append(s.waiters[id], rs.rec.ID)
			}
		}
	}
}

// changedLocked tells the runs waiting on id (or on its array) that it
// changed: they are tried again in the next pass.
func (s *cluster) changedLocked(id, arrayID int64) {
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
func (s *cluster) endedLocked(rs *runState) {
	s.ended[rs.rec.ID] = outcomeOf(&rs.rec)
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
func (s *cluster) singletonHoldsLocked(candidates map[int64]*runState) map[int64]bool {
	var singles []*runState
	for _, rs := range candidates {
		if rs.singleton {
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
func (s *cluster) holdsLocked(candidates map[int64]*runState, now time.Time, b *store.Batch) map[int64]string {
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
		case !rs.begin.IsZero() && now.Before(rs.begin):
			holds[id] = string(lifecycle.ReasonBeginTime)
			s.lookAgainLocked(rs.begin)
		case rs.retry != nil && now.Before(rs.retry.NotBefore):
			holds[id] = string(lifecycle.ReasonBeginTime)
			s.lookAgainLocked(rs.retry.NotBefore)
		default:
			h := s.depHoldLocked(rs)
			if h == reasonDependencyNever && rs.killInvalid {
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
