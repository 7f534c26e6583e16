package sim

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-hq/berth/internal/sched"
)

// The whole traces of the shared traces folder ($BERTH_TRACES, else
// /work/shared/traces), replayed through sched, agree with the reference
// figures of its README, computed by an independent simulator under the same
// conventions. The README's p95 interpolates between order statistics where
// ours takes the nearest rank, hence a looser bound on it. Skipped where the
// traces are absent, under -short, and under the race detector (too slow).
func TestReferenceTraces(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("replays whole traces: a few seconds, minutes under -race")
	}
	dir := os.Getenv("BERTH_TRACES")
	if dir == "" {
		dir = "/work/shared/traces"
	}
	type ref struct {
		jobs                     int
		avgWait, p95, bsld, util float64
		makespan                 float64
	}
	tests := map[string]map[sched.Policy]ref{
		"KTH-SP2-1996-2.1-cln.swf.gz": {
			sched.FCFS:         {28467, 389861.059, 862529.4, 7510.7852, 0.698849, 28779758},
			sched.EASY:         {28467, 6804.974, 37506.8, 90.7559, 0.699238, 28763776},
			sched.Conservative: {28467, 8021.340, 41743.0, 101.9225, 0.699238, 28763776},
		},
		"NASA-iPSC-1993-3.1-cln.swf.gz": {
			sched.FCFS: {18066, 8.081, 0.0, 1.0262, 0.466093, 7949022},
			sched.EASY: {18066, 4.067, 0.0, 1.0119, 0.466093, 7949022},
		},
	}
	for file, policies := range tests {
		path := filepath.Join(dir, file)
		if _, err := os.Stat(path); err != nil {
			t.Logf("skipping %s: %v", file, err)
			continue
		}
		tr, err := OpenSWF(path)
		if err != nil {
			t.Fatal(err)
		}
		jobs, _ := Keep(tr.Jobs, tr.MaxProcs)
		for policy, want := range policies {
			t.Run(file+"/"+policy.String(), func(t *testing.T) {
				res, err := Run(jobs, Config{Procs: tr.MaxProcs, Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				m := res.Metrics()
				// Within the README's rounding (tol), p95 within its method's
				// difference (rel).
				near := func(what string, got, want, tol, rel float64) {
					if math.Abs(got-want) > tol+rel*math.Abs(want) {
						t.Errorf("%s = %.6f, reference %.6f", what, got, want)
					}
				}
				if m.Jobs != want.jobs {
					t.Errorf("jobs = %d, reference %d", m.Jobs, want.jobs)
				}
				near("avg wait", m.AvgWait, want.avgWait, 0.5e-3, 0)
				near("p95 wait", m.P95Wait, want.p95, 0, 1e-3)
				near("avg bounded slowdown", m.AvgBoundedSlowdown, want.bsld, 0.5e-4, 0)
				near("utilization", m.Utilization, want.util, 0.5e-6, 0)
				near("makespan", m.Makespan, want.makespan, 0, 0)
			})
		}
	}
}

// TestBerthBeatsEASY is the scheduler issue's goal for the default policy,
// on every shared trace: no starvation — a longest wait and a 99th-percentile
// wait no longer than EASY's — with a utilization no lower and a lower
// average bounded slowdown.
func TestBerthBeatsEASY(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("replays whole traces: a few seconds, minutes under -race")
	}
	dir := os.Getenv("BERTH_TRACES")
	if dir == "" {
		dir = "/work/shared/traces"
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.swf.gz"))
	if len(files) == 0 {
		t.Skip("no traces in " + dir)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := OpenSWF(path)
			if err != nil {
				t.Fatal(err)
			}
			jobs, _ := Keep(tr.Jobs, tr.MaxProcs)
			var m [2]Metrics
			for i, p := range []sched.Policy{sched.EASY, sched.Berth} {
				res, err := Run(jobs, Config{Procs: tr.MaxProcs, Policy: p})
				if err != nil {
					t.Fatal(err)
				}
				m[i] = res.Metrics()
			}
			easy, berth := m[0], m[1]
			t.Logf("bsld easy %.4f berth %.4f; utilization %.6f %.6f; p99 wait %.0f %.0f; max wait %.0f %.0f", easy.AvgBoundedSlowdown, berth.AvgBoundedSlowdown,
				easy.Utilization, berth.Utilization, easy.P99Wait, berth.P99Wait, easy.MaxWait, berth.MaxWait)
			if berth.AvgBoundedSlowdown >= easy.AvgBoundedSlowdown {
				t.Errorf("bounded slowdown %.4f, not below EASY's %.4f", berth.AvgBoundedSlowdown, easy.AvgBoundedSlowdown)
			}
			if berth.Utilization < easy.Utilization-1e-9 {
				t.Errorf("utilization %.6f, below EASY's %.6f", berth.Utilization, easy.Utilization)
			}
			if berth.MaxWait > easy.MaxWait {
				t.Errorf("longest wait %.0f s, over EASY's %.0f s", berth.MaxWait, easy.MaxWait)
			}
			if berth.P99Wait > easy.P99Wait {
				t.Errorf("99th-percentile wait %.0f s, over EASY's %.0f s", berth.P99Wait, easy.P99Wait)
			}
		})
	}
}
