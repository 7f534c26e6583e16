package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// runState is an active run in memory.
type runState struct {
	rec   store.Run
	spec  *spec.Task
	req   sched.Request
	limit time.Duration // max_duration; 0 none
	jobs  []*jobState
	// placedAt is when the scheduler placed it: its expected end counts
	// from its start, or from here until it has started.
	placedAt  time.Time
	user      string  // the owner's name (fairshare)
	blockedBy []int64 // from the last pass that considered it
}

func newRunState(rec store.Run, t *spec.Task) *runState {
	rs := &runState{rec: rec, spec: t, req: request(t)}
	if t.MaxDuration != nil {
		rs.limit = time.Duration(*t.MaxDuration) * time.Second
	}
	return rs
}

// expectedEnd is when the run should give its resources back (zero: no
// limit, never as far as planning knows).
func (rs *runState) expectedEnd() time.Time {
	if rs.limit <= 0 {
		return time.Time{}
	}
	start := rs.rec.StartedAt
	if start.IsZero() {
		start = rs.placedAt
	}
	return start.Add(rs.limit)
}

// jobState is an active job in memory.
type jobState struct {
	rec   store.Job
	alloc api.Alloc
	run   *runState
}

// nodeState is a node in memory: what it has, what its jobs hold, its stream.
type nodeState struct {
	rec     store.Node
	info    api.NodeInfo
	conn    *agentConn
	jobs    map[int64]*jobState
	usedCPU int
	usedMem int64
	usedGPU map[int]int64 // device index -> job ID
}

func newNode(info api.NodeInfo) *nodeState {
	return &nodeState{info: info, jobs: map[int64]*jobState{}, usedGPU: map[int]int64{}}
}

func (n *nodeState) take(j *jobState) {
	n.jobs[j.rec.ID] = j
	n.usedCPU += j.alloc.CPUs
	n.usedMem += j.alloc.Memory
	for _, g := range j.alloc.GPUs {
		n.usedGPU[g] = j.rec.ID
	}
}

func (n *nodeState) release(j *jobState) {
	if _, ok := n.jobs[j.rec.ID]; !ok {
		return
	}
	delete(n.jobs, j.rec.ID)
	n.usedCPU -= j.alloc.CPUs
	n.usedMem -= j.alloc.Memory
	for _, g := range j.alloc.GPUs {
		delete(n.usedGPU, g)
	}
}

// request is what each job of the run needs on its node.
func request(t *spec.Task) sched.Request {
	var r sched.Request
	r.Fleets = t.Fleets
	r.CPUs = 1
	if t.Resources.CPU != nil {
		r.CPUs = t.Resources.CPU.Count.Min
	}
	if t.Resources.Memory != nil {
		r.Memory = sched.Bytes(t.Resources.Memory.Min)
	}
	if g := t.Resources.GPU; g != nil {
		r.GPU.Count = g.Count.Min
		r.GPU.Vendor = g.Vendor
		r.GPU.Names = g.Names
		if g.Memory != nil {
			r.GPU.MinMemory = sched.Bytes(g.Memory.Min)
			if g.Memory.Max != nil {
				r.GPU.MaxMemory = sched.Bytes(*g.Memory.Max)
			}
		}
	}
	return r
}

