package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// The step relay's HTTP API (steps.go holds the relay itself): srun
// creates, follows, signals and cancels steps; the step hosts poll for
// work and post output and exits. Every handler checks that the run is
// active and the caller's (or the caller an admin).

// reapSteps runs reap every poll period until ctx ends.
func (s *Server) reapSteps(ctx context.Context) {
	t := time.NewTicker(s.stepWait())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := s.steps.reap(s.clock.Now(), stepIdle(s.stepWait())); n > 0 {
				s.log.Info("job steps killed: their srun is gone", "steps", n)
			}
		}
	}
}

// stepIdle is how long srun may not poll before its step is killed: two
// of its long polls and some room for a server restart.
func stepIdle(poll time.Duration) time.Duration { return 2*poll + 15*time.Second }

// activeRun is the ID, owner check and node names of an active run by
// reference: a user works on the steps of their own runs (an admin on
// any).
func (s *Server) activeRun(ctx context.Context, ref string, u *store.User) (int64, []string, error) {
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		run, ferr := s.findRun(ctx, u, ref)
		if ferr != nil {
			return 0, nil, ferr
		}
		id = run.ID
	}
	s.mu.Lock()
	rec, jobs, ok := s.ActiveRun(id)
	var hosts []string
	owner := int64(0)
	if ok {
		owner = rec.UserID
		hosts = make([]string, len(jobs))
		for _, j := range jobs {
			if j.Num < len(hosts) {
				hosts[j.Num] = j.Node
			}
		}
	}
	s.unlock()
	if !ok || !s.sees(u, &rec) {
		return 0, nil, fmt.Errorf("%w: run %s is not active: it has no steps", ErrNotFound, ref)
	}
	if u != nil && !u.Admin && u.ID != owner {
		return 0, nil, fmt.Errorf("%w: run %s is another user's", ErrForbidden, ref)
	}
	return id, hosts, nil
}

func (s *Server) runActive(id int64) bool {
	s.mu.Lock()
	defer s.unlock()
	_, _, ok := s.ActiveRun(id)
	return ok
}

// loadSteps restores the active runs' steps (at start).
func (s *Server) loadSteps(ctx context.Context) error {
	s.mu.Lock()
	ids := s.RunIDs()
	active := map[int64]bool{}
	for _, id := range ids {
		active[id] = true
	}
	s.unlock()
	steps, err := s.store.ListSteps(ctx, ids)
	if err != nil {
		return err
	}
	closed := s.steps.load(steps, active, s.clock.Now())
	return s.store.Apply(ctx, &store.Batch{Steps: closed})
}

