package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
)

func TestRetryOnError(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	marker := filepath.Join(t.TempDir(), "failed-once")
	r := submit(t, h, fmt.Sprintf(`type: task
name: flaky
retry: {on_events: [error], duration: 1h}
commands:
  - echo attempt $BERTH_ATTEMPT restart $SLURM_RESTART_COUNT
  - if [ ! -e %s ]; then touch %s; exit 3; fi
`, marker, marker))
	end := finished(t, h, fmt.Sprint(r.ID))
	if end.Status != api.StatusDone || len(end.Jobs) != 2 || end.Jobs[0].Reason != api.ReasonExitedWithError || end.Jobs[1].Attempt != 1 {
		t.Fatalf("flaky run %s, jobs %+v: want the second attempt done", end.Status, end.Jobs)
	}
	out, _ := follow(t, h, r.ID)
	if !strings.Contains(out, "attempt 1 restart 1") {
		t.Errorf("second attempt's output %q lacks its attempt number", out)
	}

	// Without error among the events, a failure is final.
	r2 := submit(t, h, "type: task\nretry: {on_events: [interruption]}\ncommands: [\"exit 5\"]\n")
	if end := finished(t, h, fmt.Sprint(r2.ID)); end.Status != api.StatusFailed || len(end.Jobs) != 1 {
		t.Errorf("run retried on interruption only ended %s with %d jobs", end.Status, len(end.Jobs))
	}
	// A run nothing could hold, retrying on no-capacity for a short while, fails then.
	r3 := submit(t, h, "type: task\nretry: {on_events: [no-capacity], duration: 1s}\nresources: {cpu: 64}\ncommands: [\"true\"]\n")
	if end := finished(t, h, fmt.Sprint(r3.ID)); end.Status != api.StatusFailed || end.Reason != string(lifecycle.ReasonNoCapacity) {
		t.Errorf("run no node can hold ended %s (%s)", end.Status, end.Reason)
	}
}

// A node away for longer than the timeout: its jobs fail as unreachable, and
// a run that retries on interruption runs again on another node.
func TestNodeFailureAndRetry(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.NodeTimeout = 500 * time.Millisecond })
	ctx := context.Background()
	dir := t.TempDir()
	stop := startAgent(t, h, agentOpts{name: "doomed", cpus: 2, dir: dir})
	plain := submit(t, h, "type: task\nname: plain\ncommands: [\"sleep 30\"]\nresources: {cpu: 1}\n")
	retried := submit(t, h, "type: task\nname: retried\nretry: {on_events: [interruption]}\ncommands: [\"echo on $BERTH_NODE_NAME; [ $BERTH_ATTEMPT -gt 0 ] || sleep 30\"]\nresources: {cpu: 1}\n")
	waitFor(t, "both to run", func() bool {
		a, _ := h.c.Run(ctx, "plain")
		b, _ := h.c.Run(ctx, "retried")
		return a != nil && b != nil && a.Status == api.StatusRunning && b.Status == api.StatusRunning
	})
	stop() // the agent goes away and does not come back
	startAgent(t, h, agentOpts{name: "spare", cpus: 2})
	if end := finished(t, h, fmt.Sprint(plain.ID)); end.Status != api.StatusFailed || end.Reason != string(lifecycle.ReasonUnreachable) {
		t.Errorf("run on the lost node ended %s (%s)", end.Status, end.Reason)
	}
	end := finished(t, h, fmt.Sprint(retried.ID))
	if end.Status != api.StatusDone || end.Jobs[len(end.Jobs)-1].Node != "spare" {
		t.Errorf("retried run ended %s, jobs %+v", end.Status, end.Jobs)
	}
	nodes, _ := h.c.Nodes(ctx)
	for _, n := range nodes {
		if n.Name == "doomed" && n.Status == "idle" {
			t.Errorf("the lost node shows %s", n.Status)
		}
	}
	// The shims of the lost node's jobs are still there (the agent was only
	// stopped): clean them up for the next tests.
	killShims(t, dir)
}

