//go:build linux

package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/lifecycle"
)

// TestRetryPullFailureEnds (issue 16's bug): an image that cannot be
// pulled (a local name no registry holds), under `retry: {on_events:
// [error]}` with no duration, is tried lifecycle.MaxStartFailures times
// and then the run fails failed_to_start, its history naming the engine's
// error; the attached apply returns with it.
func TestRetryPullFailureEnds(t *testing.T) {
	t.Parallel()
	containertest.Engine(t)
	c := newCluster(t)
	node := fmt.Sprintf("pull-node-%d", time.Now().UnixNano()%1e9)
	c.startServer("--agent-name", node, "--cpus", "2")
	c.waitNodes(30*time.Second, node)
	image := fmt.Sprintf("local/berth-no-such-image-%d:1", time.Now().UnixNano()%1e9)
	cfg := c.writeConfig("pull.yml", fmt.Sprintf(`type: task
name: nopull
image: %s
retry:
  on_events: [error]
commands: ["true"]
`, image))
	r := c.berth("", "apply", "-y", "-f", cfg)
	if r.code == 0 {
		t.Fatalf("apply of a run whose image cannot be pulled succeeded: %s", r)
	}
	run := c.waitFinished("nopull", 2*time.Minute)
	if run.Status != "failed" || run.Reason != string(lifecycle.ReasonFailedToStart) {
		t.Errorf("run %s %s, want failed failed_to_start", run.Status, run.Reason)
	}
	ev := c.events()
	if n := strings.Count(ev, "retry after error (failed_to_start)"); n != lifecycle.MaxStartFailures-1 {
		t.Errorf("%d retries, want %d:\n%s", n, lifecycle.MaxStartFailures-1, ev)
	}
	if !strings.Contains(ev, fmt.Sprintf("failed to start %d times in a row", lifecycle.MaxStartFailures)) || !strings.Contains(ev, image) {
		t.Errorf("history does not say why retry gave up, with the image:\n%s", ev)
	}
}
