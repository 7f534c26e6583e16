package sim

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/sched"
)

// A Workload is a replay richer than a trace: runs of several nodes on a
// cluster of nodes, arrays with a throttle, dependencies, retries after a
// failure, and QOS that preempt one another (the preempted run requeued or
// cancelled), replayed through a sched.Cycle as the server would see them.
// ParseWorkload reads one from JSON; times are whole seconds from the
// workload's start.
type Workload struct {
	Nodes []WorkloadNodes        `json:"nodes"`
	QOS   map[string]WorkloadQOS `json:"qos,omitempty"`
	Runs  []WorkloadRun          `json:"runs"`
}

// WorkloadNodes are count nodes alike, named Name1..NameN (Name alone when
// count is 1).
type WorkloadNodes struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"` // 0: 1
	CPUs  int    `json:"cpus"`
}

// WorkloadQOS is a quality of service: its priority, the QOS whose runs it
// may preempt, and what becomes of its own runs when they are preempted
// (requeue, the default, or cancel), as Slurm's PreemptMode.
type WorkloadQOS struct {
	Priority int      `json:"priority,omitempty"`
	Preempt  []string `json:"preempt,omitempty"`
	Mode     string   `json:"mode,omitempty"`
}

// WorkloadRun is one submission: a run of Nodes jobs of CPUs each, or an
// array of Array such runs.
type WorkloadRun struct {
	ID     int64  `json:"id"`
	User   string `json:"user,omitempty"`
	QOS    string `json:"qos,omitempty"`
	Submit int64  `json:"submit"`
	// Run is how long each attempt runs; Limit its time limit, all the
	// scheduler knows (0: Run).
	Run   int64 `json:"run"`
	Limit int64 `json:"limit,omitempty"`
	CPUs  int   `json:"cpus"`
	Nodes int   `json:"nodes,omitempty"` // 0: 1
	// Array makes it that many tasks, at most Throttle of them running at
	// once (0: no throttle).
	Array    int `json:"array,omitempty"`
	Throttle int `json:"throttle,omitempty"`
	// After are the runs that must all end done before it may start
	// (Slurm's afterok); one that fails for good cancels it.
	After []int64 `json:"after,omitempty"`
	// Fail: its first Fail attempts fail at their end; each failure is
	// retried (requeued) while fewer than Retries retries were made.
	Fail    int `json:"fail,omitempty"`
	Retries int `json:"retries,omitempty"`
}

// ErrWorkload is a workload that cannot be replayed.
var ErrWorkload = errors.New("sim: bad workload")

// ParseWorkload reads a workload from JSON and checks it: every field
// known, nodes and runs that make sense, dependencies and QOS that exist.
func ParseWorkload(data []byte) (*Workload, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w Workload
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkload, err)
	}
	if len(w.Nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes (want \"nodes\": [{\"name\": \"n\", \"count\": 4, \"cpus\": 8}])", ErrWorkload)
	}
	names := map[string]bool{}
	for i, n := range w.Nodes {
		if n.Name == "" || n.CPUs <= 0 || n.Count < 0 {
			return nil, fmt.Errorf("%w: nodes[%d]: want a name, cpus > 0 and count >= 0", ErrWorkload, i)
		}
		if names[n.Name] {
			return nil, fmt.Errorf("%w: nodes[%d]: name %q twice", ErrWorkload, i, n.Name)
		}
		names[n.Name] = true
	}
	for name, q := range w.QOS {
		if q.Mode != "" && q.Mode != "requeue" && q.Mode != "cancel" {
			return nil, fmt.Errorf("%w: qos %q: mode %q (want requeue or cancel)", ErrWorkload, name, q.Mode)
		}
		for _, p := range q.Preempt {
			if _, ok := w.QOS[p]; !ok {
				return nil, fmt.Errorf("%w: qos %q preempts unknown qos %q", ErrWorkload, name, p)
			}
		}
	}
	ids := map[int64]bool{}
	for i, r := range w.Runs {
		switch {
		case ids[r.ID]:
			return nil, fmt.Errorf("%w: runs[%d]: id %d twice", ErrWorkload, i, r.ID)
		case r.ID <= 0 || r.Submit < 0 || r.Run <= 0 || r.CPUs <= 0 || r.Nodes < 0 || r.Array < 0 || r.Throttle < 0 || r.Fail < 0 || r.Retries < 0:
			return nil, fmt.Errorf("%w: runs[%d]: want id > 0, submit >= 0, run > 0, cpus > 0 and no negative count", ErrWorkload, i)
		case r.Limit != 0 && r.Limit < r.Run:
			return nil, fmt.Errorf("%w: runs[%d]: limit %d is below run %d", ErrWorkload, i, r.Limit, r.Run)
		case r.Run > math.MaxInt32 || r.Submit > math.MaxInt32 || r.Limit > math.MaxInt32:
			return nil, fmt.Errorf("%w: runs[%d]: times beyond 2^31 s", ErrWorkload, i)
		}
		if _, ok := w.QOS[r.QOS]; r.QOS != "" && !ok {
			return nil, fmt.Errorf("%w: runs[%d]: unknown qos %q", ErrWorkload, i, r.QOS)
		}
		ids[r.ID] = true
	}
	for i, r := range w.Runs {
		for _, a := range r.After {
			if !ids[a] || a == r.ID {
				return nil, fmt.Errorf("%w: runs[%d]: after %d: no such other run", ErrWorkload, i, a)
			}
		}
	}
	return &w, nil
}