func (s *Server) load(ctx context.Context) error {
	a, err := s.store.LoadActive(ctx)
	if err != nil {
		return err
	}
	s.nextRun, s.nextJob = a.MaxRunID, a.MaxJobID
	for _, n := range a.Nodes {
		var info api.NodeInfo
		if err := json.Unmarshal(n.Info, &info); err != nil {
			return fmt.Errorf("server: node %s: %w", n.Name, err)
		}
		ns := newNode(info)
		ns.rec = *n
		s.nodes[n.Name] = ns
	}
	for _, r := range a.Runs {
		var t spec.Task
		if err := json.Unmarshal(r.Spec, &t); err != nil {
			return fmt.Errorf("server: run %d: %w", r.ID, err)
		}
		rs := newRunState(*r, &t)
		rs.placedAt = s.clock.Now()
		rs.user = s.name(ctx, 'u', r.UserID)
		s.runs[r.ID] = rs
	}
	for _, j := range a.Jobs {
		rs, ok := s.runs[j.RunID]
		if !ok {
			continue
		}
		js := &jobState{rec: *j, run: rs}
		if err := json.Unmarshal(j.Alloc, &js.alloc); err != nil {
			return fmt.Errorf("server: job %d: %w", j.ID, err)
		}
		rs.jobs = append(rs.jobs, js)
		s.jobs[j.ID] = js
		if ns, ok := s.nodes[j.Node]; ok && j.Node != "" {
			ns.take(js)
		}
	}
	for _, rs := range s.runs {
		sort.Slice(rs.jobs, func(i, k int) bool { return rs.jobs[i].rec.Num < rs.jobs[k].rec.Num })
		if api.Status(rs.rec.Status) == api.StatusSubmitted {
			s.pending[rs.rec.ID] = rs
		}
	}
	s.freed = true
	if err := s.loadUsage(ctx); err != nil {
		return err
	}
	s.log.Info("state loaded", "active_runs", len(s.runs), "active_jobs", len(s.jobs), "nodes", len(s.nodes))
	return nil
}

// Run names, when the configuration gives none, as dstack makes them.
var (
	adjectives = []string{"brave", "calm", "eager", "fast", "gentle", "happy", "keen", "lucky", "merry", "quiet", "rapid", "sharp", "swift", "tidy", "warm", "wise"}
	animals    = []string{"ant", "bat", "crab", "deer", "eel", "fox", "gnu", "hare", "ibis", "jay", "koi", "lynx", "moth", "newt", "owl", "pike"}
)

func runName(id int64) string {
	return fmt.Sprintf("%s-%s-%d", adjectives[id%int64(len(adjectives))], animals[(id/int64(len(adjectives)))%int64(len(animals))], id)
}

// submit creates a run of the valid configuration t and returns it once it
// is durable.
func (s *Server) submit(user *store.User, t *spec.Task) (*api.Run, error) {
	body, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("server: encode spec: %w", err)
	}
	now := s.clock.Now()
	s.mu.Lock()
	s.nextRun++
	id := s.nextRun
	name := t.Name
	if name == "" {
		name = runName(id)
	}
	rs := newRunState(store.Run{ID: id, ProjectID: s.projectID, UserID: user.ID, Name: name,
		Status: string(api.StatusSubmitted), Priority: t.Priority, Spec: body, SubmittedAt: now}, t)
	rs.user = user.Name
	b := &store.Batch{}
	for k := range max(t.Nodes, 1) {
		s.nextJob++
		js := &jobState{run: rs, rec: store.Job{ID: s.nextJob, RunID: id, Num: k, Status: string(api.StatusSubmitted), SubmittedAt: now, Alloc: []byte("{}")}}
		rs.jobs = append(rs.jobs, js)
		s.jobs[js.rec.ID] = js
		b.Jobs = append(b.Jobs, jobCopy(js))
	}
	s.runs[id] = rs
	s.pending[id] = rs
	s.fresh[id] = rs
	run := rs.rec
	b.Runs = append(b.Runs, &run)
	out := s.apiRun(&run, nil, user.Name, t)
	done := s.enqueue(b, s.wakeScheduler)
	s.mu.Unlock()
	if err := <-done; err != nil {
		return nil, err
	}
	return out, nil
}

func jobCopy(j *jobState) *store.Job {
	c := j.rec
	c.Alloc, _ = json.Marshal(j.alloc)
	return &c
}

func runCopy(r *runState) *store.Run {
	c := r.rec
	return &c
}

