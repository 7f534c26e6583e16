package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// The step relay: srun inside a multi-node allocation posts a step; the
// step hosts of the run's other nodes (`berth step-host`) long-poll for
// the steps of their rank, run them, and post their output and exit
// status back; srun reads them. The relay is in memory only: a server
// restart loses the running steps (srun then fails with a clear error,
// and the step hosts, seeing a new epoch, wait for new steps). Steps are
// dropped when their run ends; each rank's output is capped.

const (
	// stepOutputCap bounds what one rank of a step keeps of its output.
	stepOutputCap = 1 << 20
	// maxStepsPerRun bounds the steps a run keeps (ended ones go first).
	maxStepsPerRun = 64
	// stepPollWait is how long a poll waits for something new.
	stepPollWait = 25 * time.Second
)

const stepTruncated = "\n[berth: step output truncated: over 1 MiB on this node]\n"

type stepRelay struct {
	mu    sync.Mutex
	epoch string
	runs  map[int64]*runSteps
}

type runSteps struct {
	nodes   int
	next    int
	steps   map[int]*relayStep
	order   []int
	changed chan struct{} // closed and replaced on every change
}

type relayStep struct {
	req   api.StepRequest
	ranks map[int]*stepRank
}

type stepRank struct {
	out       []byte
	truncated bool
	exited    bool
	code      int
}

func (rs *runSteps) notify() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

