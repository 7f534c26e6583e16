package control

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// runMeta is the server's own state of a run, beside its record (meta):
// an array's progress, a schedule's next tick, retries, a user's hold and a
// begin time. Each part is set only on runs that have it.
type runMeta struct {
	Retry *lifecycle.Retries `json:"retry,omitempty"`
	Held  bool               `json:"held,omitempty"`
	Begin time.Time          `json:"begin,omitzero"`
}

// IsArrayRun tells whether a stored run is the run row of an array (the
// one that lists it; its progress is in its own record, store.Array): a
// run that is not a task and whose configuration has `array:`.
func IsArrayRun(r *store.Run) bool {
	if r.ArrayID != 0 || !bytes.Contains(r.Spec, []byte(`"array":`)) {
		return false
	}
	var t struct {
		Array string `json:"array"`
	}
	return json.Unmarshal(r.Spec, &t) == nil && t.Array != ""
}

// saveMeta writes the run's hold, begin time and retries into its
// record's meta (an array's or a schedule's progress is in its own record).
func (rs *runState) saveMeta() {
	m := runMeta{Retry: rs.r().retry, Held: rs.held, Begin: rs.beginAt()}
	if m == (runMeta{}) {
		rs.rec.Meta = nil
		return
	}
	rs.rec.Meta, _ = json.Marshal(m)
}

// loadMeta reads the parts plain runs keep (hold, begin, retries); arrays
// and schedules read their own.
func (rs *runState) loadMeta() {
	if len(rs.rec.Meta) == 0 {
		return
	}
	var m runMeta
	if json.Unmarshal(rs.rec.Meta, &m) != nil {
		return
	}
	rs.held = m.Held
	if m.Retry != nil || rs.rare != nil {
		rs.w().retry = m.Retry
	}
	rs.setBegin(m.Begin)
}

// onControl applies a hold, release, requeue or update to a run.
func (s *Cluster) onControl(now time.Time, in ControlInput) error {
	id, req, admin := in.ID, in.Req, in.Admin
	rs, ok := s.runs[id]
	if !ok {
		if req.Action == "update" {
			return fmt.Errorf("%w: run %d has ended (Slurm: Job/step already completing or completed)", ErrInvalid, id)
		}
		return fmt.Errorf("%w: run %d has ended", ErrInvalid, id)
	}
	b := &store.Batch{}
	var after []Effect
	waiting := func() error {
		if _, ok := s.pending[id]; !ok && rs.array == nil {
			return fmt.Errorf("%w: run %d is not waiting (%s): only a waiting run can be changed so", ErrInvalid, id, rs.rec.Status)
		}
		return nil
	}
	var err error
	switch req.Action {
	case "hold", "release":
		if err = waiting(); err == nil {
			rs.held = req.Action == "hold"
			if rs.array != nil { // an array: its waiting tasks too
				for _, t := range rs.array.live {
					if _, ok := s.pending[t.rec.ID]; ok {
						t.held = rs.held
						t.saveMeta()
						b.Runs = append(b.Runs, runCopy(t))
						s.fresh[t.rec.ID] = t
					}
				}
			}
			rs.saveMeta()
			s.fresh[id] = rs
			b.Events = append(b.Events, &store.Event{RunID: id, Time: now, Type: req.Action})
		}
	case "requeue":
		if _, waitingNow := s.pending[id]; waitingNow || rs.array != nil {
			err = fmt.Errorf("%w: run %d is not running: nothing to requeue", ErrInvalid, id)
			break
		}
		if c := lifecycle.StopCause(rs.rec.StopReq); !c.Admits(lifecycle.StopRequeue) {
			// A run a user stops ends: Slurm refuses to requeue a completing job.
			err = fmt.Errorf("%w: run %d is being stopped (%s): it cannot be requeued", ErrInvalid, id, c)
			break
		}
		b.Events = append(b.Events, &store.Event{RunID: id, Time: now, Type: "requeue", Message: "requeue requested"})
		after = s.stopLocked(rs, lifecycle.StopRequeue, now, b)
	case "update":
		after, err = s.updateLocked(rs, req, admin, now, b)
	default:
		err = fmt.Errorf("%w: unknown action %q (hold, release, requeue, update)", ErrInvalid, req.Action)
	}
	if err != nil {
		return err
	}
	b.Runs = append(b.Runs, runCopy(rs))
	s.emit(b, append(after, s.notify(id), wakeEffect)...)
	return nil
}