// stop asks a run's jobs to end. Jobs not placed yet end at once.
func (s *Server) stop(id int64, abort bool) error {
	level := 1
	if abort {
		level = 2
	}
	now := s.clock.Now()
	s.mu.Lock()
	rs, ok := s.runs[id]
	if !ok {
		s.mu.Unlock()
		return nil // already final
	}
	b := &store.Batch{}
	var after []func()
	if rs.rec.StopReq < level {
		rs.rec.StopReq = level
		b.Events = append(b.Events, &store.Event{RunID: id, Time: now, Type: "stop", Message: map[bool]string{false: "stop requested", true: "abort requested"}[abort]})
	}
	for _, js := range rs.jobs {
		switch api.Status(js.rec.Status) {
		case api.StatusSubmitted:
			reason, status := api.ReasonTerminatedByUser, api.StatusTerminated
			if abort {
				reason, status = api.ReasonAbortedByUser, api.StatusAborted
			}
			s.finishJob(js, status, reason, nil, now, b)
		case api.StatusProvisioning, api.StatusRunning, api.StatusTerminating:
			js.rec.Status = string(api.StatusTerminating)
			b.Jobs = append(b.Jobs, jobCopy(js))
			if ns, ok := s.nodes[js.rec.Node]; ok && ns.conn != nil {
				c, jobID := ns.conn, js.rec.ID
				after = append(after, func() { c.send(api.AgentMessage{Type: "stop", Stop: &api.StopJob{JobID: jobID, Abort: abort}}) })
			}
		}
	}
	s.aggregate(rs, now, b)
	done := s.enqueue(b, append(after, s.notify(id), s.wakeScheduler)...)
	s.mu.Unlock()
	return <-done
}

// finishJob makes a job final, releases what it held and records it in b.
func (s *Server) finishJob(js *jobState, status api.Status, reason string, code *int, now time.Time, b *store.Batch) {
	js.rec.Status, js.rec.Reason, js.rec.ExitCode = string(status), reason, code
	js.rec.FinishedAt = now
	if !js.rec.StartedAt.IsZero() {
		s.decayTo(now)
		s.addUsage(js.run.user, js.alloc.CPUs, js.rec.StartedAt, now)
	}
	if ns, ok := s.nodes[js.rec.Node]; ok {
		ns.release(js)
		s.freed = true
	}
	delete(s.jobs, js.rec.ID)
	b.Jobs = append(b.Jobs, jobCopy(js))
	msg := string(status)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	if code != nil {
		msg += " exit code " + strconv.Itoa(*code)
	}
	b.Events = append(b.Events, &store.Event{RunID: js.rec.RunID, JobID: js.rec.ID, Time: now, Type: "job_finished", Message: msg})
}

// aggregate derives the run's status from its jobs' and records the run in b.
func (s *Server) aggregate(rs *runState, now time.Time, b *store.Batch) {
	final := true
	var running, provisioning, terminating bool
	for _, js := range rs.jobs {
		switch api.Status(js.rec.Status) {
		case api.StatusRunning:
			running = true
		case api.StatusProvisioning, api.StatusPulling:
			provisioning = true
		case api.StatusTerminating:
			terminating = true
		}
		if !api.Status(js.rec.Status).Finished() {
			final = false
		}
	}
	switch {
	case final:
		s.finalRun(rs, now)
	case terminating || rs.rec.StopReq > 0:
		rs.rec.Status = string(api.StatusTerminating)
	case running:
		rs.rec.Status, rs.rec.Reason = string(api.StatusRunning), ""
	case provisioning:
		rs.rec.Status, rs.rec.Reason = string(api.StatusProvisioning), ""
	}
	b.Runs = append(b.Runs, runCopy(rs))
}

// finalRun sets a finished run's status, reason and exit code from its jobs
// and drops it from memory.
func (s *Server) finalRun(rs *runState, now time.Time) {
	status, reason := api.StatusDone, api.ReasonDone
	var code *int
	rank := map[api.Status]int{api.StatusDone: 0, api.StatusTerminated: 1, api.StatusFailed: 2, api.StatusAborted: 3}
	for _, js := range rs.jobs {
		st := api.Status(js.rec.Status)
		if rank[st] > rank[status] {
			status, reason = st, js.rec.Reason
		}
		if js.rec.ExitCode != nil && (code == nil || *code == 0) {
			v := *js.rec.ExitCode
			code = &v
		}
	}
	rs.rec.Status, rs.rec.Reason, rs.rec.ExitCode, rs.rec.FinishedAt = string(status), reason, code, now
	delete(s.runs, rs.rec.ID)
	delete(s.pending, rs.rec.ID)
	delete(s.fresh, rs.rec.ID)
}

