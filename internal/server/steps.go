package server

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
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
	// work is closed and replaced when the hosts have something new:
	// a step, a signal, the run's end (not on every byte of output).
	work chan struct{}
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

// notifyWork wakes the hosts' polls, and everything else.
func (rs *runSteps) notifyWork() {
	close(rs.work)
	rs.work = make(chan struct{})
	rs.notify()
}

func (r *stepRelay) run(id int64) *runSteps {
	if r.runs == nil {
		r.runs = map[int64]*runSteps{}
	}
	rs := r.runs[id]
	if rs == nil {
		rs = &runSteps{steps: map[int]*relayStep{}, changed: make(chan struct{}), work: make(chan struct{})}
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
	rs.notifyWork()
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
	rs.notifyWork()
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
		return nil, rs.work
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
		rs.notifyWork()
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
	rs.notifyWork()
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
