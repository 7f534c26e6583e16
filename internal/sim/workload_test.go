package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/sched"
)

// Workloads small enough to work out by hand, each replayed through the
// Cycle: a dependency, an array's throttle, retries (spent or not), a
// preemption that requeues its victim and one that cancels it.
func TestReplayWorkloadByHand(t *testing.T) {
	s := func(sec int) time.Duration { return time.Duration(sec) * time.Second }
	type got struct {
		ID                 int64
		Task               int
		Start, End         time.Duration
		Attempts, Preempts int
		State              string
	}
	tests := map[string]struct {
		json   string
		policy sched.Policy
		want   []got
	}{
		"a dependency waits for its run's end, then starts": {
			json: `{"nodes": [{"name": "n", "cpus": 4}], "runs": [
				{"id": 1, "submit": 0, "run": 100, "cpus": 4},
				{"id": 2, "submit": 0, "run": 10, "cpus": 1, "after": [1]}]}`,
			want: []got{{1, -1, 0, s(100), 1, 0, "done"}, {2, -1, s(100), s(110), 1, 0, "done"}},
		},
		"an array of four throttled to two runs two at a time": {
			json: `{"nodes": [{"name": "n", "cpus": 4}], "runs": [
				{"id": 3, "submit": 0, "run": 10, "cpus": 1, "array": 4, "throttle": 2}]}`,
			want: []got{{3, 0, 0, s(10), 1, 0, "done"}, {3, 1, 0, s(10), 1, 0, "done"},
				{3, 2, s(10), s(20), 1, 0, "done"}, {3, 3, s(10), s(20), 1, 0, "done"}},
		},
		"two failures retried, the third attempt is done": {
			json: `{"nodes": [{"name": "n", "cpus": 4}], "runs": [
				{"id": 4, "submit": 0, "run": 10, "cpus": 1, "fail": 2, "retries": 3}]}`,
			want: []got{{4, -1, 0, s(30), 3, 0, "done"}},
		},
		"retries spent: it fails, and what depends on it is cancelled": {
			json: `{"nodes": [{"name": "n", "cpus": 4}], "runs": [
				{"id": 5, "submit": 0, "run": 10, "cpus": 1, "fail": 2, "retries": 1},
				{"id": 6, "submit": 5, "run": 10, "cpus": 1, "after": [5]}]}`,
			want: []got{{5, -1, 0, s(20), 2, 0, "failed"}, {6, -1, -1, s(20), 0, 0, "cancelled"}},
		},
		"a high-QOS run preempts a low one, which is requeued and runs again after it": {
			json: `{"nodes": [{"name": "n", "count": 2, "cpus": 2}],
				"qos": {"high": {"priority": 100, "preempt": ["low"]}, "low": {}},
				"runs": [
				{"id": 7, "submit": 0, "run": 100, "cpus": 2, "nodes": 2, "qos": "low"},
				{"id": 8, "submit": 5, "run": 10, "cpus": 2, "nodes": 2, "qos": "high"}]}`,
			policy: sched.Berth,
			want:   []got{{7, -1, 0, s(115), 2, 1, "done"}, {8, -1, s(5), s(15), 1, 0, "done"}},
		},
		"a preemption that cancels (the victim's QOS says so)": {
			json: `{"nodes": [{"name": "n", "cpus": 2}],
				"qos": {"high": {"priority": 100, "preempt": ["low"]}, "low": {"mode": "cancel"}},
				"runs": [
				{"id": 9, "submit": 0, "run": 100, "cpus": 2, "qos": "low"},
				{"id": 10, "submit": 5, "run": 10, "cpus": 2, "qos": "high"}]}`,
			policy: sched.Berth,
			want:   []got{{9, -1, 0, s(5), 1, 1, "preempted"}, {10, -1, s(5), s(15), 1, 0, "done"}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w, err := ParseWorkload([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			res, err := ReplayWorkload(w, tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			var have []got
			for _, o := range res.Outcomes {
				have = append(have, got{o.ID, o.Task, o.Start, o.End, o.Attempts, o.Preempted, o.State})
			}
			if diff := cmp.Diff(tt.want, have); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			again, _ := ReplayWorkload(w, tt.policy)
			if !cmp.Equal(res, again) {
				t.Error("two replays differ")
			}
		})
	}
}

func TestReplayWorkloadReport(t *testing.T) {
	w, err := ParseWorkload([]byte(`{"nodes": [{"name": "n", "cpus": 2}], "runs": [
		{"id": 1, "submit": 0, "run": 10, "cpus": 2},
		{"id": 2, "submit": 0, "run": 10, "cpus": 2, "fail": 1, "retries": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ReplayWorkload(w, sched.EASY)
	if err != nil {
		t.Fatal(err)
	}
	// 1 runs 0-10, 2 runs 10-20 (fails), again 20-30: the node is busy all
	// along; 2 waited 10 s for its first start.
	want := WorkloadReport{Policy: "easy", Runs: 2, Done: 2, Attempts: 3, AvgWait: 5, P99Wait: 10, MaxWait: 10, Makespan: 30, Utilization: 1}
	if diff := cmp.Diff(want, res.Report("easy")); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestParseWorkloadErrors(t *testing.T) {
	tests := map[string]string{
		"unknown field":   `{"nodes": [{"name": "n", "cpus": 1}], "runs": [], "extra": 1}`,
		"no nodes":        `{"runs": []}`,
		"node name twice": `{"nodes": [{"name": "n", "cpus": 1}, {"name": "n", "cpus": 1}]}`,
		"no run time":     `{"nodes": [{"name": "n", "cpus": 1}], "runs": [{"id": 1, "cpus": 1}]}`,
		"limit below run": `{"nodes": [{"name": "n", "cpus": 1}], "runs": [{"id": 1, "run": 5, "limit": 4, "cpus": 1}]}`,
		"unknown qos":     `{"nodes": [{"name": "n", "cpus": 1}], "runs": [{"id": 1, "run": 5, "cpus": 1, "qos": "x"}]}`,
		"after itself":    `{"nodes": [{"name": "n", "cpus": 1}], "runs": [{"id": 1, "run": 5, "cpus": 1, "after": [1]}]}`,
		"bad mode":        `{"nodes": [{"name": "n", "cpus": 1}], "qos": {"a": {"mode": "kill"}}, "runs": []}`,
		"not json":        `nodes: []`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseWorkload([]byte(in)); !errors.Is(err, ErrWorkload) {
				t.Errorf("err = %v, want ErrWorkload", err)
			}
		})
	}
	// A run no node can ever hold is an error of the replay, not a hang.
	w, err := ParseWorkload([]byte(`{"nodes": [{"name": "n", "cpus": 1}], "runs": [{"id": 1, "run": 5, "cpus": 2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReplayWorkload(w, sched.EASY); !errors.Is(err, ErrScheduler) {
		t.Errorf("err = %v, want ErrScheduler", err)
	}
}

func FuzzParseWorkload(f *testing.F) {
	f.Add([]byte(`{"nodes": [{"name": "n", "count": 2, "cpus": 2}], "qos": {"h": {"preempt": ["h"]}}, "runs": [{"id": 1, "run": 5, "cpus": 1, "array": 3, "throttle": 1, "fail": 1, "retries": 1}, {"id": 2, "run": 1, "cpus": 2, "nodes": 2, "after": [1], "qos": "h"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWorkload(data)
		if err != nil {
			return
		}
		// Small ones replay without a panic; an error is fine (a run that
		// never fits).
		n, nodes := 0, 0
		for _, r := range w.Runs {
			n += max(r.Array, 1)
		}
		for _, x := range w.Nodes {
			nodes += max(x.Count, 1)
		}
		if n <= 50 && nodes <= 50 {
			_, _ = ReplayWorkload(w, sched.Berth)
		}
	})
}