// WorkloadOutcome is one run (or array task) as it was replayed. Times are
// on the virtual clock; Start is its first attempt's (-1: never started).
type WorkloadOutcome struct {
	ID        int64 // the workload run's
	Task      int   // the array index; -1: not an array
	Submit    time.Duration
	Start     time.Duration
	End       time.Duration // when it became final
	Attempts  int
	Preempted int
	// State is done, failed (its retries spent), cancelled (a run it
	// depends on did not end done) or preempted (by a QOS that cancels).
	State string
}

// WorkloadResult is a workload's replay.
type WorkloadResult struct {
	CPUs     int // the cluster's
	Outcomes []WorkloadOutcome
	Passes   int
	Busy     float64 // CPU-seconds used, every attempt counted
}

// instance is one run or array task in a replay.
type instance struct {
	wr       *WorkloadRun
	out      WorkloadOutcome
	id       int64 // its run ID in the Cycle
	deps     int   // runs of After not done yet
	queued   bool  // submitted (its submit time has come)
	final    bool
	gen      int // counts its attempts' ends: an end of an earlier one is stale
	started  time.Duration
	retried  int
	attempts int
}

// ReplayWorkload replays w under policy: at each event time (submissions,
// ends), ends first, then submissions, then passes of the Cycle until one
// preempts no one (a preempted run gives its nodes back at once and is
// requeued, keeping its submit time, or cancelled).
//
// Runs are ordered by multifactor priority with the default weights under
// every policy, as the server orders them (the policy decides what waiting
// runs do): a preempting run must rank above its victims, or the requeued
// victim would start again ahead of it.
func ReplayWorkload(w *Workload, policy sched.Policy) (WorkloadResult, error) {
	wt := sched.DefaultWeights
	cfg := sched.CycleConfig{Policy: policy, Weights: &wt, HalfLife: usageHalfLife, StartsOnly: true}
	if len(w.QOS) > 0 {
		cfg.QOS = map[string]sched.QOS{}
		for name, q := range w.QOS {
			mode := sched.Requeue
			if q.Mode == "cancel" {
				mode = sched.Cancel
			}
			cfg.QOS[name] = sched.QOS{Priority: q.Priority, Preempt: q.Preempt, Mode: mode}
		}
	}
	c := sched.NewCycle(cfg)
	res := WorkloadResult{}
	for _, n := range w.Nodes {
		for k := range max(n.Count, 1) {
			name := n.Name
			if n.Count > 1 {
				name += strconv.Itoa(k + 1)
			}
			c.SetNode(sched.Node{Name: name, Online: true, CPUs: n.CPUs})
			res.CPUs += n.CPUs
		}
	}
	var all []*instance
	byRun := map[int64][]*instance{}
	for i := range w.Runs {
		r := &w.Runs[i]
		tasks := max(r.Array, 1)
		if r.Array > 0 && r.Throttle > 0 {
			c.SetArrayLimit(arrayKey(r.ID), r.Throttle)
		}
		for k := range tasks {
			in := &instance{wr: r, id: int64(len(all) + 1), deps: len(r.After),
				out: WorkloadOutcome{ID: r.ID, Task: -1, Submit: time.Duration(r.Submit) * time.Second, Start: -1}}
			if r.Array > 0 {
				in.out.Task = k
			}
			all = append(all, in)
			byRun[r.ID] = append(byRun[r.ID], in)
		}
	}
	dependents := map[int64][]*instance{}
	for _, in := range all {
		for _, a := range in.wr.After {
			dependents[a] = append(dependents[a], in)
		}
	}
	byID := make(map[int64]*instance, len(all))
	arrivals := slices.Clone(all)
	slices.SortStableFunc(arrivals, func(a, b *instance) int { return int(a.out.Submit - b.out.Submit) })
	for _, in := range all {
		byID[in.id] = in
	}
	pending := func(in *instance) sched.Pending {
		r := in.wr
		n := max(r.Nodes, 1)
		p := sched.Pending{RunID: in.id, SubmittedAt: epoch.Add(in.out.Submit), Nodes: n, Request: &sched.Request{CPUs: r.CPUs},
			Limit: time.Duration(max(r.Limit, r.Run)) * time.Second, User: r.User, Project: "", QOS: r.QOS}
		for k := range n {
			p.JobIDs = append(p.JobIDs, in.id*100+int64(k))
		}
		if r.Array > 0 {
			p.Array = arrayKey(r.ID)
		}
		if in.deps > 0 {
			p.Hold = "Dependency"
		}
		return p
	}
	var ends workloadEnds
	var now time.Duration
	// finish makes in final; when its workload run is all final, the runs
	// that depend on it are released (all done) or cancelled.
	var finish func(in *instance, state string)
	finish = func(in *instance, state string) {
		in.final, in.out.State, in.out.End, in.out.Attempts = true, state, now, in.attempts
		if in.queued {
			c.Dequeue(in.id)
		}
		done := true
		for _, t := range byRun[in.wr.ID] {
			if !t.final {
				return
			}
			done = done && t.out.State == "done"
		}
		for _, d := range dependents[in.wr.ID] {
			if d.final {
				continue
			}
			if !done {
				finish(d, "cancelled")
				continue
			}
			if d.deps--; d.deps == 0 && d.queued {
				c.Queue(pending(d)) // released
			}
		}
	}
	// stop ends the running attempt of in now (its end or a preemption).
	stop := func(in *instance) {
		c.End(in.id)
		used := float64(max(in.wr.Nodes, 1)*in.wr.CPUs) * (now - in.started).Seconds()
		res.Busy += used
		c.AddUsage(sched.Account{User: in.wr.User}, used, epoch.Add(now))
	}
	next := 0
	for next < len(arrivals) || len(ends) > 0 {
		switch {
		case len(ends) == 0:
			now = arrivals[next].out.Submit
		case next == len(arrivals):
			now = ends[0].at
		default:
			now = min(arrivals[next].out.Submit, ends[0].at)
		}
		at := epoch.Add(now)
		for len(ends) > 0 && ends[0].at == now {
			e := heap.Pop(&ends).(workloadEnd)
			in := e.in
			if e.gen != in.gen {
				continue // preempted before
			}
			stop(in)
			switch {
			case in.attempts > in.wr.Fail:
				in.queued = false
				finish(in, "done")
			case in.retried < in.wr.Retries:
				in.retried++
				c.Queue(pending(in))
			default:
				in.queued = false
				finish(in, "failed")
			}
		}
		for next < len(arrivals) && arrivals[next].out.Submit == now {
			in := arrivals[next]
			next++
			if in.final {
				continue // cancelled before it came
			}
			in.queued = true
			c.Queue(pending(in))
		}
		for range 8 { // a pass that preempts frees nodes: another follows at once
			if c.Waiting() == 0 {
				break
			}
			plan := c.Pass(at)
			res.Passes++
			if res.Passes > 1000+100*len(all) {
				return res, fmt.Errorf("%w: %d passes for %d runs: runs preempt each other in turn", ErrScheduler, res.Passes, len(all))
			}
			for _, st := range plan.Starts {
				in := byID[st.RunID]
				if in == nil || in.final {
					return res, fmt.Errorf("%w: at t=%v it starts run %d, which does not wait", ErrScheduler, now, st.RunID)
				}
				if err := c.Start(st, at); err != nil {
					return res, fmt.Errorf("%w: %v", ErrScheduler, err)
				}
				in.attempts++
				in.gen++
				in.started = now
				if in.out.Start < 0 {
					in.out.Start = now
				}
				heap.Push(&ends, workloadEnd{at: now + time.Duration(in.wr.Run)*time.Second, in: in, gen: in.gen})
			}
			for _, pr := range plan.Preemptions {
				in := byID[pr.Victim]
				in.gen++ // its end will not come
				in.out.Preempted++
				stop(in)
				if pr.Mode == sched.Cancel {
					in.queued = false
					finish(in, "preempted")
				} else {
					c.Queue(pending(in)) // requeued, its submit time kept
				}
			}
			if len(plan.Preemptions) == 0 {
				break
			}
		}
	}
	for _, in := range all {
		if !in.final {
			return res, fmt.Errorf("%w: run %d (task %d) never ended on an idle cluster", ErrScheduler, in.out.ID, in.out.Task)
		}
		res.Outcomes = append(res.Outcomes, in.out)
	}
	return res, nil
}