// exitStatus maps a shim's report onto a job's final state.
func exitStatus(ev api.AgentEvent, stopReq int) (api.Status, string) {
	switch ev.Reason {
	case "stopped":
		if stopReq == 0 {
			return api.StatusTerminated, api.ReasonTerminatedByAgent
		}
		return api.StatusTerminated, api.ReasonTerminatedByUser
	case "aborted":
		return api.StatusAborted, api.ReasonAbortedByUser
	case "max_duration":
		return api.StatusTerminated, api.ReasonMaxDuration
	case "start_failed":
		return api.StatusFailed, api.ReasonFailedToStart
	case api.ReasonLostByAgent:
		return api.StatusFailed, api.ReasonLostByAgent
	}
	// As Slurm's OUT_OF_MEMORY: an OOM kill in the job fails it, whatever
	// its exit code (a stop asked for above still reads as the stop).
	if ev.OOMKilled {
		return api.StatusFailed, api.ReasonOutOfMemory
	}
	if ev.ExitCode == 0 {
		return api.StatusDone, api.ReasonDone
	}
	return api.StatusFailed, api.ReasonExitedWithError
}

// agentEvents applies a node's reports and answers what the server now holds.
func (s *Server) agentEvents(node string, evs []api.AgentEvent) (*api.AgentAck, error) {
	now := s.clock.Now()
	ack := &api.AgentAck{LogSize: map[int64]int64{}}
	b := &store.Batch{}
	s.mu.Lock()
	touched := map[int64]*jobState{}
	runs := map[int64]*runState{}
	finished := false
	for _, ev := range evs {
		js, ok := s.jobs[ev.JobID]
		if !ok || js.rec.Node != node {
			if ev.Type == "exited" {
				ack.Closed = append(ack.Closed, ev.JobID)
			}
			continue
		}
		touched[js.rec.ID] = js
		switch ev.Type {
		case "started":
			if st := api.Status(js.rec.Status); st == api.StatusProvisioning || st == api.StatusPulling {
				js.rec.Status = string(api.StatusRunning)
				js.rec.StartedAt = ev.Time
				if js.run.rec.StartedAt.IsZero() {
					js.run.rec.StartedAt = ev.Time
				}
				runs[js.rec.RunID] = js.run
			}
		case "log":
			if ev.Offset == js.rec.LogSize {
				b.Logs = append(b.Logs, &store.LogChunk{JobID: js.rec.ID, Offset: ev.Offset, Stream: ev.Stream, Time: ev.Time, Data: ev.Data})
				js.rec.LogSize += ev.Size
			}
		case "exited":
			if js.rec.StartedAt.IsZero() && !ev.NeverStarted {
				js.rec.StartedAt = ev.Time
			}
			if js.run.rec.StartedAt.IsZero() {
				js.run.rec.StartedAt = js.rec.StartedAt
			}
			status, reason := exitStatus(ev, js.run.rec.StopReq)
			code := ev.ExitCode
			delete(touched, js.rec.ID)
			s.finishJob(js, status, reason, &code, ev.Time, b)
			if ev.Message != "" {
				b.Events = append(b.Events, &store.Event{RunID: js.rec.RunID, JobID: js.rec.ID, Time: now, Type: "agent", Message: ev.Message})
			}
			ack.LogSize[js.rec.ID] = js.rec.LogSize
			ack.Closed = append(ack.Closed, js.rec.ID)
			runs[js.rec.RunID] = js.run
			finished = true
		}
	}
	for id, js := range touched {
		b.Jobs = append(b.Jobs, jobCopy(js))
		ack.LogSize[id] = js.rec.LogSize
	}
	for _, rs := range runs {
		s.aggregate(rs, now, b)
	}
	after := []func(){}
	notified := map[int64]bool{}
	for _, js := range touched {
		notified[js.rec.RunID] = true
	}
	for id := range runs {
		notified[id] = true
	}
	for id := range notified {
		after = append(after, s.notify(id))
	}
	if finished {
		after = append(after, s.wakeScheduler)
	}
	done := s.enqueue(b, after...)
	s.mu.Unlock()
	if err := <-done; err != nil {
		return nil, err
	}
	return ack, nil
}

