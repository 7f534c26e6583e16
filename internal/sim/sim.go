package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/sched"
)

// Policies are the policy names the simulator takes, in the order a full
// comparison prints them.
var Policies = []string{"fcfs", "easy", "conservative", "berth"}

// ErrPolicy is returned for a policy name the simulator does not know.
var ErrPolicy = errors.New("sim: unknown policy")

// PolicyByName maps a policy name to sched's policy. "berth" is Berth's own
// policy, sched.Berth, as the server runs it by default: the queue ordered by
// multifactor priority with the default weights (age, fairshare from the
// replayed usage, job size, expansion factor) plus Berth's aging, a
// reservation for each of the first 16 runs that cannot start.
func PolicyByName(name string) (sched.Policy, error) {
	p, err := sched.ParsePolicy(name)
	if err != nil {
		return 0, fmt.Errorf("%w %q (want %s)", ErrPolicy, name, strings.Join(Policies, ", "))
	}
	return p, nil
}

// Scheduler is the one function the simulator needs of a scheduler.
type Scheduler func(sched.Snapshot, time.Time) sched.Plan

// Config is the machine and the policy to replay a workload on.
type Config struct {
	Procs  int // processors of the one pool, P
	Policy sched.Policy
	// Schedule decides each pass over the Cycle's snapshot; nil: the
	// Cycle's own pass (sched.Schedule's decisions).
	Schedule Scheduler
	// Weights order the queue by multifactor priority (nil: submit order).
	Weights *sched.Weights
}

// epoch is the instant the virtual clock starts from: a job submitted at
// offset d is submitted at epoch.Add(d).
var epoch = time.Unix(0, 0).UTC()

// PoolNode is the name of the one node that models the machine.
const PoolNode = "pool"

// Outcome is one job as it was replayed.
type Outcome struct {
	Job   Job
	Start time.Duration // on the virtual clock
}

// Wait is how long the job waited: start - submit.
func (o Outcome) Wait() time.Duration { return o.Start - o.Job.Submit }

// End is when the job ended: start + run.
func (o Outcome) End() time.Duration { return o.Start + o.Job.Run }

// Result is a replay: every job's outcome in arrival order, and how many
// scheduling passes it took.
type Result struct {
	Procs    int
	Outcomes []Outcome
	Passes   int // Schedule calls
	Events   int // distinct event times
}

// Errors of a replay. A job error means bad input; a scheduler error means
// the plan broke an invariant of the machine, which is a bug in the policy.
var (
	ErrJob       = errors.New("sim: job cannot be replayed")
	ErrScheduler = errors.New("sim: scheduler broke an invariant")
)

