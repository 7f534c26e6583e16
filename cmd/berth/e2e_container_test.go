//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
)

// A run with `image:` runs in a container on a node with an engine, through
// the real server, agent and shim: output, exit code, env, working_dir, a
// volume, a stop with grace; the node reports its engine in `berth fleet`.
func TestContainerRun(t *testing.T) {
	t.Parallel()
	e := containertest.Engine(t)
	c := newCluster(t)
	node := fmt.Sprintf("ctr-node-%d", time.Now().UnixNano()%1e9)
	c.startServer("--agent-name", node, "--cpus", "2", "--stop-grace", "5s")
	nodes := c.waitNodes(30*time.Second, node)
	t.Cleanup(func() {
		left, _ := e.Find(context.Background(), map[string]string{container.LabelNode: node})
		for _, ct := range left {
			t.Errorf("container %s outlived its run", ct.Name)
			_ = ct.Remove(context.Background())
		}
	})
	if want := "docker " + e.APIVersion(); len(nodes) != 1 || nodes[0].Containers != want || !nodes[0].CanRunContainers() {
		t.Fatalf("berth fleet --json: %+v; want containers %q", nodes, want)
	}
	if out := c.mustBerth("fleet"); !strings.Contains(out, "CONTAINERS") || !strings.Contains(out, "docker "+e.APIVersion()) {
		t.Errorf("berth fleet does not show the engine:\n%s", out)
	}

	vol := t.TempDir()
	workDir := "/berth-e2e-" + strings.TrimPrefix(node, "ctr-node-")
	cfg := c.writeConfig("ctr.yml", fmt.Sprintf(`type: task
name: in-container
image: %s
env:
  - GREETING=hi
working_dir: %s
volumes:
  - %s:/data
commands:
  - test -f /.dockerenv && echo in a container
  - echo "$GREETING from $(pwd), run $BERTH_RUN_ID" | tee /data/out.txt
  - exit 3
`, containertest.Image, workDir, vol))
	r := c.berth("", "apply", "-y", "--dry-run", "-f", cfg)
	if strings.Contains(r.stderr, "Not supported yet") && strings.Contains(r.stderr, "image") {
		// internal/server does not fill Assignment.Container yet: the run
		// would run on the host. The lead's wiring enables the rest.
		t.Skip("the server does not run `image:` yet (it lists image as not supported)")
	}
	r = c.berth("", "apply", "-y", "-f", cfg)
	if r.code != 3 {
		t.Fatalf("apply of a container run that exits 3: %s", r)
	}
	if want := "in a container\nhi from " + workDir + ", run 1\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "out.txt")); err != nil || string(b) != "hi from "+workDir+", run 1\n" {
		t.Errorf("the volume holds %q, %v", b, err)
	}
	// The container's working_dir is the container's, not the host's.
	if _, err := os.Stat(workDir); err == nil {
		t.Errorf("%s was made on the host", workDir)
	}

	// A graceful stop reaches the container's commands.
	stopCfg := c.writeConfig("ctr-stop.yml", fmt.Sprintf("type: task\nname: ctr-trap\nimage: %s\ncommands:\n  - trap 'echo got TERM; exit 0' TERM; echo ready; sleep 100 & wait\n", containertest.Image))
	if r := c.berth("", "apply", "-y", "--detach", "-f", stopCfg); r.code != 0 {
		t.Fatalf("apply ctr-stop.yml: %s", r)
	}
	c.waitLog("ctr-trap", "ready\n", 30*time.Second)
	start := time.Now()
	if r := c.berth("", "stop", "ctr-trap"); r.code != 0 {
		t.Fatalf("berth stop ctr-trap: %s", r)
	}
	run := c.waitFinished("ctr-trap", 30*time.Second)
	if run.Status != api.StatusTerminated || run.Reason != api.ReasonTerminatedByUser || run.ExitCode == nil || *run.ExitCode != 0 {
		b, _ := json.Marshal(run)
		t.Errorf("stopped ctr-trap: %s; want terminated by user, exit 0", b)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("a container that exits on SIGTERM took %v to stop", d)
	}
	if out, _ := c.berthCombined("logs", "ctr-trap"); out != "ready\ngot TERM\n" {
		t.Errorf("berth logs ctr-trap: %q", out)
	}
}
