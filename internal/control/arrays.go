package control

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Arrays. One submission with `array:` stores one record, the array's own
// run (its ID is the array ID, as Slurm's array job ID), and nothing per
// task. Tasks become runs lazily: each pass tops up every array to a window
// of waiting tasks (the throttle, at most ArrayWindow), so an array of
// 100,000 tasks costs the store and the scheduler what its running tasks
// and that window cost. A task is a run named NAME_INDEX with the array's
// spec, ${{ array.index }} filled in, and the array's submit time (so the
// array keeps its place in the queue). The throttle is a scheduler limit
// (JobArrayTaskLimit) and may change while the array runs.

// ArrayWindow is how many tasks of an unthrottled array wait as runs at once.
const ArrayWindow = 256

// arrayState is an array in memory: its own record (store.Array: index
// set, throttle, how many tasks were made, cancelled indices, stopped,
// done and failed counts), which is stored whenever its run row is
// (emit), so that a restart resumes it; and what is rebuilt from its
// tasks.
type arrayState struct {
	rec  store.Array
	spec *spec.ArraySpec
	// tasks maps every created task's index to its run ID; live are the
	// created tasks not final yet.
	tasks map[int]int64
	live  map[int64]*runState
	key   string // the array's limit key (arrayKey), made once
}

func (a *arrayState) cancelled(index int) bool { return slices.Contains(a.rec.Cancel, index) }

// count is how many tasks the array has.
func (a *arrayState) count() int { return a.spec.Count() }

// newArrayLocked sets up the array state of a submitted array run.
func (s *Cluster) newArrayLocked(rs *runState) error {
	as, err := spec.ParseArray(rs.task().Array)
	if err != nil {
		return fmt.Errorf("%w: array: %v", ErrInvalid, err)
	}
	if max := s.cfg.MaxArraySize; as.Max() >= max {
		return fmt.Errorf("%w: array: index %d is over the server's maximum (MaxArraySize %d: indices 0..%d)", ErrInvalid, as.Max(), max, max-1)
	}
	rs.array = &arrayState{spec: as, tasks: map[int]int64{}, live: map[int64]*runState{},
		rec: store.Array{ID: rs.rec.ID, ProjectID: rs.rec.ProjectID, UserID: rs.rec.UserID, Indices: rs.task().Array, Throttle: as.Throttle, Active: true}}
	return nil
}

// loadArray restores an array's state from its record and its tasks.
func (s *Cluster) loadArray(rs *runState, rec *store.Array, tasks []*store.Run) error {
	if rec == nil {
		return fmt.Errorf("server: array %d: no array record", rs.rec.ID)
	}
	as, err := spec.ParseArray(rs.task().Array)
	if err != nil {
		return fmt.Errorf("server: array %d: %w", rs.rec.ID, err)
	}
	a := &arrayState{rec: *rec, spec: as, tasks: map[int]int64{}, live: map[int64]*runState{}}
	a.rec.Cancel = slices.Clone(rec.Cancel)
	a.rec.Head = store.Head{} // the runState holds it (rs.rec)
	for _, t := range tasks {
		a.tasks[t.ArrayIndex] = t.ID
		if task, ok := s.runs[t.ID]; ok {
			a.live[t.ID] = task
			task.parent = rs
		} else {
			s.ended[t.ID] = OutcomeOf(t)
		}
	}
	rs.array = a
	return nil
}

// topUpArraysLocked creates the tasks each array may have waiting now.
func (s *Cluster) topUpArraysLocked(now time.Time, b *store.Batch) {
	// In ID order: tasks made for two arrays in one step get their IDs
	// the same way every time (a replay, a transcript).
	for _, id := range slices.Sorted(maps.Keys(s.arrays)) {
		rs := s.arrays[id]
		a := rs.array
		if a.rec.Stopped || a.rec.Next >= a.count() {
			continue
		}
		waiting := 0
		for id := range a.live {
			if _, ok := s.pending[id]; ok {
				waiting++
			}
		}
		window := ArrayWindow
		if a.rec.Throttle > 0 {
			window = min(window, a.rec.Throttle)
		}
		made := false
		for ; waiting < window && a.rec.Next < a.count(); a.rec.Next++ {
			index := a.spec.At(a.rec.Next)
			if a.cancelled(index) {
				continue
			}
			s.newTaskLocked(rs, index, now, b)
			waiting++
			made = true
		}
		if made {
			b.Runs = append(b.Runs, runCopy(rs))
		}
	}
}

