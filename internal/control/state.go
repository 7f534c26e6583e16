package control

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"weak"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// runState is an active run in memory.
type runState struct {
	rec store.Run
	// What the control plane reads of the configuration while the run
	// waits: its request and time limit (every pass), its stop criteria
	// (lifecycle); its QOS, nice, retry policy and dependencies are in rare.
	req   *sched.Request // never changed in place (resolve)
	limit time.Duration  // max_duration; 0 none
	// rare holds what few runs have (see runRare); nil for a plain run.
	rare *runRare
	// jobs are its jobs of the current attempt, once made (see unmade).
	jobs      []*jobState
	unmade    unmadeJobs
	user      string  // the owner's name (fairshare, limits)
	project   string  // its project's name
	blockedBy []int64 // from the last pass that considered it
	// hold, when set, is why the run may not be scheduled at all (a reason
	// the scheduler need not see, e.g. PartitionTimeLimit).
	hold string
	// array is set on an array's own run; parent on each of its tasks
	// (a schedule's own run has rare.sched).
	array  *arrayState
	parent *runState
	tier   int32 // the highest tier of the fleets it may use
	// held: a user's hold (JobHeldUser).
	held       bool
	masterDone bool
	// What the scheduler's Cycle was told of the waiting run (pass.go):
	// queued, waiting with queuedHold (a placed run's view is rare.cyc).
	queued     bool
	queuedHold string
}

// runRare is what few runs of a long queue have, kept apart so that
// plain waiting runs do not pay for it: a QOS or nice, a retry policy and
// retry state, dependencies, named fleets, a heterogeneous run's groups, a
// begin time, a schedule's state; and what a placed run holds. Read it
// with r(), change it with w(); dropTask lets an empty one go.
type runRare struct {
	qos  string
	nice int64
	// parsed is the run's configuration decoded, kept while it is placed
	// (the agents need all of it) and for arrays and schedules; a waiting
	// run holds only its stored form (rec.Spec) and what passes read of
	// it, so that a long queue costs little memory. task() reads it.
	parsed *spec.Task
	// placedAt is when the scheduler placed it (Unix ns; 0: not placed):
	// its expected end counts from its start, or from here until it has
	// started.
	placedAt int64
	// cyc is what the scheduler's Cycle was told of the run holding
	// resources; stopBy, when a run being stopped is gone at the latest
	// (its stop's time plus its grace period).
	cyc         *sched.Running
	stopBy      time.Time
	retryPolicy *lifecycle.RetryPolicy
	retry       *lifecycle.Retries // see faults.go; nil until it first failed
	deps        []spec.Dependency
	fleets      []string      // the fleets it names (resolveFleets)
	groups      []sched.Group // a heterogeneous run's components (nil: one request, req)
	begin       time.Time     // not before then (BeginTime; zero: none)
	sched       *scheduleState
	depAny      bool // dependency_policy: any
	singleton   bool
	killInvalid bool // kill_invalid_depend
}

// empty tells whether nothing is set.
func (x *runRare) empty() bool {
	return x.qos == "" && x.nice == 0 && x.parsed == nil && x.placedAt == 0 && x.cyc == nil && x.stopBy.IsZero() &&
		x.retryPolicy == nil && x.retry == nil && x.deps == nil && x.fleets == nil && x.groups == nil && x.begin.IsZero() &&
		x.sched == nil && !x.depAny && !x.singleton && !x.killInvalid
}

// noRare is the rare part of a run that has none: read, never written
// (Check verifies it stays zero).
var noRare runRare

// r is the run's rare part, to read.
func (rs *runState) r() *runRare {
	if rs.rare != nil {
		return rs.rare
	}
	return &noRare
}

// w is the run's rare part, to change (made when the run has none).
func (rs *runState) w() *runRare {
	if rs.rare == nil {
		rs.rare = &runRare{}
	}
	return rs.rare
}

// beginAt is when the run may start at the earliest (zero: now).
func (rs *runState) beginAt() time.Time { return rs.r().begin }

// setBegin sets when the run may start at the earliest (zero: now).
func (rs *runState) setBegin(t time.Time) {
	if !t.IsZero() || rs.rare != nil {
		rs.w().begin = t
	}
}

// newRunState builds an active run from its record and configuration,
// resolving its fleets, tier and time limit against the policy.
func (s *Cluster) newRunState(rec store.Run, t *spec.Task, user, project string) *runState {
	rs := &runState{rec: rec, user: user, project: project}
	if t != nil {
		rs.w().parsed = t
	}
	rs.configure(t)
	s.resolve(rs, t, s.rules.Load())
	return rs
}

// configure keeps what the control plane reads of t while the run waits.
func (rs *runState) configure(t *spec.Task) {
	if t.QOS != "" || t.Nice != 0 || rs.rare != nil {
		rs.w().qos, rs.rare.nice = t.QOS, t.Nice
	}
	rs.limit = 0
	if t.MaxDuration != nil {
		rs.limit = t.MaxDuration.Std()
	}
	var policy *lifecycle.RetryPolicy
	if p := t.Retry; p != nil {
		policy = &lifecycle.RetryPolicy{OnEvents: p.OnEvents}
		if p.Duration != nil {
			policy.Duration = time.Duration(*p.Duration) * time.Second
		}
	}
	rs.masterDone = t.StopCriteria == "master-done"
	depAny := t.DependencyPolicy == "any"
	if policy != nil || len(t.DependsOn) > 0 || depAny || t.Singleton || t.KillInvalidDepend || rs.rare != nil {
		x := rs.w()
		x.retryPolicy = policy
		x.deps, x.depAny, x.singleton, x.killInvalid = t.DependsOn, depAny, t.Singleton, t.KillInvalidDepend
	}
}