func (s *Server) handleStepCreate(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.StepRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	run, hosts, err := s.activeRun(r.Context(), r.PathValue("ref"), u)
	if err == nil {
		err = stepNodes(&req, len(hosts))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// Under s.mu, so that a run ending now closes this step too.
	s.mu.Lock()
	if _, _, ok := s.ActiveRun(run); !ok {
		s.unlock()
		writeError(w, fmt.Errorf("%w: run %d has ended", ErrNotFound, run))
		return
	}
	st := s.steps.add(run, req, hosts, s.clock.Now())
	done := s.enqueue(&store.Batch{Steps: []*store.Step{st.record()}})
	s.unlock()
	if err := <-done; err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.StepCreated{ID: st.rec.StepID})
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

// handleStepNext long-polls for a rank's work: 200 with new steps and
// signals, 204 when none came in time, 410 once the run has ended.
func (s *Server) handleStepNext(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, _, err := s.activeRun(r.Context(), r.PathValue("ref"), u)
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, store.ErrNotFound) {
			writeJSON(w, http.StatusGone, api.Error{Error: err.Error()})
			return
		}
		writeError(w, err)
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
	sigAfter, err := intParam(r, "sig", 0)
	if err != nil {
		writeError(w, err)
		return
	}
	timer := time.NewTimer(s.stepWait())
	defer timer.Stop()
	for {
		work, wait := s.steps.work(run, rank, after, int64(sigAfter))
		if work != nil {
			writeJSON(w, http.StatusOK, work)
			return
		}
		select {
		case <-wait:
			if !s.runActive(run) {
				s.steps.forget(run)
				writeJSON(w, http.StatusGone, api.Error{Error: fmt.Sprintf("run %d has ended", run)})
				return
			}
		case <-timer.C:
			if !s.runActive(run) {
				s.steps.forget(run)
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
	if d := time.Duration(s.stepPollWait.Load()); d > 0 {
		return d
	}
	return stepPollWait
}

// stepParams are a step request's run, step ID and (with rank) node rank.
func (s *Server) stepParams(w http.ResponseWriter, r *http.Request, u *store.User, needRank bool) (int64, int, int, bool) {
	run, _, err := s.activeRun(r.Context(), r.PathValue("ref"), u)
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
	if err == nil && rank < 0 && needRank {
		err = fmt.Errorf("%w: rank is required", ErrInvalid)
	}
	if err != nil {
		writeError(w, err)
		return 0, 0, 0, false
	}
	return run, id, rank, true
}

// handleStepOutput takes a rank's output (fd=1|2, at=OFFSET, start=1 when
// the host sends from the oldest byte it kept) and answers what the
// server has and srun has read. With wait=1 and nothing new to take, it
// waits up to a poll's time for srun to read.
func (s *Server) handleStepOutput(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, id, rank, ok := s.stepParams(w, r, u, true)
	if !ok {
		return
	}
	q := r.URL.Query()
	fd, err := intParam(r, "fd", 1)
	if err == nil && fd != 1 && fd != 2 {
		err = fmt.Errorf("%w: fd=%d: want 1 or 2", ErrInvalid, fd)
	}
	var at int64
	if err == nil {
		if at, err = strconv.ParseInt(q.Get("at"), 10, 64); err != nil {
			err = fmt.Errorf("%w: at=%q: want the offset of the data", ErrInvalid, q.Get("at"))
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		writeError(w, fmt.Errorf("%w: output: %v", ErrInvalid, err))
		return
	}
	ack, err := s.steps.output(run, id, rank, fd, at, data, q.Get("start") == "1")
	if err != nil {
		writeError(w, err)
		return
	}
	if q.Get("wait") == "1" && len(data) == 0 && ack.Have >= 0 && ack.Read < ack.Have {
		timer := time.NewTimer(s.stepWait())
		defer timer.Stop()
		for ack.Read < ack.Have {
			select {
			case <-s.steps.changedCh(run):
			case <-timer.C:
				writeJSON(w, http.StatusOK, ack)
				return
			case <-r.Context().Done():
				return
			}
			if ack, err = s.steps.output(run, id, rank, fd, at, nil, false); err != nil {
				writeError(w, err)
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, ack)
}

func (s *Server) handleStepExit(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, id, rank, ok := s.stepParams(w, r, u, true)
	if !ok {
		return
	}
	var req api.StepExit
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	rec, err := s.steps.exit(run, id, rank, req, s.clock.Now())
	var done <-chan error
	if rec != nil {
		done = s.enqueue(&store.Batch{Steps: []*store.Step{rec}})
	}
	s.unlock()
	if err == nil && done != nil {
		err = <-done
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleStepCancel cancels a running step (scancel JOB.STEP): SIGTERM to
// its tasks, SIGKILL after the server's stop grace, as Slurm's KillWait.
func (s *Server) handleStepCancel(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, id, _, ok := s.stepParams(w, r, u, false)
	if !ok {
		return
	}
	if err := s.steps.cancel(run, id); err != nil {
		writeError(w, err)
		return
	}
	time.AfterFunc(s.cfg.StopGrace, func() {
		if s.steps.running(run, id) {
			_ = s.steps.signal(run, id, 9)
		}
	})
	w.WriteHeader(http.StatusNoContent)
}

// handleStepAlive is srun saying it is still there, even while it does
// not ask for output (its own output is blocked: srun | less).
func (s *Server) handleStepAlive(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, id, _, ok := s.stepParams(w, r, u, false)
	if !ok {
		return
	}
	s.steps.mu.Lock()
	_, st, err := s.steps.stepOf(run, id)
	if err == nil {
		st.seen = s.clock.Now()
	}
	s.steps.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleStepSignal forwards a signal to a step's tasks on the hosts.
func (s *Server) handleStepSignal(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, id, _, ok := s.stepParams(w, r, u, false)
	if !ok {
		return
	}
	var req api.StepSignalRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Signal <= 0 || req.Signal > 64 {
		writeError(w, fmt.Errorf("%w: signal %d", ErrInvalid, req.Signal))
		return
	}
	if err := s.steps.signal(run, id, req.Signal); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// offsets reads RANK:OFFSET,… from a query parameter.
func offsets(v string) (map[int]int64, error) {
	from := map[int]int64{}
	if v == "" {
		return from, nil
	}
	for _, part := range strings.Split(v, ",") {
		k, o, ok := strings.Cut(part, ":")
		rank, err1 := strconv.Atoi(k)
		off, err2 := strconv.ParseInt(o, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: %q: want RANK:OFFSET,…", ErrInvalid, v)
		}
		from[rank] = off
	}
	return from, nil
}

// handleStepStatus answers a step's new output (from=RANK:OFFSET,… for
// stdout, errfrom= for stderr) and exits, waiting up to a poll's time for
// something new (wait=0: not at all).
func (s *Server) handleStepStatus(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, id, _, ok := s.stepParams(w, r, u, false)
	if !ok {
		return
	}
	from, err := offsets(r.URL.Query().Get("from"))
	if err != nil {
		writeError(w, err)
		return
	}
	errFrom, err := offsets(r.URL.Query().Get("errfrom"))
	if err != nil {
		writeError(w, err)
		return
	}
	wait := s.stepWait()
	if r.URL.Query().Get("wait") == "0" {
		wait = 0
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		st, news, changed, err := s.steps.status(run, id, from, errFrom, r.URL.Query().Get("cancelled") == "1", s.clock.Now())
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

// handleListSteps lists the steps of runs (ids=1,2,…): sacct's step rows.
func (s *Server) handleListSteps(w http.ResponseWriter, r *http.Request, u *store.User) {
	var ids []int64
	for _, v := range strings.Split(r.URL.Query().Get("runs"), ",") {
		if v == "" {
			continue
		}
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeError(w, fmt.Errorf("%w: runs=%q: want run IDs", ErrInvalid, v))
			return
		}
		ids = append(ids, id)
	}
	ids, err := s.seenIDs(r.Context(), u, ids)
	if err != nil {
		writeError(w, err)
		return
	}
	steps, err := s.store.ListSteps(r.Context(), ids)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]api.Step, 0, len(steps))
	for _, p := range steps {
		a := api.Step{RunID: p.RunID, ID: p.StepID, Name: p.Name, NTasks: p.NTasks, NodeList: p.NodeList, PTY: p.PTY,
			Status: p.Status, ExitCode: p.ExitCode, StartedAt: p.StartedAt, FinishedAt: p.FinishedAt}
		_ = json.Unmarshal(p.Argv, &a.Argv)
		var nodes []int
		_ = json.Unmarshal(p.Ranks, &nodes)
		a.Nodes = len(nodes)
		out = append(out, a)
	}
	writeJSON(w, http.StatusOK, out)
}