func (s *Cluster) updateLocked(rs *runState, req api.ControlRequest, admin bool, now time.Time, b *store.Batch) (after []Effect, err error) {
	id := rs.rec.ID
	_, waiting := s.pending[id]
	var changed []string
	if req.ArrayThrottle != nil {
		if rs.array == nil {
			return nil, fmt.Errorf("%w: run %d is not an array: it has no throttle", ErrInvalid, id)
		}
		if *req.ArrayThrottle < 0 {
			return nil, fmt.Errorf("%w: array throttle %d: want 0 (none) or more", ErrInvalid, *req.ArrayThrottle)
		}
	}
	if !waiting && (req.Priority != nil || req.Nice != nil) {
		return nil, fmt.Errorf("%w: run %d is not waiting (%s): only a waiting run's priority or nice can change", ErrInvalid, id, rs.rec.Status)
	}
	if req.Priority != nil && (*req.Priority < 0 || *req.Priority > 100) {
		return nil, fmt.Errorf("%w: priority %d: want 0..100", ErrInvalid, *req.Priority)
	}
	if req.Nice != nil {
		// Slurm's range; a negative nice raises the run above others,
		// which only an administrator may do (as in Slurm).
		if n := *req.Nice; n < -spec.MaxNice || n > spec.MaxNice {
			return nil, fmt.Errorf("%w: nice %d: want %d..%d", ErrInvalid, n, -spec.MaxNice, spec.MaxNice)
		}
		if *req.Nice < 0 && !admin {
			return nil, fmt.Errorf("%w: nice %d: only an administrator may set a negative nice (Slurm: Access/permission denied)", ErrForbidden, *req.Nice)
		}
	}
	for k := range req.Tags {
		if k == "" {
			return nil, fmt.Errorf("%w: tags: empty tag name", ErrInvalid)
		}
	}
	// The runs a time limit or tags change: the run, or an array's own
	// record (for the tasks to come) and its live tasks.
	targets := []*runState{rs}
	if rs.array != nil {
		for _, t := range rs.array.live {
			targets = append(targets, t)
		}
		slices.SortFunc(targets[1:], func(a, b *runState) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
	}
	if req.TimeLimit != nil {
		if *req.TimeLimit < 0 {
			return nil, fmt.Errorf("%w: time limit %d s: want 0 (none) or more", ErrInvalid, *req.TimeLimit)
		}
		limit := time.Duration(*req.TimeLimit) * time.Second
		for _, t := range targets {
			if err := s.limitAllowedLocked(t, limit, admin); err != nil {
				return nil, err
			}
		}
	}
	// Checked: from here on nothing fails. Each target's configuration
	// changes in one copy, stored once at the end.
	tasks := make([]*spec.Task, len(targets))
	for i, t := range targets {
		tasks[i] = t.task()
	}
	if req.ArrayThrottle != nil {
		rs.array.rec.Throttle = *req.ArrayThrottle
		s.cycle.SetArrayLimit(strconv.FormatInt(id, 10), rs.array.rec.Throttle)
		s.cycDirty = true
		s.freed = true // the throttle may let more start
		changed = append(changed, fmt.Sprintf("array throttle %d", rs.array.rec.Throttle))
	}
	if req.Priority != nil {
		rs.rec.Priority, tasks[0].Priority = *req.Priority, *req.Priority
		changed = append(changed, fmt.Sprintf("priority %d", *req.Priority))
	}
	if req.Nice != nil {
		tasks[0].Nice = *req.Nice
		changed = append(changed, fmt.Sprintf("nice %d", *req.Nice))
	}
	if req.TimeLimit != nil {
		limit := time.Duration(*req.TimeLimit) * time.Second
		for i, t := range targets {
			after = append(after, s.setLimitLocked(t, tasks[i], limit)...)
		}
		changed = append(changed, fmt.Sprintf("time limit %s", limit))
	}
	if len(req.Tags) > 0 {
		keys := slices.Sorted(maps.Keys(req.Tags))
		for _, t := range tasks {
			for _, k := range keys {
				if v := req.Tags[k]; v == "" {
					delete(t.Tags, k)
				} else {
					if t.Tags == nil {
						t.Tags = map[string]string{}
					}
					t.Tags[k] = v
				}
			}
		}
		changed = append(changed, fmt.Sprintf("tags %s", strings.Join(keys, ",")))
	}
	if len(changed) == 0 {
		return nil, fmt.Errorf("%w: nothing to update", ErrInvalid)
	}
	for i, t := range targets {
		t.setTask(tasks[i])
		s.syncRun(t) // a placed run's new time limit: its expected end
		if t == rs {
			continue // the caller stores rs
		}
		b.Runs = append(b.Runs, runCopy(t))
		if _, ok := s.pending[t.rec.ID]; ok {
			s.fresh[t.rec.ID] = t
		}
	}
	rs.saveMeta()
	if waiting {
		s.fresh[id] = rs
	}
	b.Events = append(b.Events, &store.Event{RunID: id, Time: now, Type: "update", Message: fmt.Sprint(changed)})
	return after, nil
}

// limitAllowedLocked refuses a new time limit Slurm would refuse: a
// running run's limit goes up (or to none) only by an admin's hand.
func (s *Cluster) limitAllowedLocked(rs *runState, limit time.Duration, admin bool) error {
	if _, waiting := s.pending[rs.rec.ID]; waiting || rs.array != nil || admin {
		return nil
	}
	if raised := rs.limit > 0 && (limit == 0 || limit > rs.limit); raised {
		return fmt.Errorf("%w: run %d is running: only an admin may raise its time limit (%s to %s) (Slurm: Access/permission denied)",
			ErrInvalid, rs.rec.ID, limitText(rs.limit), limitText(limit))
	}
	return nil
}

func limitText(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return d.String()
}

// setLimitLocked gives rs a new time limit: in its configuration t (which survives a
// restart), in the scheduler's view (its expected end, which backfill
// reservations count on) and, for a run placed on nodes, in its jobs'
// supervisors, which end a job whose new limit has passed at once. It
// returns the messages to send once the change is stored.
func (s *Cluster) setLimitLocked(rs *runState, t *spec.Task, limit time.Duration) (after []Effect) {
	rs.limit = limit
	if limit == 0 {
		t.MaxDuration = nil
	} else {
		d := spec.Duration(limit / time.Second)
		t.MaxDuration = &d
	}
	if _, waiting := s.pending[rs.rec.ID]; waiting || rs.array != nil {
		return nil
	}
	s.freed = true // reservations behind it move
	for _, js := range rs.jobs {
		switch api.Status(js.rec.Status) {
		case api.StatusProvisioning, api.StatusPulling, api.StatusRunning:
		default:
			continue // not placed yet, or ended; held jobs get it in their assignment
		}
		if js.held {
			continue
		}
		if ns, ok := s.nodes[js.rec.Node]; ok && ns.online {
			l := api.JobLimit{JobID: js.rec.ID, MaxDuration: int64(limit / time.Second)}
			after = append(after, sendEffect(ns, api.AgentMessage{Type: "limit", Limit: &l}))
		}
		// An agent away now learns the limit from its next sync.
	}
	return after
}

// onSignal signals a run's placed jobs (an array's: its live tasks'); it
// answers how many.
func (s *Cluster) onSignal(now time.Time, in SignalInput) (int, error) {
	rs, ok := s.runs[in.ID]
	if !ok {
		return 0, fmt.Errorf("%w: run %d has ended", ErrInvalid, in.ID)
	}
	targets := []*runState{rs}
	if rs.array != nil {
		targets = targets[:0]
		for _, t := range rs.array.live {
			targets = append(targets, t)
		}
	}
	var after []Effect
	sent := 0
	for _, t := range targets {
		for _, js := range t.jobs {
			// Placed jobs: the agent may have started one before the server
			// hears of it; the agent drops the signal for a job whose
			// supervisor has not started yet.
			switch api.Status(js.rec.Status) {
			case api.StatusProvisioning, api.StatusPulling, api.StatusRunning:
			default:
				continue
			}
			if ns, ok := s.nodes[js.rec.Node]; ok && ns.online {
				k := api.KillJob{JobID: js.rec.ID, Signal: in.Signal, BatchOnly: in.BatchOnly, StepsOnly: in.StepsOnly && !in.BatchOnly}
				after = append(after, sendEffect(ns, api.AgentMessage{Type: "signal", Kill: &k}))
				sent++
			}
		}
	}
	b := &store.Batch{Events: []*store.Event{{RunID: in.ID, Time: now, Type: "signal", Message: fmt.Sprintf("signal %d sent to %d running jobs", in.Signal, sent)}}}
	s.emit(b, after...)
	return sent, nil
}