// notify returns a function that wakes the run's log followers.
func (s *Server) notify(runID int64) func() {
	return func() { s.hub.notify(runID) }
}

// schedLoop runs a scheduling pass whenever something changed, and on a slow
// timer as a safety net.
func (s *Server) schedLoop(ctx context.Context) {
	t := time.NewTimer(s.cfg.ResyncEvery)
	defer t.Stop()
	lastFull := s.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
			if now := s.clock.Now(); now.Sub(lastFull) >= s.cfg.ResyncEvery {
				lastFull = now
				s.mu.Lock()
				s.freed = true // the safety net: a full pass
				s.mu.Unlock()
			}
		}
		s.scheduleOnce()
		wait := s.cfg.ResyncEvery
		s.mu.Lock()
		if len(s.reasons) > 0 {
			wait = min(wait, max(time.Until(s.reasonsDue), time.Millisecond))
		}
		s.mu.Unlock()
		t.Reset(wait)
	}
}

// reasonFlush bounds how long a changed pending reason stays unwritten.
// Reasons are derived (the next pass recomputes them), so they need not be
// durable at once: writing them with the next placement, or within this,
// spares a transaction per submission.
const reasonFlush = time.Second

// flushReasonsLocked writes the changed pending reasons into b when b
// carries other changes anyway or when they are due.
func (s *Server) flushReasonsLocked(b *store.Batch, now time.Time) {
	if len(s.reasons) == 0 || (b.Empty() && now.Before(s.reasonsDue)) {
		return
	}
	for id, rs := range s.reasons {
		if _, ok := s.pending[id]; ok {
			b.Runs = append(b.Runs, runCopy(rs))
		}
	}
	clear(s.reasons)
}

// snapshotLocked builds the scheduler's view of the cluster, with the given
// pending runs.
func (s *Server) snapshotLocked(pending map[int64]*runState) sched.Snapshot {
	var snap sched.Snapshot
	names := make([]string, 0, len(s.nodes))
	for n := range s.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		snap.Nodes = append(snap.Nodes, s.schedNode(s.nodes[name]))
	}
	// What runs hold, and until when: from the nodes, so that a pass costs
	// what runs, not what is queued.
	held := map[int64]*sched.Running{}
	var ids []int64
	for _, name := range names {
		for _, js := range s.nodes[name].jobs {
			r, ok := held[js.rec.RunID]
			if !ok {
				r = &sched.Running{RunID: js.rec.RunID, End: js.run.expectedEnd()}
				held[js.rec.RunID] = r
				ids = append(ids, js.rec.RunID)
			}
			r.Placements = append(r.Placements, sched.Placement{JobID: js.rec.ID, Node: name, CPUs: js.alloc.CPUs,
				Memory: sched.Bytes(js.alloc.Memory), GPUs: js.alloc.GPUs})
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		snap.Running = append(snap.Running, *held[id])
	}
	snap.Policy = s.cfg.Policy
	snap.Weights = s.cfg.Weights
	snap.Depth = s.cfg.Depth
	snap.Usage = s.usageAtLocked(s.clock.Now())
	snap.Pending = make([]sched.Pending, 0, len(pending))
	for _, rs := range pending {
		p := sched.Pending{RunID: rs.rec.ID, Priority: rs.rec.Priority, SubmittedAt: rs.rec.SubmittedAt, Nodes: len(rs.jobs),
			Request: rs.req, Limit: rs.limit, User: rs.user}
		p.JobIDs = make([]int64, len(rs.jobs))
		for k, js := range rs.jobs {
			p.JobIDs[k] = js.rec.ID
		}
		snap.Pending = append(snap.Pending, p)
	}
	return snap
}

