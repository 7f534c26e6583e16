package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/store"
)

// The step relay: srun inside an allocation posts a step; the step hosts
// of the run's nodes (`berth step-host`) long-poll for the steps and
// signals of their rank, run their tasks, and post output and exits back;
// srun reads them and forwards its signals. Every step is recorded in the
// store (sacct's JOBID.STEPID rows) and reloaded after a restart.
//
// Output is acknowledged: the server keeps a rank's output from what srun
// has read on, and tells the step host how far srun has read; the step
// host forgets only that, and stops its tasks' output (a full pipe) while
// srun is behind by more than its bound. After a restart the server knows
// nothing of the output (Have -1): the hosts send again what srun has not
// read, so that no output is lost or doubled.
//
// Lock order: s.mu before r.mu, never the other way round.

const (
	// maxStepsPerRun bounds the steps a run keeps in memory (ended ones
	// go first; the store keeps them all).
	maxStepsPerRun = 64
	// stepPollWait is how long a poll waits for something new.
	stepPollWait = 25 * time.Second
	// maxStepSignals bounds the signals a run keeps for its hosts.
	maxStepSignals = 256
	// maxStepAnswer bounds the bytes of one stream in one answer to srun.
	maxStepAnswer = 1 << 20
)

type stepRelay struct {
	mu     sync.Mutex
	runs   map[int64]*runSteps
	attach map[attachKey]*attachEnd
}

type runSteps struct {
	next    int
	steps   map[int]*relayStep
	order   []int
	signals []api.StepSignal
	sigSeq  int64
	changed chan struct{} // closed and replaced on every change
}

type relayStep struct {
	rec   store.Step
	req   api.StepRequest
	ranks map[int]*stepRank // every node of the step (Nodes)
	// seen is when srun last asked for the step's output; a step whose
	// srun is gone is killed on its nodes (reap), once.
	seen   time.Time
	reaped bool
	// cancelled: scancel JOB.STEP; the step ends as stopped.
	cancelled bool
}

// stepRank is one node's part of a step: its two streams and its exit.
type stepRank struct {
	out, err stepStream
	exited   bool
	exit     api.StepExit
}

// stepStream is a rank's stdout or stderr as the server holds it: the
// bytes from base on (known: false until the host tells after a restart)
// and how far srun has read.
type stepStream struct {
	known bool
	base  int64
	buf   []byte
	read  int64
}

func (st *stepStream) have() int64 {
	if !st.known {
		return -1
	}
	return st.base + int64(len(st.buf))
}

// put takes data at offset `at` (fromStart: `at` is the oldest byte the
// host still keeps), skipping what the server has, and answers how far it
// holds the stream now.
func (st *stepStream) put(at int64, data []byte, fromStart bool) {
	if !st.known {
		if !fromStart {
			return
		}
		st.known, st.base, st.buf = true, at, nil
		st.read = max(st.read, at)
	}
	have := st.have()
	if at > have || at+int64(len(data)) <= have {
		return
	}
	st.buf = append(st.buf, data[have-at:]...)
}

// from is the stream's bytes from offset off, after forgetting what srun
// has read before it.
func (st *stepStream) from(off int64) []byte {
	if !st.known {
		st.read = max(st.read, off)
		return nil
	}
	if off > st.read {
		st.read = off
	}
	if cut := min(st.read, st.have()) - st.base; cut > 0 {
		// A reslice: the next growth of buf leaves the read bytes behind.
		st.buf = st.buf[cut:]
		st.base += cut
	}
	if off < st.base || off >= st.have() {
		return nil
	}
	part := st.buf[off-st.base:]
	return append([]byte(nil), part[:min(len(part), maxStepAnswer)]...)
}

func (rs *runSteps) notify() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

func (r *stepRelay) run(id int64) *runSteps {
	if r.runs == nil {
		r.runs = map[int64]*runSteps{}
	}
	rs := r.runs[id]
	if rs == nil {
		rs = &runSteps{steps: map[int]*relayStep{}, changed: make(chan struct{})}
		r.runs[id] = rs
	}
	return rs
}