// task is the run's configuration: the parsed one when kept, else decoded
// from its stored form, or for an array's task that holds none, made from
// its array's (a copy: changes to it are saved with setTask).
func (rs *runState) task() *spec.Task {
	if p := rs.r().parsed; p != nil {
		return p
	}
	if len(rs.rec.Spec) == 0 && rs.parent != nil && rs.parent.array != nil {
		return rs.parent.task().ForArrayTask(rs.rec.ArrayIndex, rs.parent.array.count())
	}
	var t spec.Task
	if err := json.Unmarshal(rs.rec.Spec, &t); err != nil {
		panic(fmt.Sprintf("server: run %d: stored configuration unreadable: %v", rs.rec.ID, err)) // it was encoded by us
	}
	return &t
}

// setTask stores a changed configuration t (from task()) in the run.
func (rs *runState) setTask(t *spec.Task) {
	if body, err := json.Marshal(t); err == nil {
		rs.rec.Spec = body
	}
	if rs.r().parsed != nil {
		rs.rare.parsed = t
	}
	rs.configure(t)
}

// keepTask keeps the configuration parsed (the run is placed);
// dropTask lets a plain waiting run hold only its stored form.
func (rs *runState) keepTask() {
	t := rs.task()
	rs.w().parsed = t
}

func (rs *runState) dropTask() {
	if rs.array == nil && rs.r().sched == nil && rs.rare != nil {
		rs.rare.parsed = nil
		if rs.rare.empty() {
			rs.rare = nil
		}
	}
}

// resolve sets what a run asks for from its configuration and time limit,
// then resolveFleets what the policy makes of it.
func (s *Cluster) resolve(rs *runState, t *spec.Task, rules *policy.Policy) {
	if len(t.Fleets) > 0 || rs.rare != nil {
		rs.w().fleets = t.Fleets
	}
	var groups []sched.Group
	for _, g := range t.Groups {
		groups = append(groups, sched.Group{Nodes: max(g.Nodes, 1), Request: requestOf(t, g.Resources)})
	}
	s.resolveFleets(rs, request(t), groups, rules)
}

// resolveFleets sets the fleets req and groups may use under the policy:
// the fleets the run's names reach, their tier, and a hold when every
// fleet's time limit is below the run's. A policy reload resolves the
// pending runs again from what they hold, without their configuration.
//
// The request and groups are made anew, never changed in place: the
// scheduler's views of the run share them (pass.go).
func (s *Cluster) resolveFleets(rs *runState, req sched.Request, groups []sched.Group, rules *policy.Policy) {
	rs.hold = ""
	// Partitions set DOWN (scontrol update PartitionName=X State=DOWN)
	// take no new starts: the run uses the others it names, or waits.
	names, up := rules.UpPartitions(rs.r().fleets)
	req.Fleets, req.NotFleets = rules.ResolveFleets(names), nil
	req.Project = rs.project // a node a project owns serves its runs only (owners.go)
	rs.tier = int32(rules.Tier(req.Fleets))
	if rs.limit > 0 {
		// Fleets whose time limit the run exceeds are not for it.
		var ok []string
		for _, f := range req.Fleets {
			if w := rules.Fleets[f].MaxWall; w == 0 || w >= rs.limit {
				ok = append(ok, f)
			}
		}
		if len(req.Fleets) > 0 && len(ok) == 0 {
			rs.hold = api.ReasonPartitionTimeLimit
		}
		req.Fleets = ok
		if len(rs.r().fleets) == 0 {
			for name, f := range rules.Fleets {
				if f.MaxWall > 0 && f.MaxWall < rs.limit {
					req.NotFleets = append(req.NotFleets, name)
				}
			}
			slices.Sort(req.NotFleets)
		}
	}
	var resolved []sched.Group
	for _, g := range groups {
		g.Request.Fleets, g.Request.NotFleets = req.Fleets, req.NotFleets
		resolved = append(resolved, g)
	}
	if len(resolved) > 0 || rs.rare != nil {
		rs.w().groups = resolved
	}
	if len(resolved) > 0 {
		req = resolved[0].Request
	}
	if !up {
		rs.hold = api.ReasonPartitionDown
	}
	rs.req = s.reqs.intern(&req)
}

// requestKey is a request as a map key (its lists joined).
type requestKey struct {
	cpus, count                  int
	memory, minMemory, maxMemory sched.Bytes
	vendor, names                string
	fleets, notFleets            string
	exclusive, containers        bool
	nodes, exclude, features     string
	project                      string
}

// requests interns the waiting runs' requests: most runs of a long queue
// ask for one of a few, and a request is never changed in place, so they
// share one. Entries are weak: a request no run holds any longer goes, and
// its entry is swept when the map has doubled since the last sweep.
type requests struct {
	m     map[requestKey]weak.Pointer[sched.Request]
	swept int
}

// intern is the shared copy of r.
func (rq *requests) intern(r *sched.Request) *sched.Request {
	k := requestKey{cpus: r.CPUs, count: r.GPU.Count, memory: r.Memory, minMemory: r.GPU.MinMemory, maxMemory: r.GPU.MaxMemory,
		vendor: r.GPU.Vendor, names: strings.Join(r.GPU.Names, "\x00"), fleets: strings.Join(r.Fleets, "\x00"),
		notFleets: strings.Join(r.NotFleets, "\x00"), exclusive: r.Exclusive, containers: r.Containers,
		nodes: strings.Join(r.Nodes, "\x00"), exclude: strings.Join(r.Exclude, "\x00"), features: strings.Join(r.Features, "\x00"), project: r.Project}
	if rq.m == nil {
		rq.m = map[requestKey]weak.Pointer[sched.Request]{}
	}
	if p := rq.m[k].Value(); p != nil {
		return p
	}
	rq.m[k] = weak.Make(r)
	if len(rq.m) > 2*rq.swept+64 {
		maps.DeleteFunc(rq.m, func(_ requestKey, p weak.Pointer[sched.Request]) bool { return p.Value() == nil })
		rq.swept = len(rq.m)
	}
	return r
}

