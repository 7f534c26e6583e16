package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
)

// gpuSamples are samples of job every step from now-span to now, its one
// GPU at util percent.
func gpuSamples(job int64, now time.Time, span, step time.Duration, util float64) []api.JobSample {
	var out []api.JobSample
	for at := now.Add(-span); !at.After(now); at = at.Add(step) {
		out = append(out, api.JobSample{JobID: job, Time: at, GPUs: []api.GPUSample{{Index: 0, Util: util}}})
	}
	return out
}

func TestUnderUtilized(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	window := 10 * time.Minute
	tests := map[string]struct {
		jobs           map[int64][]api.JobSample
		under, covered bool
	}{
		"all under, whole window": {jobs: map[int64][]api.JobSample{1: gpuSamples(1, now, 11*time.Minute, 5*time.Second, 3)}, under: true, covered: true},
		"one busy sample": {jobs: map[int64][]api.JobSample{1: append(gpuSamples(1, now, 11*time.Minute, 5*time.Second, 3),
			api.JobSample{JobID: 1, Time: now.Add(-time.Minute), GPUs: []api.GPUSample{{Util: 10}}})}, covered: true},
		"busy before the window only": {jobs: map[int64][]api.JobSample{1: append(gpuSamples(1, now, 10*time.Minute, 5*time.Second, 3),
			api.JobSample{JobID: 1, Time: now.Add(-20 * time.Minute), GPUs: []api.GPUSample{{Util: 90}}})}, under: true, covered: true},
		"window not covered yet": {jobs: map[int64][]api.JobSample{1: gpuSamples(1, now, 5*time.Minute, 5*time.Second, 0)}},
		"another job busy": {jobs: map[int64][]api.JobSample{1: gpuSamples(1, now, 11*time.Minute, 5*time.Second, 0),
			2: gpuSamples(2, now, time.Minute, 5*time.Second, 50)}, covered: true},
		"no GPU samples": {jobs: map[int64][]api.JobSample{1: {{JobID: 1, Time: now.Add(-11 * time.Minute)}, {JobID: 1, Time: now}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			under, covered := underUtilized(10, window, tc.jobs, now)
			if under != tc.under || covered != tc.covered {
				t.Errorf("underUtilized = %v, %v; want %v, %v", under, covered, tc.under, tc.covered)
			}
		})
	}
}

// TestUtilizationPolicyStops: GPU samples fed to the server as an agent
// posts them: a run with a busy sample in its window goes on; a run whose
// whole window is under the minimum stops,
// terminated_due_to_utilization_policy.
func TestUtilizationPolicyStops(t *testing.T) {
	h := newHarness(t, t.TempDir())
	// No sampler of the agent's own: the test's samples are the only ones.
	startAgent(t, h, agentOpts{name: "g1", cpus: 2, gpus: "A100:80GB:2", mon: agent.Monitoring{MetricsEvery: -1}})
	job := func(name string) (int64, int64) {
		r := submit(t, h, fmt.Sprintf(`
type: task
name: %s
resources: {gpu: 1}
utilization_policy: {min_gpu_utilization: 20, time_window: 5m}
commands: ["sleep 600"]
`, name))
		stopAtEnd(t, h, r.ID)
		var id int64
		waitFor(t, name+" to run", func() bool {
			got := runStatus(t, h, r.ID)
			if got.Status == api.StatusRunning && len(got.Jobs) == 1 {
				id = got.Jobs[0].ID
				return true
			}
			return false
		})
		return r.ID, id
	}
	busyRun, busyJob := job("busy")
	idleRun, idleJob := job("idle")

	ctx := context.Background()
	now := time.Now().UTC()
	busy := gpuSamples(busyJob, now, 6*time.Minute, 30*time.Second, 5)
	busy[len(busy)-2].GPUs[0].Util = 25
	short := gpuSamples(idleJob, now, 2*time.Minute, 30*time.Second, 5)
	if err := h.c.AgentMetrics(ctx, api.AgentMetrics{Node: "g1", Samples: append(busy, short...)}); err != nil {
		t.Fatal(err)
	}
	// The check is done before the post is answered.
	for _, id := range []int64{busyRun, idleRun} {
		if got := runStatus(t, h, id); got.Status != api.StatusRunning {
			t.Fatalf("run %d: %s %s, want running (a busy sample in its window, or a window not yet watched)", id, got.Status, got.Reason)
		}
	}
	idle := gpuSamples(idleJob, now, 6*time.Minute, 30*time.Second, 5)
	if err := h.c.AgentMetrics(ctx, api.AgentMetrics{Node: "g1", Samples: idle}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle run to end", func() bool { return runStatus(t, h, idleRun).Status.Finished() })
	got := runStatus(t, h, idleRun)
	if got.Status != api.StatusTerminated || got.Reason != string(lifecycle.ReasonUtilizationPolicy) {
		t.Errorf("idle run ended %s (%s), want terminated (%s)", got.Status, got.Reason, lifecycle.ReasonUtilizationPolicy)
	}
	if got := runStatus(t, h, busyRun); got.Status != api.StatusRunning {
		t.Errorf("busy run: %s %s, want running", got.Status, got.Reason)
	}
}