// newTaskLocked creates task index of array rs as a pending run.
func (s *Cluster) newTaskLocked(rs *runState, index int, now time.Time, b *store.Batch) {
	a := rs.array
	t := rs.task().ForArrayTask(index, a.count())
	body, _ := json.Marshal(t)
	s.nextRun++
	name := rs.rec.Name + "_" + strconv.Itoa(index)
	if t.Name != "" && t.Name != rs.task().Name {
		name = t.Name // the name has ${{ array.index }} in it
	}
	task := s.newRunState(store.Run{ID: s.nextRun, ProjectID: rs.rec.ProjectID, UserID: rs.rec.UserID,
		Name: name, Status: string(api.StatusSubmitted), Priority: rs.rec.Priority,
		Spec: body, SubmittedAt: rs.rec.SubmittedAt, ArrayID: rs.rec.ID, ArrayIndex: index}, t, rs.user, rs.project)
	task.parent = rs
	task.held = rs.held
	task.setBegin(rs.beginAt())
	task.saveMeta()
	s.queueRunLocked(task, now, b)
	// The task's configuration is its array's with its index filled in:
	// stored with the task's row (just now), not kept in memory, where
	// task() makes it from the array's when needed (a change to it, such
	// as scontrol update, gives the task its own again: setTask). Writes
	// of the row without it leave the stored one (store's upsertRun).
	task.rec.Spec = nil
	a.tasks[index] = task.rec.ID
	a.live[task.rec.ID] = task
}

// taskEndedLocked updates the array when one of its tasks becomes final,
// and makes the array final once every task is.
func (s *Cluster) taskEndedLocked(task *runState, now time.Time) {
	rs := task.parent
	if rs == nil || rs.array == nil {
		return
	}
	a := rs.array
	delete(a.live, task.rec.ID)
	if task.rec.Status != string(api.StatusDone) {
		a.rec.Failed++
	} else {
		a.rec.Done++
	}
	if rs.rec.StartedAt.IsZero() && !task.rec.StartedAt.IsZero() {
		rs.rec.StartedAt = task.rec.StartedAt
	}
	s.arrayFinishedLocked(rs, now)
}

// arrayFinishedLocked makes an array final when no task remains to run.
func (s *Cluster) arrayFinishedLocked(rs *runState, now time.Time) {
	a := rs.array
	if len(a.live) > 0 || (!a.rec.Stopped && a.rec.Next < a.count()) {
		return
	}
	status, reason := lifecycle.ArrayEnd(a.rec.Stopped, len(a.rec.Cancel) > 0 && len(a.tasks) < a.count(), a.rec.Failed)
	rs.rec.Status, rs.rec.Reason, rs.rec.FinishedAt = string(status), string(reason), now
	a.rec.Active = false
	if a.rec.Throttle > 0 {
		s.cycle.SetArrayLimit(strconv.FormatInt(rs.rec.ID, 10), 0)
		s.cycDirty = true
	}
	delete(s.arrays, rs.rec.ID)
	delete(s.runs, rs.rec.ID)
	s.countActive(rs, -1)
	s.changedLocked(rs.rec.ID, 0)
	s.endedLocked(rs)
	s.doneArrays[rs.rec.ID] = a
	if len(s.doneArrays) > 10_000 {
		for id := range s.doneArrays {
			if id < rs.rec.ID-100_000 {
				delete(s.doneArrays, id)
			}
		}
	}
}

// stopArrayLocked stops an array: no task is created any more, and every
// live one is stopped.
func (s *Cluster) stopArrayLocked(rs *runState) []int64 {
	rs.array.rec.Stopped = true
	return slices.Sorted(maps.Keys(rs.array.live))
}

// cancelTaskLocked stops task index of array rs before it exists.
func (s *Cluster) cancelTaskLocked(rs *runState, index int, now time.Time, b *store.Batch) error {
	a := rs.array
	if !a.spec.Contains(index) {
		return fmt.Errorf("%w: array %d has no task %d", ErrNotFound, rs.rec.ID, index)
	}
	if _, made := a.tasks[index]; made || a.cancelled(index) {
		return nil
	}
	a.rec.Cancel = append(a.rec.Cancel, index)
	b.Runs = append(b.Runs, runCopy(rs))
	b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "stop", Message: fmt.Sprintf("task %d stopped before it started", index)})
	s.changedLocked(rs.rec.ID, 0)
	s.arrayFinishedLocked(rs, now)
	return nil
}