func (r *stepRelay) init() {
	if r.runs == nil {
		r.runs = map[int64]*runSteps{}
		r.epoch = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
}

// sweep drops the steps of runs that are no longer active, waking their
// pollers.
func (r *stepRelay) sweep(active func(int64) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, rs := range r.runs {
		if !active(id) {
			rs.notify()
			delete(r.runs, id)
		}
	}
}

// add records a step for a run of n nodes and returns its ID.
func (r *stepRelay) add(run int64, n int, req api.StepRequest) (int, error) {
	if len(req.Argv) == 0 {
		return 0, fmt.Errorf("%w: a step needs argv", ErrInvalid)
	}
	if len(req.Ranks) == 0 {
		for k := 0; k < n; k++ {
			req.Ranks = append(req.Ranks, k)
		}
	}
	seen := map[int]bool{}
	for _, k := range req.Ranks {
		if k < 0 || k >= n || seen[k] {
			return 0, fmt.Errorf("%w: rank %d: the run has %d nodes", ErrInvalid, k, n)
		}
		seen[k] = true
	}
	sort.Ints(req.Ranks)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	rs := r.runs[run]
	if rs == nil {
		rs = &runSteps{nodes: n, steps: map[int]*relayStep{}, changed: make(chan struct{})}
		r.runs[run] = rs
	}
	st := &relayStep{req: req, ranks: map[int]*stepRank{}}
	for _, k := range req.Ranks {
		st.ranks[k] = &stepRank{}
	}
	id := rs.next
	rs.next++
	rs.steps[id] = st
	rs.order = append(rs.order, id)
	// Over the bound: drop the oldest ended steps, then the oldest.
	for len(rs.order) > maxStepsPerRun {
		drop := 0
		for i, old := range rs.order {
			if rs.steps[old].ended() {
				drop = i
				break
			}
		}
		delete(rs.steps, rs.order[drop])
		rs.order = append(rs.order[:drop], rs.order[drop+1:]...)
	}
	rs.notify()
	return id, nil
}

func (st *relayStep) ended() bool {
	for _, rk := range st.ranks {
		if !rk.exited {
			return false
		}
	}
	return true
}

// next is the first step after `after` for rank (epoch: the one the
// caller knows; another one means it starts over), or the channel to wait
// on.
func (r *stepRelay) next(run int64, rank, after int, epoch string) (*api.StepAssignment, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	if epoch != r.epoch {
		after = -1
	}
	rs := r.runs[run]
	if rs == nil {
		rs = &runSteps{steps: map[int]*relayStep{}, changed: make(chan struct{})}
		r.runs[run] = rs
	}
	for _, id := range rs.order {
		st := rs.steps[id]
		if id <= after || st.ranks[rank] == nil {
			continue
		}
		return &api.StepAssignment{ID: id, Epoch: r.epoch, Argv: st.req.Argv, Env: st.req.Env, Dir: st.req.Dir, Ranks: st.req.Ranks}, nil
	}
	return nil, rs.changed
}

func (r *stepRelay) rankOf(run int64, id, rank int) (*runSteps, *stepRank, error) {
	rs := r.runs[run]
	if rs == nil || rs.steps[id] == nil {
		return nil, nil, fmt.Errorf("%w: step %d.%d: no such step (the run ended, or the server restarted and lost its running steps)", ErrNotFound, run, id)
	}
	rk := rs.steps[id].ranks[rank]
	if rk == nil {
		return nil, nil, fmt.Errorf("%w: step %d.%d does not run on node rank %d", ErrInvalid, run, id, rank)
	}
	return rs, rk, nil
}

// output appends to a rank's output, up to the cap.
func (r *stepRelay) output(run int64, id, rank int, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, rk, err := r.rankOf(run, id, rank)
	if err != nil {
		return err
	}
	if len(data) == 0 || rk.truncated {
		return nil
	}
	if room := stepOutputCap - len(rk.out); len(data) > room {
		rk.out = append(rk.out, data[:room]...)
		rk.out = append(rk.out, stepTruncated...)
		rk.truncated = true
	} else {
		rk.out = append(rk.out, data...)
	}
	rs.notify()
	return nil
}

func (r *stepRelay) exit(run int64, id, rank, code int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, rk, err := r.rankOf(run, id, rank)
	if err != nil {
		return err
	}
	if !rk.exited {
		rk.exited, rk.code = true, code
		rs.notify()
	}
	return nil
}

// status is a step's output from the offsets (by rank) and its exits, or
// the channel to wait on when there is nothing new.
func (r *stepRelay) status(run int64, id int, from map[int]int64) (*api.StepStatus, bool, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.runs[run]
	if rs == nil || rs.steps[id] == nil {
		return nil, false, nil, fmt.Errorf("%w: step %d.%d: no such step (the run ended, or the server restarted and lost its running steps)", ErrNotFound, run, id)
	}
	st := rs.steps[id]
	out := &api.StepStatus{ID: id}
	news, done := false, true
	for _, k := range st.req.Ranks {
		rk := st.ranks[k]
		off := min(max(from[k], 0), int64(len(rk.out)))
		ro := api.StepRankOutput{Rank: k, Next: int64(len(rk.out)), Exited: rk.exited, Code: rk.code}
		if off < int64(len(rk.out)) {
			ro.Data = append([]byte(nil), rk.out[off:]...)
			news = true
		}
		if !rk.exited {
			done = false
		}
		out.Ranks = append(out.Ranks, ro)
	}
	return out, news || done, rs.changed, nil
}

// activeRun is the ID and node count of an active run by reference.
func (s *Server) activeRun(ctx context.Context, ref string) (int64, int, error) {
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		run, ferr := s.findRun(ctx, ref)
		if ferr != nil {
			return 0, 0, ferr
		}
		id = run.ID
	}
	s.mu.Lock()
	rs, ok := s.runs[id]
	n := 0
	if ok {
		n = len(rs.jobs)
	}
	s.mu.Unlock()
	if !ok {
		return 0, 0, fmt.Errorf("%w: run %s is not active: it has no steps", ErrNotFound, ref)
	}
	return id, n, nil
}

func (s *Server) runActive(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.runs[id]
	return ok
}

func (s *Server) handleStepCreate(w http.ResponseWriter, r *http.Request, _ *store.User) {
	var req api.StepRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	run, n, err := s.activeRun(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.steps.sweep(s.runActive)
	id, err := s.steps.add(run, n, req)
	if err != nil {
		writeError(w, err)
		return
	}
	s.steps.mu.Lock()
	epoch := s.steps.epoch
	s.steps.mu.Unlock()
	writeJSON(w, http.StatusOK, api.StepCreated{ID: id, Epoch: epoch})
}

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q", ErrInvalid, name, v)
	}
	return n, nil
}

