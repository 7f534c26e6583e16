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

	// The other retry rules (events, durations, no-capacity) are in
	// testdata/transcripts/retry.txt.
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
