package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// runMeta is the server's own state of a run, beside its record (meta):
// an array's progress, a schedule's next tick, retries, a user's hold and a
// begin time. Each part is set only on runs that have it.
type runMeta struct {
	Array    *arrayState    `json:"array,omitempty"`
	Schedule *scheduleState `json:"schedule,omitempty"`
	Retry    *retryState    `json:"retry,omitempty"`
	Held     bool           `json:"held,omitempty"`
	Begin    time.Time      `json:"begin,omitzero"`
}

// isArrayRun tells whether a stored run is an array's own record (its meta
// holds the array's progress; meta alone does not say so: held and retried
// runs have meta too).
func isArrayRun(r *store.Run) bool {
	if r.ArrayID != 0 || len(r.Meta) == 0 {
		return false
	}
	var m runMeta
	return json.Unmarshal(r.Meta, &m) == nil && m.Array != nil
}

// saveMeta writes the run's state parts into its record's meta.
func (rs *runState) saveMeta() {
	m := runMeta{Array: rs.array, Schedule: rs.sched, Retry: rs.retry, Held: rs.held, Begin: rs.begin}
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
	rs.held, rs.begin, rs.retry = m.Held, m.Begin, m.Retry
}

// Pending reasons of holds, as Slurm names them.
const (
	reasonHeldUser = "JobHeldUser"
	reasonRequeued = "requeued" // a job stopped by scontrol requeue
)

// control changes a run as Slurm's scontrol does: hold, release, requeue,
// and update of a waiting run's time limit, priority, nice, or an array's
// throttle.
func (s *Server) handleControl(w http.ResponseWriter, r *http.Request, _ *store.User) {
	var req api.ControlRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	run, err := s.findRun(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.control(run.ID, req); err != nil {
		writeError(w, err)
		return
	}
	if run, err = s.store.GetRun(r.Context(), run.ID); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.apiRun(run, nil, s.name(r.Context(), 'u', run.UserID), nil))
}

func (s *Server) control(id int64, req api.ControlRequest) error {
	now := s.clock.Now()
	s.mu.Lock()
	rs, ok := s.runs[id]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: run %d has ended", ErrInvalid, id)
	}
	b := &store.Batch{}
	var after []func()
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
		b.Events = append(b.Events, &store.Event{RunID: id, Time: now, Type: "requeue", Message: "requeue requested"})
		after = s.stopLocked(rs, stopRequeue, false, now, b)
		rs.rec.StopReq = stopRequeue
	case "update":
		err = s.updateLocked(rs, req, now, b)
	default:
		err = fmt.Errorf("%w: unknown action %q (hold, release, requeue, update)", ErrInvalid, req.Action)
	}
	if err != nil {
		s.mu.Unlock()
		return err
	}
	b.Runs = append(b.Runs, runCopy(rs))
	done := s.enqueue(b, append(after, s.notify(id), s.wakeScheduler)...)
	s.mu.Unlock()
	return <-done
}

func (s *Server) updateLocked(rs *runState, req api.ControlRequest, now time.Time, b *store.Batch) error {
	id := rs.rec.ID
	var changed []string
	if req.ArrayThrottle != nil {
		if rs.array == nil {
			return fmt.Errorf("%w: run %d is not an array: it has no throttle", ErrInvalid, id)
		}
		if *req.ArrayThrottle < 0 {
			return fmt.Errorf("%w: array throttle %d: want 0 (none) or more", ErrInvalid, *req.ArrayThrottle)
		}
		rs.array.Throttle = *req.ArrayThrottle
		s.freed = true // the throttle may let more start
		changed = append(changed, fmt.Sprintf("array throttle %d", rs.array.Throttle))
	}
	if _, ok := s.pending[id]; !ok && (req.TimeLimit != nil || req.Priority != nil || req.Nice != nil) {
		return fmt.Errorf("%w: run %d is not waiting (%s): only a waiting run's time limit, priority or nice can change", ErrInvalid, id, rs.rec.Status)
	}
	if req.TimeLimit != nil {
		if *req.TimeLimit < 0 {
			return fmt.Errorf("%w: time limit %d s: want 0 (none) or more", ErrInvalid, *req.TimeLimit)
		}
		rs.limit = time.Duration(*req.TimeLimit) * time.Second
		if *req.TimeLimit == 0 {
			rs.spec.MaxDuration = nil
		} else {
			d := spec.Duration(*req.TimeLimit)
			rs.spec.MaxDuration = &d
		}
		changed = append(changed, fmt.Sprintf("time limit %s", rs.limit))
	}
	if req.Priority != nil {
		if *req.Priority < 0 || *req.Priority > 100 {
			return fmt.Errorf("%w: priority %d: want 0..100", ErrInvalid, *req.Priority)
		}
		rs.rec.Priority, rs.spec.Priority = *req.Priority, *req.Priority
		changed = append(changed, fmt.Sprintf("priority %d", *req.Priority))
	}
	if req.Nice != nil {
		rs.spec.Nice = *req.Nice
		changed = append(changed, fmt.Sprintf("nice %d", *req.Nice))
	}
	if len(changed) == 0 {
		return fmt.Errorf("%w: nothing to update", ErrInvalid)
	}
	if body, err := json.Marshal(rs.spec); err == nil {
		rs.rec.Spec = body
	}
	rs.saveMeta()
	if _, ok := s.pending[id]; ok {
		s.fresh[id] = rs
	}
	b.Events = append(b.Events, &store.Event{RunID: id, Time: now, Type: "update", Message: fmt.Sprint(changed)})
	return nil
}

// handleSignal sends a signal to a run's running jobs without stopping
// them (scancel --signal); jobs not started yet are not signalled, as in
// Slurm.
func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request, _ *store.User) {
	var req api.SignalRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Signal < 1 || req.Signal > 64 {
		writeError(w, fmt.Errorf("%w: signal %d: want 1..64", ErrInvalid, req.Signal))
		return
	}
	run, err := s.findRun(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeError(w, err)
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	rs, ok := s.runs[run.ID]
	if !ok {
		s.mu.Unlock()
		writeError(w, fmt.Errorf("%w: run %d has ended", ErrInvalid, run.ID))
		return
	}
	targets := []*runState{rs}
	if rs.array != nil {
		targets = targets[:0]
		for _, t := range rs.array.live {
			targets = append(targets, t)
		}
	}
	var after []func()
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
			if ns, ok := s.nodes[js.rec.Node]; ok && ns.conn != nil {
				c, k := ns.conn, api.KillJob{JobID: js.rec.ID, Signal: req.Signal, BatchOnly: req.BatchOnly}
				after = append(after, func() { c.send(api.AgentMessage{Type: "signal", Kill: &k}) })
				sent++
			}
		}
	}
	b := &store.Batch{Events: []*store.Event{{RunID: run.ID, Time: now, Type: "signal", Message: fmt.Sprintf("signal %d sent to %d running jobs", req.Signal, sent)}}}
	done := s.enqueue(b, after...)
	s.mu.Unlock()
	if err := <-done; err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Jobs int `json:"jobs"`
	}{sent})
}