// pendingIndices is the array's tasks not created yet and not cancelled,
// in Slurm's compact form (for squeue's folded line), with their count:
// computed from the array's ranges, never one index at a time.
func (a *arrayState) pendingIndices() (string, int) {
	if a.rec.Stopped {
		return "", 0
	}
	rest := a.spec.From(a.rec.Next).Without(a.rec.Cancel)
	return rest.String(), rest.Count()
}

// onCancelTask cancels task index of an array before it exists.
func (s *Cluster) onCancelTask(now time.Time, in CancelTaskInput) error {
	rs, ok := s.arrays[in.Array]
	if !ok {
		return nil // the array has ended
	}
	b := &store.Batch{}
	if err := s.cancelTaskLocked(rs, in.Index, now, b); err != nil {
		return err
	}
	s.emit(b, s.notify(in.Array), wakeEffect)
	return nil
}

// ArrayInfo is what the API shows of an array's progress, from its
// stored record (nil when its index set does not parse).
func ArrayInfo(rec *store.Array) *api.ArrayInfo {
	as, err := spec.ParseArray(rec.Indices)
	if err != nil {
		return nil
	}
	a := &arrayState{rec: *rec, spec: as}
	info := &api.ArrayInfo{Indices: as.String(), Count: as.Count(), Throttle: rec.Throttle, Failed: rec.Failed}
	if rec.Active {
		info.Waiting, info.NWaiting = a.pendingIndices()
	}
	return info
}

// record is a copy of the array's record to store, with head h.
func (a *arrayState) record(h store.Head) *store.Array {
	c := a.rec
	c.Cancel = slices.Clone(a.rec.Cancel)
	c.Head = h
	return &c
}

// headOf is what a run row of an array or a schedule holds that lists it:
// its record's head (store.Head).
func headOf(r *store.Run) store.Head {
	return store.Head{Name: r.Name, Status: r.Status, Reason: r.Reason, Priority: r.Priority, Spec: r.Spec,
		SubmittedAt: r.SubmittedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, StopReq: r.StopReq,
		EstimatedStart: r.EstimatedStart, Meta: r.Meta}
}

// addRecords turns the run rows in b of arrays and schedules into their
// records: an array and a schedule have no run row, their record is what
// lists them (store.Head), written whole from the last of their rows in
// b, with what they are now. The code that changes one writes its
// runState's row as for any run; this is the one place that knows the
// store keeps it elsewhere. (A stopped schedule, no longer among the
// active ones, adds its own record: stopScheduleLocked.)
func (s *Cluster) addRecords(b *store.Batch) {
	if len(s.arrays) == 0 && len(s.schedules) == 0 && len(s.doneArrays) == 0 {
		return
	}
	var last map[int64]*store.Run
	var order []int64
	keep := b.Runs[:0]
	for _, r := range b.Runs {
		if r.ArrayID != 0 || !s.isRecord(r.ID) {
			keep = append(keep, r)
			continue
		}
		if last == nil {
			last = map[int64]*store.Run{}
		}
		if _, seen := last[r.ID]; !seen {
			order = append(order, r.ID)
		}
		last[r.ID] = r
	}
	clear(b.Runs[len(keep):])
	b.Runs = keep
	for _, id := range order {
		h := headOf(last[id])
		if rs, ok := s.arrays[id]; ok {
			b.Arrays = append(b.Arrays, rs.array.record(h))
		} else if d, ok := s.doneArrays[id]; ok {
			b.Arrays = append(b.Arrays, d.record(h)) // ended in this batch
		} else {
			b.Schedules = append(b.Schedules, s.schedules[id].r().sched.record(h))
		}
	}
}

// isRecord tells whether id is an active array's or schedule's, or an
// array's that ended since it was last written (doneArrays: those ended
// before a restart, kept for dependencies, have no record loaded).
func (s *Cluster) isRecord(id int64) bool {
	if _, ok := s.arrays[id]; ok {
		return true
	}
	if _, ok := s.schedules[id]; ok {
		return true
	}
	d, ok := s.doneArrays[id]
	return ok && d.rec.ID == id
}