// load restores the steps of the active runs from the store (at start):
// their numbering, and the unfinished ones with their exits so far. Their
// output is unknown until the hosts send it again. A step of a run that
// ended while the server was down is closed as stopped.
func (r *stepRelay) load(steps []*store.Step, active map[int64]bool, now time.Time) []*store.Step {
	r.mu.Lock()
	defer r.mu.Unlock()
	var closed []*store.Step
	for _, p := range steps {
		if !active[p.RunID] {
			if p.Status == "running" {
				p.Status, p.FinishedAt = "stopped", now
				closed = append(closed, p)
			}
			continue
		}
		rs := r.run(p.RunID)
		rs.next = max(rs.next, p.StepID+1)
		if p.Status != "running" {
			continue
		}
		st := &relayStep{rec: *p, ranks: map[int]*stepRank{}, seen: now}
		_ = json.Unmarshal(p.Argv, &st.req.Argv)
		var nodes []int
		_ = json.Unmarshal(p.Ranks, &nodes)
		exits := map[int]api.StepExit{}
		_ = json.Unmarshal(p.Exits, &exits)
		st.req.Nodes, st.req.Ranks, st.req.NTasks, st.req.PTY = nodes, nodes, p.NTasks, p.PTY
		for _, k := range nodes {
			rk := &stepRank{}
			if x, ok := exits[k]; ok {
				rk.exited, rk.exit = true, x
			}
			st.ranks[k] = rk
		}
		rs.steps[p.StepID] = st
		rs.order = append(rs.order, p.StepID)
	}
	for _, rs := range r.runs {
		sort.Ints(rs.order)
	}
	return closed
}

// endRun closes a run's unfinished steps as stopped, wakes its pollers and
// forgets it; it returns the records to store.
func (r *stepRelay) endRun(id int64, now time.Time) []*store.Step {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.runs[id]
	if rs == nil {
		return nil
	}
	var out []*store.Step
	for _, sid := range rs.order {
		st := rs.steps[sid]
		if st.rec.Status == "running" {
			st.rec.Status, st.rec.FinishedAt = "stopped", now
			out = append(out, st.record())
		}
	}
	rs.notify()
	delete(r.runs, id)
	return out
}

// record is a copy of the step's store record with its exits so far.
func (st *relayStep) record() *store.Step {
	p := st.rec
	exits := map[int]api.StepExit{}
	for k, rk := range st.ranks {
		if rk.exited {
			exits[k] = rk.exit
		}
	}
	p.Exits, _ = json.Marshal(exits)
	return &p
}

// stepNodes fills a request's nodes and ranks and checks them against a
// run of n nodes.
func stepNodes(req *api.StepRequest, n int) error {
	if len(req.Argv) == 0 {
		return fmt.Errorf("%w: a step needs argv", ErrInvalid)
	}
	if len(req.Nodes) == 0 {
		for k := 0; k < n; k++ {
			req.Nodes = append(req.Nodes, k)
		}
	}
	in := map[int]bool{}
	for _, k := range req.Nodes {
		if k < 0 || k >= n || in[k] {
			return fmt.Errorf("%w: node rank %d: the run has %d nodes", ErrInvalid, k, n)
		}
		in[k] = true
	}
	if len(req.Ranks) == 0 {
		for _, k := range req.Nodes {
			if !hasRank(req.Here, k) {
				req.Ranks = append(req.Ranks, k)
			}
		}
	}
	seen := map[int]bool{}
	for _, k := range req.Ranks {
		if !in[k] || seen[k] {
			return fmt.Errorf("%w: rank %d is not one of the step's nodes %v", ErrInvalid, k, req.Nodes)
		}
		seen[k] = true
	}
	sort.Ints(req.Ranks)
	if req.NTasks <= 0 {
		req.NTasks = len(req.Nodes)
	}
	if req.PTY {
		req.Attach = true
	}
	return nil
}

// add records a step of a run and returns it; the caller stores it.
func (r *stepRelay) add(run int64, req api.StepRequest, hosts []string, now time.Time) *relayStep {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.run(run)
	var names []string
	for _, k := range req.Nodes {
		if k < len(hosts) {
			names = append(names, hosts[k])
		}
	}
	name := req.Name
	if name == "" {
		name = filepath.Base(req.Argv[0])
	}
	argv, _ := json.Marshal(req.Argv)
	nodes, _ := json.Marshal(req.Nodes)
	st := &relayStep{req: req, ranks: map[int]*stepRank{}, seen: now, rec: store.Step{
		RunID: run, StepID: rs.next, Name: name, Argv: argv, Ranks: nodes, NTasks: req.NTasks,
		NodeList: slurm.CompressHostlist(names), PTY: req.PTY, Status: "running", StartedAt: now,
	}}
	for _, k := range req.Nodes {
		st.ranks[k] = &stepRank{out: stepStream{known: true}, err: stepStream{known: true}}
	}
	rs.next++
	rs.steps[st.rec.StepID] = st
	rs.order = append(rs.order, st.rec.StepID)
	// Over the bound: drop the oldest ended steps from memory.
	for len(rs.order) > maxStepsPerRun {
		drop := -1
		for i, old := range rs.order {
			if rs.steps[old].rec.Status != "running" {
				drop = i
				break
			}
		}
		if drop < 0 {
			break
		}
		delete(rs.steps, rs.order[drop])
		rs.order = append(rs.order[:drop], rs.order[drop+1:]...)
	}
	rs.notify()
	return st
}