// keys are the limit keys the run counts under.
func (rs *runState) keys() []sched.LimitKey {
	return []sched.LimitKey{{Scope: sched.ScopeUser, Name: rs.user}, {Scope: sched.ScopeProject, Name: rs.project},
		{Scope: sched.ScopeQOS, Name: rs.r().qos}, {Scope: sched.ScopeQOSUser, Name: rs.r().qos + "\x00" + rs.user}, sched.ProjectUserKey(rs.project, rs.user)}
}

// expectedEnd is when the run should give its resources back (zero: no
// limit, never as far as planning knows).
func (rs *runState) expectedEnd() time.Time {
	if rs.limit <= 0 {
		return time.Time{}
	}
	start := rs.rec.StartedAt
	if start.IsZero() {
		start = time.Unix(0, rs.r().placedAt).UTC()
	}
	return start.Add(rs.limit)
}

// jobState is an active job in memory.
type jobState struct {
	rec   store.Job
	alloc api.Alloc
	run   *runState
	// stopping: the server stops it because a sibling failed (or the
	// master is done); held: its assignment waits for startup_order.
	stopping bool
	held     bool
	// stopSent is when the job was last asked to stop while its node was
	// connected (zero: not asked), abort whether with SIGKILL at once:
	// its end is due by then plus its grace and UnkillableTimeout.
	stopSent time.Time
	abort    bool
}

// nodeState is a node in memory: what it has, what its jobs hold, its stream.
type nodeState struct {
	rec  store.Node
	info api.NodeInfo
	// online: its agent's stream is open; epoch counts its streams, so
	// that a message meant for one is never sent on a later one (which
	// begins with a full sync).
	online  bool
	epoch   uint64
	jobs    map[int64]*jobState
	usedCPU int
	usedMem int64
	usedGPU map[int]int64 // device index -> job ID
	// downSince is when the agent's stream ended (zero while connected);
	// unreachable: it stayed away longer than NodeTimeout.
	downSince   time.Time
	unreachable bool
	// cyc is the node as the scheduler's Cycle was last told of it
	// (syncNode); never changed in place.
	cyc *sched.Node
	// cond is its drain and health (nodes.go), read from rec.Drain
	// when first needed.
	cond *nodeCond
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
	return requestOf(t, t.Resources)
}