// Run replays jobs on cfg's machine and returns when each started. The jobs
// must be replayable on it (see Keep), with unique IDs and Run <= Estimate;
// they need not be sorted.
//
// The machine, the queue, the running jobs and the users' fairshare usage
// live in a sched.Cycle, the server's own scheduling cycle. The loop, per
// distinct event time t (the next submit or the next actual end,
// whichever is sooner):
//  1. every job ending at t gives its processors back (Cycle.End) and, when
//     the queue is ordered by multifactor priority, adds its
//     processor-seconds to its user's usage (Cycle.AddUsage);
//  2. every job submitted at t joins the queue (Cycle.Queue);
//  3. one pass (Cycle.Pass, or cfg.Schedule over the Cycle's snapshot)
//     sees the pool, the running jobs (expected to end at start +
//     estimate) and every waiting job, and its starts are applied at t
//     (Cycle.Start), each ending for real at t + run.
//
// Step 3 is skipped when nothing waits or no processor is free, since no
// plan could start anything then.
func Run(jobs []Job, cfg Config) (Result, error) {
	if cfg.Procs <= 0 {
		return Result{}, fmt.Errorf("%w: the machine has %d processors", ErrJob, cfg.Procs)
	}
	if cfg.Policy == sched.Berth && cfg.Weights == nil {
		w := sched.DefaultWeights // Berth's policy is the server's default, all factors
		cfg.Weights = &w
	}
	out := make([]Outcome, len(jobs))
	for i, j := range jobs {
		out[i] = Outcome{Job: j, Start: -1}
	}
	sortOutcomes(out)
	index := make(map[int64]int, len(out)) // job ID -> index in out
	// Every job ends by the last submit plus all run times (one after the
	// other) and is expected to by that plus the longest estimate: the
	// virtual clock must hold that.
	var horizon, longest time.Duration
	for i := range out {
		j := &out[i].Job
		if err := replayable(j, cfg.Procs); err != nil {
			return Result{}, err
		}
		if _, dup := index[j.ID]; dup {
			return Result{}, fmt.Errorf("%w: job %d appears twice", ErrJob, j.ID)
		}
		index[j.ID] = i
		horizon = addCapped(horizon, j.Run)
		longest = max(longest, j.Estimate)
	}
	if len(out) > 0 {
		horizon = addCapped(addCapped(horizon, out[len(out)-1].Job.Submit), longest)
	}
	if horizon == maxDuration {
		return Result{}, fmt.Errorf("%w: submit, run and estimate times add up beyond the virtual clock's %v", ErrJob, maxDuration)
	}

	res := Result{Procs: cfg.Procs, Outcomes: out}
	// The machine, the queue, the running jobs and the users' usage are
	// the scheduler's Cycle, as the server's are: the loop only feeds it
	// what happens and applies its plans.
	// It plans starts only: nothing here reads a reason.
	c := sched.NewCycle(sched.CycleConfig{Policy: cfg.Policy, Weights: cfg.Weights, HalfLife: usageHalfLife, StartsOnly: true})
	c.SetNode(sched.Node{Name: PoolNode, Online: true, CPUs: cfg.Procs})
	var (
		free    = cfg.Procs // kept here too: the simulator does not trust the plans
		next    = 0         // next arrival, index into out
		ends    endHeap
		started = make([]bool, len(out))
	)
	for next < len(out) || len(ends) > 0 {
		// The next event time: the sooner of the next arrival and the
		// next actual end.
		var now time.Duration
		switch {
		case len(ends) == 0:
			now = out[next].Job.Submit
		case next == len(out):
			now = ends[0].at
		default:
			now = min(out[next].Job.Submit, ends[0].at)
		}
		at := epoch.Add(now)
		res.Events++

		// 1. Completions, each adding its processor-seconds to its user's
		// fairshare usage when the queue is ordered by it.
		for len(ends) > 0 && ends[0].at == now {
			e := heap.Pop(&ends).(end)
			j := &out[e.idx].Job
			free += j.Procs
			c.End(j.ID)
			if cfg.Weights != nil {
				c.AddUsage(sched.Account{User: j.User}, float64(j.Procs)*j.Run.Seconds(), at)
			}
		}
		// 2. Arrivals.
		for next < len(out) && out[next].Job.Submit == now {
			j := &out[next].Job
			c.Queue(sched.Pending{
				RunID:       j.ID,
				SubmittedAt: epoch.Add(j.Submit),
				Nodes:       1,
				JobIDs:      []int64{j.ID},
				Request:     &sched.Request{CPUs: j.Procs},
				Limit:       j.Estimate,
				User:        j.User,
			})
			next++
		}
		// 3. One pass of the policy.
		if c.Waiting() == 0 || free == 0 {
			continue
		}
		var plan sched.Plan
		if cfg.Schedule != nil {
			plan = cfg.Schedule(c.Snapshot(at), at)
		} else {
			plan = c.Pass(at)
		}
		res.Passes++
		for _, st := range plan.Starts {
			i, ok := index[st.RunID]
			if !ok || started[i] || out[i].Job.Submit > now {
				return res, fmt.Errorf("%w: at t=%v it starts run %d, which is not pending", ErrScheduler, now, st.RunID)
			}
			j := &out[i].Job
			if len(st.Placements) != 1 || st.Placements[0].Node != PoolNode || st.Placements[0].CPUs != j.Procs {
				return res, fmt.Errorf("%w: at t=%v it places run %d (%d processors) as %+v", ErrScheduler, now, j.ID, j.Procs, st.Placements)
			}
			free -= j.Procs
			if free < 0 {
				return res, fmt.Errorf("%w: at t=%v starting run %d takes %d processors more than the %d of the machine", ErrScheduler, now, j.ID, -free, cfg.Procs)
			}
			started[i] = true
			out[i].Start = now
			heap.Push(&ends, end{at: now + j.Run, idx: i})
			// Planned to hold its processors for its estimate.
			if err := c.Start(st, at); err != nil {
				return res, fmt.Errorf("%w: %v", ErrScheduler, err)
			}
		}
	}
	if n := c.Waiting(); n > 0 {
		first := int64(0)
		for _, o := range out {
			if o.Start < 0 {
				first = o.Job.ID
				break
			}
		}
		return res, fmt.Errorf("%w: %d jobs never started (first: %d) on an idle machine", ErrScheduler, n, first)
	}
	return res, nil
}

func replayable(j *Job, procs int) error {
	switch {
	case j.Run <= 0:
		return fmt.Errorf("%w: job %d: run time %v (want > 0)", ErrJob, j.ID, j.Run)
	case j.Procs <= 0 || j.Procs > procs:
		return fmt.Errorf("%w: job %d: %d processors (want 1 to %d)", ErrJob, j.ID, j.Procs, procs)
	case j.Estimate < j.Run:
		return fmt.Errorf("%w: job %d: estimate %v is below its run time %v", ErrJob, j.ID, j.Estimate, j.Run)
	}
	return nil
}

const maxDuration = time.Duration(1<<63 - 1)

func addCapped(a, b time.Duration) time.Duration {
	if b > maxDuration-a {
		return maxDuration
	}
	return a + b
}

func sortOutcomes(out []Outcome) {
	slices.SortStableFunc(out, func(a, b Outcome) int { return byArrival(a.Job, b.Job) })
}

// end is a started job's actual completion.
type end struct {
	at  time.Duration
	idx int
}

// endHeap is a min-heap of completions by time.
type endHeap []end

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(end)) }
func (h *endHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// usageHalfLife is the server's default fairshare half-life.
const usageHalfLife = 7 * 24 * time.Hour