// work is what a rank's host has to do after step `after` and signal
// `sigAfter`, or the channel to wait on when nothing.
func (r *stepRelay) work(run int64, rank, after int, sigAfter int64) (*api.StepWork, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.run(run)
	w := &api.StepWork{}
	for _, id := range rs.order {
		st := rs.steps[id]
		if id <= after || !hasRank(st.req.Ranks, rank) || st.rec.Status != "running" {
			continue
		}
		q := st.req
		w.Steps = append(w.Steps, api.StepAssignment{ID: id, Argv: q.Argv, Env: q.Env, Dir: q.Dir, Nodes: q.Nodes, Ranks: q.Ranks,
			NTasks: q.NTasks, PTY: q.PTY, Attach: q.Attach, Rows: q.Rows, Cols: q.Cols})
	}
	for _, sg := range rs.signals {
		if sg.Seq > sigAfter {
			if st := rs.steps[sg.Step]; st != nil && hasRank(st.req.Ranks, rank) {
				w.Signals = append(w.Signals, sg)
			}
		}
	}
	if len(w.Steps) == 0 && len(w.Signals) == 0 {
		return nil, rs.changed
	}
	return w, nil
}

func hasRank(ranks []int, k int) bool {
	for _, r := range ranks {
		if r == k {
			return true
		}
	}
	return false
}

func (r *stepRelay) stepOf(run int64, id int) (*runSteps, *relayStep, error) {
	rs := r.runs[run]
	if rs == nil || rs.steps[id] == nil {
		return nil, nil, fmt.Errorf("%w: step %d.%d: no such running step", ErrNotFound, run, id)
	}
	return rs, rs.steps[id], nil
}

func (r *stepRelay) rankOf(run int64, id, rank int) (*runSteps, *relayStep, *stepRank, error) {
	rs, st, err := r.stepOf(run, id)
	if err != nil {
		return nil, nil, nil, err
	}
	rk := st.ranks[rank]
	if rk == nil {
		return nil, nil, nil, fmt.Errorf("%w: step %d.%d does not run on node rank %d", ErrInvalid, run, id, rank)
	}
	return rs, st, rk, nil
}

// output takes a rank's output of one stream (fd 1 or 2) at an offset and
// answers the acknowledgement, or the channel to wait on for srun to read
// when the caller asked to wait and nothing has changed.
func (r *stepRelay) output(run int64, id, rank, fd int, at int64, data []byte, fromStart bool) (api.StepAck, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, _, rk, err := r.rankOf(run, id, rank)
	if err != nil {
		return api.StepAck{}, err
	}
	st := &rk.out
	if fd == 2 {
		st = &rk.err
	}
	before := st.have()
	st.put(at, data, fromStart)
	if st.have() != before {
		rs.notify()
	}
	return api.StepAck{Have: st.have(), Read: st.read}, nil
}

// forget drops what the relay holds of a run that has ended (a poll may
// have made its entry again just as it ended).
func (r *stepRelay) forget(run int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rs := r.runs[run]; rs != nil {
		rs.notify()
		delete(r.runs, run)
	}
}

// changedCh is the channel that changes when anything of the run changes.
func (r *stepRelay) changedCh(run int64) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.run(run).changed
}

// exit records a rank's end; when every node of the step has ended, the
// step has too. It returns the record to store.
func (r *stepRelay) exit(run int64, id, rank int, x api.StepExit, now time.Time) (*store.Step, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, st, rk, err := r.rankOf(run, id, rank)
	if err != nil {
		return nil, err
	}
	if rk.exited {
		return nil, nil
	}
	rk.exited, rk.exit = true, x
	worst, all := 0, true
	for _, o := range st.ranks {
		all = all && o.exited
		worst = max(worst, o.exit.Code)
	}
	if all {
		st.rec.ExitCode = &worst
		st.rec.Status, st.rec.FinishedAt = "done", now
		switch {
		case st.cancelled:
			st.rec.Status = "stopped"
		case worst != 0:
			st.rec.Status = "failed"
		}
	}
	rs.notify()
	return st.record(), nil
}

// signal queues a signal for the hosts of a step.
func (r *stepRelay) signal(run int64, id, sig int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, _, err := r.stepOf(run, id)
	if err != nil {
		return err
	}
	rs.queueSignal(id, sig)
	return nil
}

func (rs *runSteps) queueSignal(step, sig int) {
	rs.sigSeq++
	rs.signals = append(rs.signals, api.StepSignal{Seq: rs.sigSeq, Step: step, Signal: sig})
	if len(rs.signals) > maxStepSignals {
		rs.signals = rs.signals[len(rs.signals)-maxStepSignals:]
	}
	rs.notify()
}