// requestOf is what one job with these resources needs, under t's fleets,
// exclusivity and image.
func requestOf(t *spec.Task, res spec.Resources) sched.Request {
	var r sched.Request
	r.Fleets = t.Fleets
	r.Exclusive = t.Exclusive
	r.Containers = t.Image != ""
	r.Nodes, r.Exclude, r.Features = t.Nodelist, t.Exclude, withRuntimes(t, t.Constraint) // runtime.go
	if f := mountFeatures(t); len(f) > 0 {                                                // volumes.go
		r.Features = slices.Concat(r.Features, f)
	}
	r.CPUs = 1
	if res.CPU != nil {
		r.CPUs = res.CPU.Count.Min
	}
	if res.Memory != nil {
		r.Memory = sched.Bytes(res.Memory.Min)
	}
	if g := res.GPU; g != nil {
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

// Loaded is what the store holds that the Cluster starts from: the
// active runs, jobs and nodes, with every name and reference resolved.
type Loaded struct {
	Active *store.Active
	// names of the runs' users and projects, by ID
	Users, Projects map[int64]string
	// tasks are the tasks of the active arrays and of the ended arrays
	// waiting runs depend on, by array ID; ended are the ended runs
	// waiting runs depend on.
	Tasks map[int64][]*store.Run
	Ended map[int64]*store.Run
	// usage is the jobs that ended within ten half-lives (fairshare).
	Usage []*store.JobUsage
	// Keys are the idempotency keys of the last KeyMemory, oldest first.
	Keys []*store.IdempotencyKey
}

// ActiveHeads are the active runs of a, with the active arrays and
// schedules as their records list them (store.Head): an array or a
// schedule has no run row, but is a runState here, which its tasks and
// fired runs, stops, holds and names find like a run (addRecords writes it
// back as its record).
func ActiveHeads(a *store.Active) []*store.Run {
	out := slices.Clone(a.Runs)
	for _, r := range a.Arrays {
		out = append(out, r.Run())
	}
	for _, r := range a.Schedules {
		out = append(out, r.Run())
	}
	return out
}

// Restore builds the Cluster from what the store holds, at now.
func (s *Cluster) Restore(l *Loaded, now time.Time) error {
	a := l.Active
	s.nextRun, s.nextJob = a.MaxRunID, a.MaxJobID
	s.runsUpto, s.jobsUpto = s.nextRun, s.nextJob // the first new ID reserves
	for _, n := range a.Nodes {
		var info api.NodeInfo
		if err := json.Unmarshal(n.Info, &info); err != nil {
			return fmt.Errorf("server: node %s: %w", n.Name, err)
		}
		ns := newNode(info)
		ns.rec = *n
		s.nodes[n.Name] = ns
	}
	for _, name := range slices.Sorted(maps.Keys(s.nodes)) {
		s.syncNode(s.nodes[name]) // before the runs: the Cycle counts what they hold
	}
	for _, r := range ActiveHeads(a) {
		var t spec.Task
		if err := json.Unmarshal(r.Spec, &t); err != nil {
			return fmt.Errorf("server: run %d: %w", r.ID, err)
		}
		rs := s.newRunState(*r, &t, l.Users[r.UserID], l.Projects[r.ProjectID])
		rs.w().placedAt = now.UnixNano()
		rs.loadMeta()
		s.runs[r.ID] = rs
		s.countActive(rs, 1)
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
	arrays := map[int64]*store.Array{}
	for _, r := range a.Arrays {
		arrays[r.ID] = r
	}
	schedules := map[int64]*store.Schedule{}
	for _, r := range a.Schedules {
		schedules[r.ID] = r
	}
	for _, rs := range s.runs {
		sort.Slice(rs.jobs, func(i, k int) bool { return rs.jobs[i].rec.Num < rs.jobs[k].rec.Num })
		for _, js := range rs.jobs {
			// A job stopping while its run is not: the server stopped it
			// because of a sibling (all-or-nothing, master-done).
			js.stopping = api.Status(js.rec.Status) == api.StatusTerminating && lifecycle.StopCause(rs.rec.StopReq) == lifecycle.StopNone
			if api.Status(js.rec.Status) == api.StatusTerminating {
				// Asked to stop before the restart: its end is due counting
				// from now (the resync asks again).
				js.stopSent, js.abort = now, lifecycle.StopCause(rs.rec.StopReq) == lifecycle.StopAbort
			}
		}
		if rs.task().StartupOrder != "" && len(rs.jobs) > 1 {
			// startup_order's held assignments are not stored: hold again
			// the placed jobs whose turn has not come.
			started := func(k int) bool {
				st := api.Status(rs.jobs[k].rec.Status)
				return st == api.StatusRunning || st.Finished()
			}
			for k, js := range rs.jobs {
				js.held = api.Status(js.rec.Status) == api.StatusProvisioning && startupHeld(rs.task(), k, started, len(rs.jobs))
			}
		}
		if rs.task().Array != "" && rs.rec.ArrayID == 0 {
			if err := s.loadArray(rs, arrays[rs.rec.ID], l.Tasks[rs.rec.ID]); err != nil {
				return err
			}
			s.arrays[rs.rec.ID] = rs
			continue
		}
		if api.Status(rs.rec.Status) == api.StatusScheduled {
			if err := s.loadSchedule(rs, schedules[rs.rec.ID]); err != nil {
				return err
			}
			s.schedules[rs.rec.ID] = rs
			continue
		}
		if lifecycle.StopCause(rs.rec.StopReq) != lifecycle.StopNone {
			// Asked to stop before the restart: gone within its grace
			// period counting from now (the resync asks again).
			rs.w().stopBy = s.stopByOf(rs, now)
		}
		s.syncRun(rs)
		if api.Status(rs.rec.Status) == api.StatusSubmitted {
			s.pending[rs.rec.ID] = rs
			s.fresh[rs.rec.ID] = rs
			if len(rs.jobs) == 0 {
				// Never placed: its jobs get IDs again (nothing durable
				// named the ones it had).
				s.newJobsLocked(rs, 0, rs.rec.SubmittedAt, nil)
			}
			s.unmakeJobsLocked(rs)
		}
	}
	for _, rs := range s.pending {
		for _, d := range rs.r().deps {
			for _, ref := range d.Runs {
				id, index := ParseRef(ref)
				r, ok := l.Ended[id]
				if _, active := s.runs[id]; active || !ok {
					continue
				}
				s.ended[id] = OutcomeOf(r)
				if _, known := s.doneArrays[id]; (d.Type == "aftercorr" || index >= 0) && !known && IsArrayRun(r) {
					a := &arrayState{tasks: map[int]int64{}}
					var t spec.Task
					if json.Unmarshal(r.Spec, &t) == nil {
						a.spec, _ = spec.ParseArray(t.Array)
					}
					for _, tk := range l.Tasks[id] {
						a.tasks[tk.ArrayIndex] = tk.ID
						s.ended[tk.ID] = OutcomeOf(tk)
					}
					if a.spec != nil {
						s.doneArrays[id] = a
					}
				}
			}
		}
		s.watchLocked(rs)
		rs.dropTask()
	}
	for id, rs := range s.arrays {
		if t := rs.array.rec.Throttle; t > 0 {
			s.cycle.SetArrayLimit(strconv.FormatInt(id, 10), t)
		}
	}
	s.freed = true
	s.restoreUsage(l)
	for _, k := range l.Keys {
		s.rememberKey(keyOf(k.UserID, k.Key), k.RunID, k.Created)
	}
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
// SubmitOpts are a submission's options beside its configuration.
type SubmitOpts struct {
	Hold  bool
	Begin time.Time
	// Key is the client's Idempotency-Key: a second submission with it
	// answers the first's run ("": none).
	Key string
	// UniqueName refuses a named run while an active run of its project
	// has that name (dstack's rule, which `berth apply` asks for; Slurm's
	// job names may repeat).
	UniqueName bool
}

// activeNamed is an active run of the project with that name, nil if none.
// Submissions are serialised by the state machine, so two of one name
// cannot both pass it.
func (s *Cluster) activeNamed(project int64, name string) *runState {
	for _, rs := range s.runs {
		if rs.rec.ProjectID == project && rs.rec.Name == name {
			return rs
		}
	}
	return nil
}

// onSubmit creates a run of the valid configuration in.Task.
func (s *Cluster) onSubmit(now time.Time, in SubmitInput) (any, error) {
	t := in.Task
	var key userKey
	if in.Opts.Key != "" {
		key = keyOf(in.UserID, in.Opts.Key)
		if k, ok := s.keys[key]; ok {
			// Answered once the first submission is durable: an empty
			// batch is queued behind it.
			s.emit(&store.Batch{})
			return Resubmitted{ID: k.run}, nil
		}
	}
	rs := s.newRunState(store.Run{ProjectID: in.ProjectID, UserID: in.UserID, Status: string(api.StatusSubmitted), Priority: t.Priority,
		Spec: in.Body, SubmittedAt: now}, t, in.User, in.Project)
	if err := s.submitLimitLocked(rs); err != nil {
		return store.Run{}, err
	}
	if in.Opts.UniqueName && t.Name != "" {
		if other := s.activeNamed(in.ProjectID, t.Name); other != nil {
			return store.Run{}, fmt.Errorf("%w: run %s is active (ID %d, %s) in project %s: stop it first (berth stop %s), or apply again to replace it",
				ErrConflict, t.Name, other.rec.ID, other.rec.Status, in.Project, t.Name)
		}
	}
	s.nextRun++
	id := s.nextRun
	name := t.Name
	if name == "" {
		name = runName(id)
	}
	rs.rec.ID, rs.rec.Name = id, name
	rs.held = in.Opts.Hold
	rs.setBegin(in.Opts.Begin)
	rs.saveMeta()
	if t.Schedule != nil {
		err := error(nil)
		if t.Array != "" {
			err = fmt.Errorf("%w: schedule: a scheduled array is not supported; schedule a run that submits the array", ErrInvalid)
		} else {
			err = s.newScheduleLocked(rs, now)
		}
		if err != nil {
			s.nextRun--
			return store.Run{}, err
		}
	}
	if t.Array != "" {
		if err := s.newArrayLocked(rs); err != nil {
			s.nextRun--
			return store.Run{}, err
		}
	}
	s.countActive(rs, 1)
	for rid, o := range in.Ended {
		if _, active := s.runs[rid]; !active {
			s.ended[rid] = o
		}
	}
	s.watchLocked(rs)
	b := &store.Batch{}
	if rs.array == nil && rs.r().sched == nil { // an array's tasks, a schedule's runs have the jobs
		s.newJobsLocked(rs, 0, now, b)
	}
	s.runs[id] = rs
	if rs.array != nil {
		s.arrays[id] = rs
		if t := rs.array.rec.Throttle; t > 0 {
			s.cycle.SetArrayLimit(strconv.FormatInt(id, 10), t)
			s.cycDirty = true
		}
	} else if rs.r().sched != nil {
		s.schedules[id] = rs
	} else {
		s.pending[id] = rs
		s.fresh[id] = rs
		rs.dropTask()
	}
	run := rs.rec
	b.Runs = append(b.Runs, &run)
	if in.Opts.Key != "" {
		s.rememberKey(key, id, now)
		b.Keys = append(b.Keys, &store.IdempotencyKey{UserID: in.UserID, Key: in.Opts.Key, RunID: id, Created: now})
	}
	s.emit(b, wakeEffect)
	return run, nil
}

// Resubmitted answers a submission whose idempotency key made run ID
// before: nothing new is made.
type Resubmitted struct{ ID int64 }

// userKey is a user's idempotency key, as a digest of the user and the
// key (a long burst of keyed submissions is remembered in little memory);
// keyedRun is the run it made, and when (Unix ns).
type (
	userKey  [16]byte
	keyedRun struct {
		run int64
		at  int64
	}
)

// keyOf is the digest of user's idempotency key (128 bits of SHA-256: no
// two keys of a server's memory share one).
func keyOf(user int64, key string) userKey {
	b := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(b, uint64(user))
	sum := sha256.Sum256(append(b, key...))
	return userKey(sum[:16])
}

// KeyMemory is how long an idempotency key is remembered, and
// keysMemoryCap how many at most (the oldest go first): a client retries
// within seconds, and a restart reads the keys of the last KeyMemory back
// (Loaded.Keys), so no submission reads the store.
const (
	KeyMemory     = 10 * time.Minute
	keysMemoryCap = 200_000
)

// rememberKey records that a submission with key made run at.
func (s *Cluster) rememberKey(key userKey, run int64, at time.Time) {
	if s.keys == nil {
		s.keys = map[userKey]keyedRun{}
	}
	if _, ok := s.keys[key]; ok {
		return
	}
	s.keys[key] = keyedRun{run: run, at: at.UnixNano()}
	s.keyOrder = append(s.keyOrder, key)
	for len(s.keyOrder) > keysMemoryCap {
		s.forgetOldestKey()
	}
}

// forgetOldestKey forgets the key remembered first.
func (s *Cluster) forgetOldestKey() {
	delete(s.keys, s.keyOrder[0])
	s.keyOrder[0] = userKey{}
	s.keyOrder = s.keyOrder[1:]
}

// forgetKeysLocked forgets the keys older than KeyMemory.
func (s *Cluster) forgetKeysLocked(now time.Time) {
	for len(s.keyOrder) > 0 && now.Sub(time.Unix(0, s.keys[s.keyOrder[0]].at)) > KeyMemory {
		s.forgetOldestKey()
	}
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

// onStop asks a run's jobs to end (an array's, a schedule's: every live
// run's, and no more); jobs not placed yet end at once.
func (s *Cluster) onStop(now time.Time, in StopInput) {
	cause := lifecycle.StopUser
	if in.Abort {
		cause = lifecycle.StopAbort
	}
	if in.Cause != lifecycle.StopNone {
		cause = in.Cause
	}
	id := in.ID
	rs, ok := s.runs[id]
	if !ok {
		return // already final
	}
	b := &store.Batch{}
	var after []Effect
	if rs.r().sched != nil {
		s.stopScheduleLocked(rs, now, b)
	} else if rs.array != nil {
		// An array: no more tasks, and every live one stops.
		b.Events = append(b.Events, &store.Event{RunID: id, Time: now, Type: "stop", Message: "array stopped"})
		for _, tid := range s.stopArrayLocked(rs) {
			after = append(after, s.stopLocked(s.runs[tid], cause, now, b)...)
		}
		s.arrayFinishedLocked(rs, now)
		b.Runs = append(b.Runs, runCopy(rs))
	} else {
		after = s.stopLocked(rs, cause, now, b)
	}
	s.emit(b, append(after, s.notify(id), wakeEffect)...)
}

// stopLocked asks one run's jobs to end for cause (user, abort, requeue),
// recording it in b; it returns what to send once b is committed.
func (s *Cluster) stopLocked(rs *runState, cause lifecycle.StopCause, now time.Time, b *store.Batch) []Effect {
	after := s.stepLocked(rs, lifecycle.Event{Kind: lifecycle.StopRequested, Cause: cause}, now, b)
	return append(after, s.notify(rs.rec.ID))
}

// terminateJobLocked marks a placed job terminating, in b, and adds to after
// the message asking its agent to stop it (none while its node is away: the
// resync on reconnection carries the stop).
func (s *Cluster) terminateJobLocked(js *jobState, abort bool, now time.Time, b *store.Batch, after []Effect) []Effect {
	js.rec.Status = string(api.StatusTerminating)
	b.Jobs = append(b.Jobs, jobCopy(js))
	ns, ok := s.nodes[js.rec.Node]
	if !ok || !ns.online {
		return after
	}
	js.stopSent, js.abort = now, abort
	id := js.rec.ID
	return append(after, sendEffect(ns, api.AgentMessage{Type: "stop", Stop: &api.StopJob{JobID: id, Abort: abort}}))
}

// finishJob makes a job final, releases what it held and records it in b.
func (s *Cluster) finishJob(js *jobState, status lifecycle.Status, reason lifecycle.Reason, code *int, now time.Time, b *store.Batch) {
	js.rec.Status, js.rec.Reason, js.rec.ExitCode = string(status), string(reason), code
	js.rec.FinishedAt = now
	if !js.rec.StartedAt.IsZero() {
		u := s.jobUsage(js, now)
		js.rec.Usage, _ = json.Marshal(u)
		s.chargeUsage(sched.Account{Project: js.run.project, User: js.run.user}, u.Billing*u.Seconds, now)
	}
	if ns, ok := s.nodes[js.rec.Node]; ok {
		ns.release(js)
		s.freed = true
	}
	delete(s.jobs, js.rec.ID)
	b.Jobs = append(b.Jobs, jobCopy(js))
	msg := string(status)
	if reason != "" {
		msg += " (" + string(reason) + ")"
	}
	if code != nil {
		msg += " exit code " + strconv.Itoa(*code)
	}
	b.Events = append(b.Events, &store.Event{RunID: js.rec.RunID, JobID: js.rec.ID, Time: now, Type: "job_finished", Message: msg})
}

// finalRun drops a run that lifecycle made final from memory, with what
// waited on its end.
func (s *Cluster) finalRun(rs *runState, now time.Time) {
	rs.rec.FinishedAt = now
	delete(s.runs, rs.rec.ID)
	delete(s.pending, rs.rec.ID)
	delete(s.fresh, rs.rec.ID)
	s.unqueueLocked(rs, false)
	s.countActive(rs, -1)
	s.changedLocked(rs.rec.ID, rs.rec.ArrayID)
	s.endedLocked(rs)
	s.finished = append(s.finished, RunEnd{rs.rec.ID, now})
}

// Report answers a ReportInput: what the cluster now holds (the agent's
// acknowledgement) and the events it refused.
type Report struct {
	Ack     *api.AgentAck
	Refused []Refused
}

// Refused is an agent's event the cluster did not take, and why: a job
// the node does not hold (ErrForbidden), a log frame whose size does not
// match its data or which starts past the end of the job's log
// (ErrInvalid). A frame that starts before the end is a resend, dropped
// without a word. The rest of the report is taken: the acknowledgement
// tells an honest agent where it stands.
type Refused struct {
	Event api.AgentEvent
	Err   error
}

// onReport applies a node's reports and answers what the Cluster now holds.
func (s *Cluster) onReport(now time.Time, in ReportInput) Report {
	node, evs := in.Node, in.Events
	ack := &api.AgentAck{LogSize: map[int64]int64{}}
	var refused []Refused
	b := &store.Batch{}
	touched := map[int64]*jobState{}
	runs := map[int64]*runState{}
	finished := false
	var extra []Effect // messages to agents once committed
	for _, ev := range evs {
		js, ok := s.jobs[ev.JobID]
		if !ok {
			// A job the cluster has closed (or never placed): the agent
			// may forget it.
			if ev.Type == "exited" {
				ack.Closed = append(ack.Closed, ev.JobID)
			}
			continue
		}
		if js.rec.Node != node {
			ev.Data = nil
			refused = append(refused, Refused{ev, fmt.Errorf("%w: job %d runs on node %s, not %s", ErrForbidden, ev.JobID, js.rec.Node, node)})
			continue
		}
		touched[js.rec.ID] = js
		switch ev.Type {
		case "started":
			if st := api.Status(js.rec.Status); st == api.StatusProvisioning || st == api.StatusPulling {
				js.rec.StartedAt = ev.Time
				if js.run.rec.StartedAt.IsZero() {
					js.run.rec.StartedAt = ev.Time                     // its expected end counts from now (stepLocked tells the Cycle)
					s.changedLocked(js.run.rec.ID, js.run.rec.ArrayID) // for `after` dependencies
				}
				extra = append(extra, s.stepLocked(js.run, lifecycle.Event{Kind: lifecycle.Started, Job: js.rec.Num, Time: ev.Time}, now, b)...)
				extra = append(extra, s.releaseHeldLocked(js.run)...)
				runs[js.rec.RunID] = js.run
			}
		case "log":
			if want := api.LogFrameHeader + int64(len(ev.Data)) + ev.Masked; ev.Size != want || ev.Offset > js.rec.LogSize {
				why := fmt.Errorf("%w: job %d: a log frame of size %d at offset %d (its data makes it %d; the log holds %d)",
					ErrInvalid, ev.JobID, ev.Size, ev.Offset, want, js.rec.LogSize)
				ev.Data = nil
				refused = append(refused, Refused{ev, why})
				continue
			}
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
			js.rec.MaxRSS = max(ev.MaxRSS, in.Peaks[js.rec.ID])
			delete(touched, js.rec.ID)
			exit := lifecycle.Exit{Reason: ev.Reason, Code: ev.ExitCode, OOMKilled: ev.OOMKilled, Message: ev.Message}
			extra = append(extra, s.stepLocked(js.run, lifecycle.Event{Kind: lifecycle.Exited, Job: js.rec.Num, Exit: exit, Time: ev.Time}, now, b)...)
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
	after := extra
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
		after = append(after, wakeEffect)
	}
	s.emit(b, after...)
	return Report{Ack: ack, Refused: refused}
}

// notify is the effect that wakes the run's log followers.
func (s *Cluster) notify(runID int64) Effect { return Effect{Kind: EffectNotify, Run: runID} }

// reasonFlush bounds how long a changed pending reason stays unwritten.
// Reasons are derived (the next pass recomputes them), so they need not be
// durable at once: writing them with the next placement, or within this,
// spares a transaction per submission.
const reasonFlush = time.Second

// flushReasonsLocked writes the changed pending reasons into b when b
// carries other changes anyway or when they are due.
func (s *Cluster) flushReasonsLocked(b *store.Batch, now time.Time) {
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

func (s *Cluster) schedNode(ns *nodeState) sched.Node {
	// A drained node is offline to the scheduler: no new jobs (nodes.go).
	n := sched.Node{Name: ns.info.Name, Fleet: ns.info.Fleet, Online: ns.online && !ns.condition().drained(), CPUs: ns.info.CPUs, Memory: sched.Bytes(ns.info.Memory),
		FreeCPUs: ns.info.CPUs - ns.usedCPU, FreeMemory: sched.Bytes(ns.info.Memory - ns.usedMem), Blocks: s.blocksOf(ns),
		Containers: ns.info.CanRunContainers(), Features: withEngine(withMounts(nodeFeatures(ns.info), ns.info.Mounts), ns.info.EngineID), // runtime.go, volumes.go
		Project: s.ownerOf(ns)} // owners.go
	for _, g := range ns.info.GPUs {
		n.GPUs = append(n.GPUs, sched.GPU{Index: g.Index, Vendor: g.Vendor, Name: g.Name, Memory: sched.Bytes(g.Memory)})
		if _, used := ns.usedGPU[g.Index]; !used {
			n.FreeGPUs = append(n.FreeGPUs, g.Index)
		}
	}
	return n
}

// countActive adds d to the active-run counts of rs's limit keys.
func (s *Cluster) countActive(rs *runState, d int) {
	if len(s.rules.Load().Submit) == 0 {
		return
	}
	for _, k := range rs.keys() {
		if s.active[k] += d; s.active[k] <= 0 {
			delete(s.active, k)
		}
	}
}

// submitLimitLocked refuses a run that would exceed a submit limit, with
// Slurm's names for the limit.
func (s *Cluster) submitLimitLocked(rs *runState) error {
	rules := s.rules.Load()
	for _, k := range rs.keys() {
		max, ok := sched.LimitOf(rules.Submit, k)
		if !ok || s.active[k] < max {
			continue
		}
		what := map[sched.Scope]string{sched.ScopeUser: "AssocMaxSubmitJobLimit: user " + rs.user,
			sched.ScopeProject: "AssocGrpSubmitJobsLimit: project " + rs.project, sched.ScopeQOS: "QOSGrpSubmitJobsLimit: QOS " + rs.r().qos,
			sched.ScopeQOSUser:     "QOSMaxSubmitJobPerUserLimit: QOS " + rs.r().qos + " for user " + rs.user,
			sched.ScopeProjectUser: "AssocMaxSubmitJobLimit: user " + rs.user + " in project " + rs.project}[k.Scope]
		return fmt.Errorf("%w: %s already has %d active runs, the most it may have (Slurm: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits))", ErrInvalid, what, s.active[k])
	}
	return nil
}

// requeueLocked puts a run whose jobs have all ended back in the queue, as
// a new attempt with fresh jobs (lifecycle decided it and set its status):
// it keeps its name, ID, submit time and history.
func (s *Cluster) requeueLocked(rs *runState, attempt int, now time.Time, b *store.Batch) {
	rs.jobs = nil
	s.newJobsLocked(rs, attempt, now, b)
	rs.rec.StartedAt = time.Time{}
	if rs.rare != nil {
		rs.rare.placedAt, rs.rare.stopBy = 0, time.Time{}
	}
	rs.dropTask()
	s.pending[rs.rec.ID] = rs
	s.fresh[rs.rec.ID] = rs
}

// preemptLocked stops the plan's victims: their jobs get the stop signal and
// grace period of a user's stop; the run's stop cause says what follows.
func (s *Cluster) preemptLocked(p sched.Preemption, now time.Time, b *store.Batch) []Effect {
	rs, ok := s.runs[p.Victim]
	if !ok || lifecycle.StopCause(rs.rec.StopReq) != lifecycle.StopNone {
		return nil
	}
	cause := lifecycle.StopPreemptRequeue
	if p.Mode == sched.Cancel {
		cause = lifecycle.StopPreemptCancel
	}
	after := s.stepLocked(rs, lifecycle.Event{Kind: lifecycle.Preempted, Cause: cause, By: p.By}, now, b)
	return append(after, s.notify(rs.rec.ID))
}

// arrayKey names the array a task belongs to, for the throttle's limit.
func arrayKey(rs *runState) string {
	if rs.rec.ArrayID == 0 {
		return ""
	}
	if p := rs.parent; p != nil && p.rec.ID == rs.rec.ArrayID && p.array != nil {
		if p.array.key == "" {
			p.array.key = strconv.FormatInt(p.rec.ID, 10)
		}
		return p.array.key // one string for all its tasks
	}
	return strconv.FormatInt(rs.rec.ArrayID, 10)
}

// parentRunningLocked marks a task's array running once one of its tasks is.
func (s *Cluster) parentRunningLocked(rs *runState, b *store.Batch) {
	p := rs.parent
	if p == nil || p.rec.Status == string(api.StatusRunning) {
		return
	}
	p.rec.Status = string(api.StatusRunning)
	if p.rec.StartedAt.IsZero() {
		p.rec.StartedAt = rs.rec.StartedAt
	}
	b.Runs = append(b.Runs, runCopy(p))
}

// groupOf is the group job number k of t belongs to (0 without groups).
func groupOf(t *spec.Task, k int) int {
	for i, g := range t.Groups {
		if k < max(g.Nodes, 1) {
			return i
		}
		k -= max(g.Nodes, 1)
	}
	return 0
}

// newJobsLocked gives rs a fresh job per node, of the given attempt,
// waiting. Their memory is made when the run is placed or a decision needs
// them (jobsLocked), so that a long queue costs little memory; their rows
// are written then too, except a later attempt's, written now (b): a
// submission on 10,000 nodes writes no job row, and a run that waits with
// none after a restart (Restore) is one never placed, attempt 0.
func (s *Cluster) newJobsLocked(rs *runState, attempt int, now time.Time, b *store.Batch) {
	n := rs.task().JobCount()
	rs.jobs = nil
	rs.unmade = unmadeJobs{first: s.nextJob + 1, n: int32(n), attempt: int32(attempt), at: now.UnixNano()}
	s.nextJob += int64(n)
	if attempt == 0 {
		return
	}
	for k := range n {
		r := rs.unmade.record(rs.rec.ID, k)
		b.Jobs = append(b.Jobs, &r)
	}
}

// unmadeJobs are a waiting run's jobs while only their rows exist: n jobs
// with consecutive IDs from first, of one attempt, made at (Unix ns).
type unmadeJobs struct {
	first      int64
	n, attempt int32
	at         int64
}

// record is job k's row as written.
func (u unmadeJobs) record(run int64, k int) store.Job {
	return store.Job{ID: u.first + int64(k), RunID: run, Num: k, Attempt: int(u.attempt), Status: string(api.StatusSubmitted),
		SubmittedAt: time.Unix(0, u.at).UTC(), Alloc: []byte("{}")}
}

// jobsLocked are rs's jobs, made first if only their rows exist.
func (s *Cluster) jobsLocked(rs *runState) []*jobState {
	if rs.unmade.n == 0 {
		return rs.jobs
	}
	rs.jobs = make([]*jobState, rs.unmade.n)
	for k := range rs.jobs {
		js := &jobState{run: rs, rec: rs.unmade.record(rs.rec.ID, k)}
		rs.jobs[k] = js
		s.jobs[js.rec.ID] = js
	}
	rs.unmade = unmadeJobs{}
	return rs.jobs
}

// unmakeJobsLocked lets a waiting run whose jobs all wait, with
// consecutive IDs, keep only their rows (after a restart).
func (s *Cluster) unmakeJobsLocked(rs *runState) {
	if len(rs.jobs) == 0 {
		return
	}
	first := rs.jobs[0].rec
	for k, js := range rs.jobs {
		if js.rec.ID != first.ID+int64(k) || js.rec.Num != k || js.rec.Attempt != first.Attempt || api.Status(js.rec.Status) != api.StatusSubmitted ||
			js.rec.Node != "" || !js.rec.SubmittedAt.Equal(first.SubmittedAt) || js.rec.LogSize != 0 {
			return
		}
	}
	for _, js := range rs.jobs {
		delete(s.jobs, js.rec.ID)
	}
	rs.unmade = unmadeJobs{first: first.ID, n: int32(len(rs.jobs)), attempt: int32(first.Attempt), at: first.SubmittedAt.UnixNano()}
	rs.jobs = nil
}

// queueRunLocked puts a new run (an array's task, a schedule's tick) in
// the queue with its jobs, recording both in b.
func (s *Cluster) queueRunLocked(rs *runState, now time.Time, b *store.Batch) {
	s.newJobsLocked(rs, 0, now, b)
	rs.dropTask()
	s.runs[rs.rec.ID] = rs
	s.pending[rs.rec.ID] = rs
	s.fresh[rs.rec.ID] = rs
	s.countActive(rs, 1)
	s.watchLocked(rs)
	b.Runs = append(b.Runs, runCopy(rs))
}