func arrayKey(id int64) string { return "array" + strconv.FormatInt(id, 10) }

// WorkloadReport is a workload replay's figures, as `berth sim --workload`
// prints them. Waits are to a run's first start; times in seconds.
type WorkloadReport struct {
	Policy      string  `json:"policy"`
	Runs        int     `json:"runs"`
	Done        int     `json:"done"`
	Failed      int     `json:"failed"`
	Cancelled   int     `json:"cancelled"`
	Preempted   int     `json:"preempted"` // preemptions, requeued or not
	Attempts    int     `json:"attempts"`
	AvgWait     float64 `json:"avg_wait"`
	P99Wait     float64 `json:"p99_wait"`
	MaxWait     float64 `json:"max_wait"`
	Makespan    float64 `json:"makespan"`
	Utilization float64 `json:"utilization"`
}

// Report sums a workload replay up.
func (r WorkloadResult) Report(policy string) WorkloadReport {
	rep := WorkloadReport{Policy: policy, Runs: len(r.Outcomes)}
	var waits []time.Duration
	var sum float64
	first, last := time.Duration(math.MaxInt64), time.Duration(0)
	for _, o := range r.Outcomes {
		switch o.State {
		case "done":
			rep.Done++
		case "failed":
			rep.Failed++
		case "cancelled":
			rep.Cancelled++
		}
		rep.Preempted += o.Preempted
		rep.Attempts += o.Attempts
		first, last = min(first, o.Submit), max(last, o.End)
		if o.Start >= 0 {
			waits = append(waits, o.Start-o.Submit)
			sum += (o.Start - o.Submit).Seconds()
		}
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		rep.AvgWait = sum / float64(len(waits))
		rep.P99Wait = NearestRank(waits, 99).Seconds()
		rep.MaxWait = waits[len(waits)-1].Seconds()
	}
	if last > first {
		rep.Makespan = (last - first).Seconds()
		rep.Utilization = r.Busy / (float64(r.CPUs) * rep.Makespan)
	}
	return rep
}

// workloadEnd is the end of one attempt.
type workloadEnd struct {
	at  time.Duration
	in  *instance
	gen int
}

type workloadEnds []workloadEnd

func (h workloadEnds) Len() int { return len(h) }
func (h workloadEnds) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].in.id < h[j].in.id
}
func (h workloadEnds) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *workloadEnds) Push(x any)   { *h = append(*h, x.(workloadEnd)) }
func (h *workloadEnds) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