func (s *Server) schedNode(ns *nodeState) sched.Node {
	n := sched.Node{Name: ns.info.Name, Fleet: ns.info.Fleet, Online: ns.conn != nil, CPUs: ns.info.CPUs, Memory: sched.Bytes(ns.info.Memory),
		FreeCPUs: ns.info.CPUs - ns.usedCPU, FreeMemory: sched.Bytes(ns.info.Memory - ns.usedMem)}
	for _, g := range ns.info.GPUs {
		n.GPUs = append(n.GPUs, sched.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, Memory: sched.Bytes(g.Memory)})
		if _, used := ns.usedGPU[g.Index]; !used {
			n.FreeGPUs = append(n.FreeGPUs, g.Index)
		}
	}
	return n
}

// scheduleOnce runs one pass and applies its plan. The first placement
// policy is greedy first fit, so a run that did not fit before fits only once
// something was freed: until then a pass tries just the runs submitted since
// the last one, which keeps a pass cheap however long the queue is.
func (s *Server) scheduleOnce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return
	}
	now := s.clock.Now()
	candidates := s.fresh
	if s.freed {
		candidates = s.pending
	} else if len(s.reserved) > 0 {
		// Runs that hold reservations keep them against the new ones.
		candidates = maps.Clone(s.fresh)
		for _, id := range s.reserved {
			if rs, ok := s.pending[id]; ok {
				candidates[id] = rs
			}
		}
	}
	if len(candidates) == 0 {
		b := &store.Batch{}
		s.flushReasonsLocked(b, now)
		if !b.Empty() {
			s.enqueue(b)
		}
		return
	}
	s.freed = false
	s.fresh = map[int64]*runState{}
	s.metrics.cycles.Add(1)
	plan := sched.Schedule(s.snapshotLocked(candidates), now)
	b := &store.Batch{}
	var after []func()
	s.reserved = plan.Reserved
	for _, st := range plan.Starts {
		rs := s.runs[st.RunID]
		rs.placedAt, rs.rec.EstimatedStart = now, time.Time{}
		delete(s.pending, st.RunID)
		nodeIPs := make([]string, len(st.Placements))
		hosts := make([]string, len(st.Placements))
		for k, p := range st.Placements {
			nodeIPs[k] = s.nodes[p.Node].info.Addr
			hosts[k] = p.Node
		}
		for k, p := range st.Placements {
			js := rs.jobs[k]
			ns := s.nodes[p.Node]
			js.rec.Status, js.rec.Node = string(api.StatusProvisioning), p.Node
			js.alloc = api.Alloc{CPUs: p.CPUs, Memory: int64(p.Memory), GPUs: p.GPUs}
			ns.take(js)
			b.Jobs = append(b.Jobs, jobCopy(js))
			if ns.conn != nil {
				c, asg := ns.conn, s.assignment(js, hosts, nodeIPs)
				after = append(after, func() { c.send(api.AgentMessage{Type: "assign", Jobs: []api.Assignment{asg}}) })
			}
		}
		b.Events = append(b.Events, &store.Event{RunID: rs.rec.ID, Time: now, Type: "placed", Message: "on " + strings.Join(hosts, ",")})
		s.aggregate(rs, now, b)
	}
	for id, reason := range plan.Reasons {
		rs := s.runs[id]
		rs.blockedBy = plan.BlockedBy[id]
		est := plan.Estimates[id]
		if rs.rec.Reason != reason || !rs.rec.EstimatedStart.Equal(est) {
			rs.rec.Reason, rs.rec.EstimatedStart = reason, est
			if len(s.reasons) == 0 {
				s.reasonsDue = now.Add(reasonFlush)
			}
			s.reasons[id] = rs
		}
	}
	s.flushReasonsLocked(b, now)
	if !b.Empty() {
		s.enqueue(b, after...)
	}
}