// handleStepNext long-polls for the next step of a rank: 200 with it, 204
// when none came in time, 410 once the run has ended.
func (s *Server) handleStepNext(w http.ResponseWriter, r *http.Request, _ *store.User) {
	run, _, err := s.activeRun(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeJSON(w, http.StatusGone, api.Error{Error: err.Error()})
		return
	}
	rank, err := intParam(r, "rank", -1)
	if err == nil && rank < 0 {
		err = fmt.Errorf("%w: rank is required", ErrInvalid)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	after, err := intParam(r, "after", -1)
	if err != nil {
		writeError(w, err)
		return
	}
	epoch := r.URL.Query().Get("epoch")
	timer := time.NewTimer(s.stepWait())
	defer timer.Stop()
	for {
		st, wait := s.steps.next(run, rank, after, epoch)
		if st != nil {
			writeJSON(w, http.StatusOK, st)
			return
		}
		select {
		case <-wait:
			if !s.runActive(run) {
				writeJSON(w, http.StatusGone, api.Error{Error: fmt.Sprintf("run %d has ended", run)})
				return
			}
		case <-timer.C:
			s.steps.sweep(s.runActive)
			if !s.runActive(run) {
				writeJSON(w, http.StatusGone, api.Error{Error: fmt.Sprintf("run %d has ended", run)})
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// stepWait is how long a poll waits (shorter in tests).
func (s *Server) stepWait() time.Duration {
	if s.stepPollWait > 0 {
		return s.stepPollWait
	}
	return stepPollWait
}

func (s *Server) stepRankParams(w http.ResponseWriter, r *http.Request) (int64, int, int, bool) {
	run, err := strconv.ParseInt(r.PathValue("ref"), 10, 64)
	if err != nil {
		run, _, err = s.activeRun(r.Context(), r.PathValue("ref"))
	}
	if err != nil {
		writeError(w, err)
		return 0, 0, 0, false
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: step id %q", ErrInvalid, r.PathValue("id")))
		return 0, 0, 0, false
	}
	rank, err := intParam(r, "rank", -1)
	if err == nil && rank < 0 {
		err = fmt.Errorf("%w: rank is required", ErrInvalid)
	}
	if err != nil {
		writeError(w, err)
		return 0, 0, 0, false
	}
	return run, id, rank, true
}

func (s *Server) handleStepOutput(w http.ResponseWriter, r *http.Request, _ *store.User) {
	run, id, rank, ok := s.stepRankParams(w, r)
	if !ok {
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		writeError(w, fmt.Errorf("%w: output: %v", ErrInvalid, err))
		return
	}
	if err := s.steps.output(run, id, rank, data); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleStepExit(w http.ResponseWriter, r *http.Request, _ *store.User) {
	run, id, rank, ok := s.stepRankParams(w, r)
	if !ok {
		return
	}
	var req api.StepExit
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.steps.exit(run, id, rank, req.Code); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleStepStatus answers a step's new output (from=RANK:OFFSET,…) and
// exits, waiting up to a poll's time for something new (wait=0: not at
// all).
func (s *Server) handleStepStatus(w http.ResponseWriter, r *http.Request, _ *store.User) {
	run, err := strconv.ParseInt(r.PathValue("ref"), 10, 64)
	if err != nil {
		run, _, err = s.activeRun(r.Context(), r.PathValue("ref"))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: step id %q", ErrInvalid, r.PathValue("id")))
		return
	}
	from := map[int]int64{}
	if v := r.URL.Query().Get("from"); v != "" {
		for _, part := range strings.Split(v, ",") {
			k, o, ok := strings.Cut(part, ":")
			rank, err1 := strconv.Atoi(k)
			off, err2 := strconv.ParseInt(o, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				writeError(w, fmt.Errorf("%w: from=%q: want RANK:OFFSET,…", ErrInvalid, v))
				return
			}
			from[rank] = off
		}
	}
	wait := s.stepWait()
	if r.URL.Query().Get("wait") == "0" {
		wait = 0
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		st, news, changed, err := s.steps.status(run, id, from)
		if err != nil {
			writeError(w, err)
			return
		}
		if news || wait == 0 {
			writeJSON(w, http.StatusOK, st)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			writeJSON(w, http.StatusOK, st)
			return
		case <-r.Context().Done():
			return
		}
	}
}
