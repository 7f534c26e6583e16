package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-hq/berth/internal/sched"
)

// aJob is a fixture builder: job id submitted at t seconds on procs
// processors, running run seconds, estimate = run unless est says otherwise.
func aJob(id int64, t, procs, run int) Job {
	return Job{ID: id, Submit: time.Duration(t) * sec, Procs: procs, Run: time.Duration(run) * sec, Estimate: time.Duration(run) * sec}
}

func (j Job) est(s int) Job { j.Estimate = time.Duration(s) * sec; return j }

// schedulers are what every replay test runs against: the real scheduler and
// the textbook reference of reference_test.go.
var schedulers = map[string]Scheduler{"sched": sched.Schedule, "reference": refSchedule}

// waits replays jobs and returns each job's wait in seconds.
func waits(t *testing.T, jobs []Job, procs int, policy sched.Policy, s Scheduler) map[int64]int {
	t.Helper()
	res, err := Run(jobs, Config{Procs: procs, Policy: policy, Schedule: s})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for _, o := range res.Outcomes {
		got[o.Job.ID] = int(o.Wait() / sec)
	}
	return got
}

// The policies' semantics on traces small enough to work out by hand, on a
// machine of 4 processors. Each case gives every policy's expected waits;
// the comments derive them from the definitions.
func TestPoliciesByHand(t *testing.T) {
	tests := map[string]struct {
		jobs                     []Job
		fcfs, easy, conservative map[int64]int
	}{
		// j1 holds all 4 processors over [0,100), so nothing else can start
		// before 100 under any policy. At 100 j2 (the older) takes all 4
		// until 110; j3 starts at 110. EASY cannot backfill j3 earlier: no
		// processor is free before 100, and at 100 j2 comes first.
		"nothing starts while the machine is full": {
			jobs: []Job{aJob(1, 0, 4, 100), aJob(2, 1, 4, 10), aJob(3, 2, 1, 5)},
			fcfs: map[int64]int{1: 0, 2: 99, 3: 108}, easy: map[int64]int{1: 0, 2: 99, 3: 108}, conservative: map[int64]int{1: 0, 2: 99, 3: 108},
		},
		// j1 holds 2 of 4 over [0,100); j2 needs all 4: reservation at
		// 100. j3 (2 procs, 50 s) fits in the 2 free now and ends at 52,
		// before j2's reservation: EASY and conservative start it at 2.
		// FCFS keeps it behind j2: it starts when j2 ends, at 110.
		"EASY backfills a short job that FCFS makes wait": {
			jobs: []Job{aJob(1, 0, 2, 100), aJob(2, 1, 4, 10), aJob(3, 2, 2, 50)},
			fcfs: map[int64]int{1: 0, 2: 99, 3: 108}, easy: map[int64]int{1: 0, 2: 99, 3: 0}, conservative: map[int64]int{1: 0, 2: 99, 3: 0},
		},
		// j1 holds 3 of 4 over [0,100). j2 (3 procs) is reserved at 100,
		// leaving 1 processor spare then. j3 (4 procs, 10 s) cannot go
		// before j2 ends: conservative reserves [110,120) for it. j4 (1
		// proc, 200 s) fits now in the 1 free processor:
		// - EASY only protects j2: j4 uses the processor j2 leaves spare,
		//   so it starts at 3 and holds it until 203. j2 starts at 100, and
		//   j3 needs all 4: it waits for j4's end, starts at 203 (wait 201).
		// - conservative also protects j3, which j4 would delay (j4 would
		//   hold a processor over [110,120)): j4 waits for j3's end at 120.
		// - FCFS: j2 at 100, j3 at 110, j4 after j3 at 120.
		"conservative refuses a backfill EASY allows (it delays the second waiting job)": {
			jobs: []Job{aJob(1, 0, 3, 100), aJob(2, 1, 3, 10), aJob(3, 2, 4, 10), aJob(4, 3, 1, 200)},
			fcfs: map[int64]int{1: 0, 2: 99, 3: 108, 4: 117}, easy: map[int64]int{1: 0, 2: 99, 3: 201, 4: 0}, conservative: map[int64]int{1: 0, 2: 99, 3: 108, 4: 117},
		},
		// The scheduler plans with estimates, the job ends at its run time.
		// j1 (2 procs) is expected to run 100 s but ends at 50; j2 (4
		// procs) is reserved at 100, so j3 (2 procs, estimate 200) may not
		// backfill at 2 (it would end at 202, with no processor spare at
		// 100). At 50 j1 really ends: j2 starts at once (wait 49), and j3
		// after it at 60.
		"estimates plan, run times end": {
			jobs: []Job{aJob(1, 0, 2, 50).est(100), aJob(2, 1, 4, 10), aJob(3, 2, 2, 10).est(200)},
			fcfs: map[int64]int{1: 0, 2: 49, 3: 58}, easy: map[int64]int{1: 0, 2: 49, 3: 58}, conservative: map[int64]int{1: 0, 2: 49, 3: 58},
		},
		// The same with j3 estimated at 40 s: it is expected to end at 42,
		// before j2's reservation at 100, so EASY and conservative start it
		// at 2; FCFS does not.
		"a tighter estimate lets the job backfill": {
			jobs: []Job{aJob(1, 0, 2, 50).est(100), aJob(2, 1, 4, 10), aJob(3, 2, 2, 10).est(40)},
			fcfs: map[int64]int{1: 0, 2: 49, 3: 58}, easy: map[int64]int{1: 0, 2: 49, 3: 0}, conservative: map[int64]int{1: 0, 2: 49, 3: 0},
		},
		// A backfilled job that ends exactly at the reservation does not
		// delay it: j3 runs over [2,100), j2 starts at 100.
		"ending exactly at the reservation is allowed": {
			jobs: []Job{aJob(1, 0, 2, 100), aJob(2, 1, 4, 10), aJob(3, 2, 2, 98)},
			fcfs: map[int64]int{1: 0, 2: 99, 3: 108}, easy: map[int64]int{1: 0, 2: 99, 3: 0}, conservative: map[int64]int{1: 0, 2: 99, 3: 0},
		},
		// At t=10 j1 ends and j3 and j2 arrive (j3 listed first): all
		// three are applied before the one pass, and the tie is broken by
		// job number, so j2 (2 procs) starts at 10 and j3 (3 procs) must
		// wait for it, until 20. Scheduling each event on its own, in the
		// input's order, would have started j3 instead.
		"one pass per instant, after its completions and arrivals; ties by job number": {
			jobs: []Job{aJob(1, 0, 4, 10), aJob(3, 10, 3, 10), aJob(2, 10, 2, 10)},
			fcfs: map[int64]int{1: 0, 2: 0, 3: 10}, easy: map[int64]int{1: 0, 2: 0, 3: 10}, conservative: map[int64]int{1: 0, 2: 0, 3: 10},
		},
	}
	for name, tc := range tests {
		for sname, s := range schedulers {
			for policy, want := range map[sched.Policy]map[int64]int{sched.FCFS: tc.fcfs, sched.EASY: tc.easy, sched.Conservative: tc.conservative} {
				t.Run(fmt.Sprintf("%s/%s/%v", name, sname, policy), func(t *testing.T) {
					got := waits(t, tc.jobs, 4, policy, s)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("waits in seconds by job (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// The figures of two replays worked out by hand from the definitions.
func TestMetricsByHand(t *testing.T) {
	// "EASY backfills a short job that FCFS makes wait" above, P = 4:
	// runs 100, 10, 50 on 2, 4, 2 processors: area 200+40+100 = 340.
	jobs := []Job{aJob(1, 0, 2, 100), aJob(2, 1, 4, 10), aJob(3, 2, 2, 50)}
	tests := map[sched.Policy]Metrics{
		// waits 0, 99, 108; ends 100, 110, 160.
		// bounded slowdowns: 100/100 = 1, (99+10)/10 = 10.9, (108+50)/50 = 3.16.
		sched.FCFS: {Jobs: 3, AvgWait: 207.0 / 3, P95Wait: 108, P99Wait: 108, MaxWait: 108,
			AvgBoundedSlowdown: (1 + 10.9 + 3.16) / 3, Utilization: 340.0 / (4 * 160), Makespan: 160},
		// waits 0, 99, 0; ends 100, 110, 52.
		sched.EASY: {Jobs: 3, AvgWait: 33, P95Wait: 99, P99Wait: 99, MaxWait: 99,
			AvgBoundedSlowdown: (1 + 10.9 + 1) / 3, Utilization: 340.0 / (4 * 110), Makespan: 110},
	}
	for policy, want := range tests {
		t.Run(policy.String(), func(t *testing.T) {
			res, err := Run(jobs, Config{Procs: 4, Policy: policy})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, res.Metrics(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("bounded slowdown of short jobs counts them as 10 s; the span starts at the first submit", func(t *testing.T) {
		// One processor. j1 at 50 runs 5 s; j2 at 51 runs 2 s, waits 4 s:
		// max(1, (4+2)/10) = 1. j3 at 52 runs 20 s, waits 5 s: 25/20 = 1.25.
		res, err := Run([]Job{aJob(1, 50, 1, 5), aJob(2, 51, 1, 2), aJob(3, 52, 1, 20)}, Config{Procs: 1, Policy: sched.FCFS})
		if err != nil {
			t.Fatal(err)
		}
		want := Metrics{Jobs: 3, AvgWait: 3, P95Wait: 5, P99Wait: 5, MaxWait: 5, AvgBoundedSlowdown: (1 + 1 + 1.25) / 3, Utilization: 27.0 / 27, Makespan: 27}
		if diff := cmp.Diff(want, res.Metrics(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
	})
}

func TestNearestRank(t *testing.T) {
	seq := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i+1) * sec
		}
		return s
	}
	tests := map[string]struct {
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		"empty":                       {nil, 95, 0},
		"one":                         {seq(1), 95, 1 * sec},
		"20 values: the 19th":         {seq(20), 95, 19 * sec},
		"21 values: ceil(19.95) = 20": {seq(21), 95, 20 * sec},
		"100 values: the 95th":        {seq(100), 95, 95 * sec},
		"101 values: ceil(95.95)":     {seq(101), 95, 96 * sec},
		"p100 is the max":             {seq(7), 100, 7 * sec},
		"3 values":                    {seq(3), 95, 3 * sec},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := NearestRank(tc.sorted, tc.p); got != tc.want {
				t.Errorf("NearestRank = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRunRejects(t *testing.T) {
	tests := map[string]struct {
		jobs  []Job
		procs int
	}{
		"no machine":             {[]Job{aJob(1, 0, 1, 1)}, 0},
		"run time 0":             {[]Job{aJob(1, 0, 1, 0)}, 4},
		"no processors":          {[]Job{aJob(1, 0, 0, 1)}, 4},
		"wider than the machine": {[]Job{aJob(1, 0, 5, 1)}, 4},
		"estimate below run":     {[]Job{aJob(1, 0, 1, 10).est(5)}, 4},
		"same ID twice":          {[]Job{aJob(1, 0, 1, 1), aJob(1, 3, 1, 1)}, 4},
		"beyond the clock":       {[]Job{aJob(1, 0, 1, 1).est(math.MaxInt64 / int(sec))}, 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Run(tc.jobs, Config{Procs: tc.procs})
			if !errors.Is(err, ErrJob) {
				t.Errorf("err = %v, want ErrJob", err)
			}
		})
	}
}

// A scheduler that breaks the machine's invariants is caught, not trusted.
func TestRunChecksPlans(t *testing.T) {
	jobs := []Job{aJob(1, 0, 3, 10), aJob(2, 0, 3, 10)}
	tests := map[string]Scheduler{
		"over-allocation": func(s sched.Snapshot, now time.Time) sched.Plan {
			var p sched.Plan
			for _, pd := range s.Pending {
				p.Starts = append(p.Starts, sched.Start{RunID: pd.RunID, Placements: []sched.Placement{{JobID: pd.RunID, Node: PoolNode, CPUs: pd.Request.CPUs}}})
			}
			return p
		},
		"unknown run": func(sched.Snapshot, time.Time) sched.Plan {
			return sched.Plan{Starts: []sched.Start{{RunID: 99, Placements: []sched.Placement{{Node: PoolNode, CPUs: 1}}}}}
		},
		"wrong size": func(s sched.Snapshot, _ time.Time) sched.Plan {
			return sched.Plan{Starts: []sched.Start{{RunID: s.Pending[0].RunID, Placements: []sched.Placement{{Node: PoolNode, CPUs: 1}}}}}
		},
		"starts nothing on an idle machine": func(sched.Snapshot, time.Time) sched.Plan { return sched.Plan{} },
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Run(jobs, Config{Procs: 4, Schedule: s})
			if !errors.Is(err, ErrScheduler) {
				t.Errorf("err = %v, want ErrScheduler", err)
			}
		})
	}
}

// randomJobs is a small random workload on procs processors: bursts of
// arrivals, ties in submit times and in estimates, estimates above runs.
func randomJobs(rng *rand.Rand, n, procs int) []Job {
	jobs := make([]Job, n)
	t := 0
	for i := range jobs {
		if rng.IntN(3) > 0 {
			t += rng.IntN(30)
		}
		run := 1 + rng.IntN(60)
		est := run
		if rng.IntN(2) == 0 {
			est = run + 10*rng.IntN(10)
		}
		jobs[i] = aJob(int64(n-i), t, 1+rng.IntN(procs), run).est(est)
	}
	return jobs
}

// sched and the textbook reference agree on every start time of many small
// random workloads, under every policy; each replay is deterministic and,
// by Run's own checks, never over-allocates the machine.
func TestSchedMatchesReference(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		procs := 1 + rng.IntN(16)
		jobs := randomJobs(rng, 1+rng.IntN(40), procs)
		for _, policy := range []sched.Policy{sched.FCFS, sched.EASY, sched.Conservative} {
			want := waits(t, jobs, procs, policy, refSchedule)
			got := waits(t, jobs, procs, policy, sched.Schedule)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("seed %d, %v, P=%d, jobs %+v:\nwaits by job (-reference +sched):\n%s", seed, policy, procs, jobs, diff)
			}
			if again := waits(t, jobs, procs, policy, sched.Schedule); !cmp.Equal(got, again) {
				t.Fatalf("seed %d, %v: not deterministic", seed, policy)
			}
		}
	}
}

func TestPolicyByName(t *testing.T) {
	for name, want := range map[string]sched.Policy{"fcfs": sched.FCFS, "easy": sched.EASY, "conservative": sched.Conservative, "berth": sched.Berth} {
		if got, err := PolicyByName(name); err != nil || got != want {
			t.Errorf("PolicyByName(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := PolicyByName("sjf"); !errors.Is(err, ErrPolicy) {
		t.Errorf("PolicyByName(sjf): err = %v, want ErrPolicy", err)
	}
}