// cancel marks a running step cancelled and sends its hosts SIGTERM
// (srun, told by its status, stops its own tasks).
func (r *stepRelay) cancel(run int64, id int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, st, err := r.stepOf(run, id)
	if err == nil && st.rec.Status != "running" {
		err = fmt.Errorf("%w: step %d.%d has ended", ErrNotFound, run, id)
	}
	if err != nil {
		return err
	}
	if !st.cancelled {
		st.cancelled = true
		rs.queueSignal(id, 15)
	}
	return nil
}

// running tells whether a step still runs.
func (r *stepRelay) running(run int64, id int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, st, err := r.stepOf(run, id)
	return err == nil && st.rec.Status == "running"
}

// reap kills, on their nodes, the running steps whose srun has not been
// heard of for longer than idle (srun was killed, or its machine is gone),
// as slurmstepd ends a step whose srun went away. srun asks for output
// without pause and says it is alive every stepAlive besides; steps run by
// srun alone are not watched.
func (r *stepRelay) reap(now time.Time, idle time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rs := range r.runs {
		for _, id := range rs.order {
			st := rs.steps[id]
			if st.rec.Status != "running" || st.reaped || len(st.req.Ranks) == 0 || now.Sub(st.seen) <= idle {
				continue
			}
			st.reaped = true
			rs.queueSignal(id, 9)
			n++
		}
	}
	return n
}

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

// status is a step's output from the offsets (by rank, stdout and
// stderr) and its exits, and whether there is anything new; or the
// channel to wait on.
func (r *stepRelay) status(run int64, id int, from, errFrom map[int]int64, knowsCancel bool, now time.Time) (*api.StepStatus, bool, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, st, err := r.stepOf(run, id)
	if err != nil {
		return nil, false, nil, err
	}
	st.seen = now
	out := &api.StepStatus{ID: id, Cancelled: st.cancelled}
	// With no node of its own to follow, srun waits for a cancel only.
	news, done, read := st.cancelled && !knowsCancel, len(st.req.Ranks) > 0, false
	for _, k := range st.req.Ranks {
		rk := st.ranks[k]
		ro := api.StepRankOutput{Rank: k, Next: max(from[k], 0), ErrNext: max(errFrom[k], 0)}
		read = read || ro.Next > rk.out.read || ro.ErrNext > rk.err.read
		if d := rk.out.from(ro.Next); len(d) > 0 {
			ro.Data, ro.Next, news = d, ro.Next+int64(len(d)), true
		}
		if d := rk.err.from(ro.ErrNext); len(d) > 0 {
			ro.Err, ro.ErrNext, news = d, ro.ErrNext+int64(len(d)), true
		}
		// The exit counts once all of the rank's output is through.
		if rk.exited && ro.Next >= rk.exit.Out && ro.ErrNext >= rk.exit.Err {
			ro.Exited, ro.Code = true, rk.exit.Code
		} else {
			done = false
		}
		out.Ranks = append(out.Ranks, ro)
	}
	if read {
		rs.notify() // a host waiting for srun to read learns it
	}
	return out, news || done, rs.changed, nil
}

// activeRun is the ID, owner check and node names of an active run by
// reference: a user works on the steps of their own runs (an admin on
// any).
func (s *Server) activeRun(ctx context.Context, ref string, u *store.User) (int64, []string, error) {
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		run, ferr := s.findRun(ctx, ref)
		if ferr != nil {
			return 0, nil, ferr
		}
		id = run.ID
	}
	s.mu.Lock()
	rs, ok := s.runs[id]
	var hosts []string
	owner := int64(0)
	if ok {
		owner = rs.rec.UserID
		hosts = make([]string, len(rs.jobs))
		for _, js := range rs.jobs {
			if js.rec.Num < len(hosts) {
				hosts[js.rec.Num] = js.rec.Node
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		return 0, nil, fmt.Errorf("%w: run %s is not active: it has no steps", ErrNotFound, ref)
	}
	if u != nil && !u.Admin && u.ID != owner {
		return 0, nil, fmt.Errorf("%w: run %s is another user's", ErrForbidden, ref)
	}
	return id, hosts, nil
}

func (s *Server) runActive(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.runs[id]
	return ok
}

// loadSteps restores the active runs' steps (at start).
func (s *Server) loadSteps(ctx context.Context) error {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.runs))
	active := map[int64]bool{}
	for id := range s.runs {
		ids = append(ids, id)
		active[id] = true
	}
	s.mu.Unlock()
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
	if _, ok := s.runs[run]; !ok {
		s.mu.Unlock()
		writeError(w, fmt.Errorf("%w: run %d has ended", ErrNotFound, run))
		return
	}
	st := s.steps.add(run, req, hosts, s.clock.Now())
	done := s.enqueue(&store.Batch{Steps: []*store.Step{st.record()}})
	s.mu.Unlock()
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
	s.mu.Unlock()
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
func (s *Server) handleListSteps(w http.ResponseWriter, r *http.Request, _ *store.User) {
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