// killShims ends the job processes an agent's data dir holds.
func killShims(t *testing.T, dir string) {
	ents, _ := os.ReadDir(filepath.Join(dir, "jobs"))
	for _, e := range ents {
		if pid, err := readPidFile(filepath.Join(dir, "jobs", e.Name(), "shim.pid")); err == nil {
			_ = syscallKill(-pid)
		}
	}
}

// A multi-node run is all or nothing: when one job fails, the other is
// stopped and the run fails with the first failure's reason.
func TestAllOrNothing(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "a1", cpus: 2})
	startAgent(t, h, agentOpts{name: "a2", cpus: 2})
	r := submit(t, h, "type: task\nnodes: 2\ncommands: [\"if [ $BERTH_NODE_RANK = 1 ]; then sleep 0.3; exit 7; fi; sleep 30\"]\n")
	start := time.Now()
	end := finished(t, h, fmt.Sprint(r.ID))
	if end.Status != api.StatusFailed || end.Reason != api.ReasonExitedWithError || end.ExitCode == nil || *end.ExitCode != 7 {
		t.Errorf("run ended %s (%s) exit %v", end.Status, end.Reason, end.ExitCode)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("the surviving job was not stopped: the run took %v", time.Since(start))
	}
	reasons := map[string]bool{}
	for _, j := range end.Jobs {
		reasons[j.Reason] = true
	}
	if !reasons[string(lifecycle.ReasonByServer)] || !reasons[api.ReasonExitedWithError] {
		t.Errorf("job reasons %v: want one exited_with_error and one terminated_by_server", reasons)
	}
}

func readPidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var pid int
	_, err = fmt.Sscan(strings.TrimSpace(string(b)), &pid)
	return pid, err
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// A dependency on a run that is retried waits for the run's end, not for
// the end of its failed attempt.
func TestDependencyOnRetriedRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	marker := filepath.Join(t.TempDir(), "once")
	a := submit(t, h, fmt.Sprintf("type: task\nname: shaky\nretry: {on_events: [error]}\ncommands: [\"if [ ! -e %s ]; then touch %s; exit 1; fi\"]\n", marker, marker))
	b := submit(t, h, "type: task\nname: after-shaky\ndepends_on: [{afterok: shaky}]\ncommands: [\"true\"]\n")
	ae := finished(t, h, fmt.Sprint(a.ID))
	be := finished(t, h, fmt.Sprint(b.ID))
	if ae.Status != api.StatusDone || be.Status != api.StatusDone || be.StartedAt.Before(*ae.FinishedAt) {
		t.Errorf("shaky %s ended %v; after-shaky %s started %v", ae.Status, ae.FinishedAt, be.Status, be.StartedAt)
	}
}

// The retry duration counts from the last failure: a retried attempt that
// still waits that long after it fails the run.
func TestRetryDurationFromLastFailure(t *testing.T) {
	h := newHarness(t, t.TempDir())
	stop := startAgent(t, h, agentOpts{name: "n1", cpus: 1})
	r := submit(t, h, "type: task\nretry: {on_events: [error], duration: 2s}\ncommands: [\"exit 3\"]\n")
	waitFor(t, "a retry", func() bool {
		got, err := h.c.Run(context.Background(), fmt.Sprint(r.ID))
		return err == nil && len(got.Jobs) >= 2
	})
	stop() // the retried attempt has nowhere to run
	end := finished(t, h, fmt.Sprint(r.ID))
	if end.Status != api.StatusFailed || end.Reason != api.ReasonExitedWithError {
		t.Errorf("ended %s (%s)", end.Status, end.Reason)
	}
	found := false
	for _, e := range end.Events {
		found = found || strings.Contains(e.Message, "retry duration")
	}
	if !found {
		t.Errorf("no event says the retry duration ran out: %+v", end.Events)
	}
}
