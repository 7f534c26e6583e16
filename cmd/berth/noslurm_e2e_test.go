//go:build linux

package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// Berth without its Slurm front end is a working dstack-style product: a
// binary built with -tags noslurm (cmd/berth/slurm.go's one registration
// line left out) has no Slurm command, and runs a configuration end to
// end: server and agent, berth apply -f, berth ps, berth logs. Not
// parallel: it swaps the binary the helpers run (parallel tests wait
// until the sequential ones are done).
func TestNoSlurmBuild(t *testing.T) {
	if os.Getenv("BERTH_E2E_BIN") != "" {
		t.Skip("BERTH_E2E_BIN: testing a binary built elsewhere")
	}
	bin := filepath.Join(t.TempDir(), "berth")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(goTool, "build", "-tags", "noslurm", "-o", bin, "github.com/berth-hq/berth/cmd/berth").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags noslurm: %v\n%s", err, out)
	}
	saved := berthBin
	berthBin = bin
	t.Cleanup(func() { berthBin = saved })

	c := newCluster(t)
	for _, name := range []string{"sbatch", "squeue", "srun", "sacct", "install-slurm-shims"} {
		if r := c.berth("", name, "--version"); r.code == 0 || !strings.Contains(r.stderr, `unknown command "`+name+`"`) {
			t.Errorf("berth %s in the noslurm build: %s", name, r)
		}
	}
	if help := c.mustBerth("--help"); strings.Contains(help, "Slurm commands") {
		t.Errorf("berth --help lists Slurm commands:\n%s", help)
	}

	c.startServer("--agent-name", "plain-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "plain-node")
	cfg := c.writeConfig("task.yml", `type: task
name: plain
commands:
  - echo "plain task on $BERTH_NODE_NAME"
`)
	if r := c.berth("", "apply", "-y", "--detach", "-f", cfg); r.code != 0 || r.stdout != "Submitted run plain (ID 1)\n" {
		t.Fatalf("apply: %s", r)
	}
	if run := c.waitFinished("plain", 60*time.Second); run.Status != api.StatusDone {
		t.Fatalf("the run ended %s (%s), want done", run.Status, run.Reason)
	}
	if ps := c.mustBerth("ps", "-a"); !strings.Contains(ps, "plain") || !strings.Contains(ps, "done") {
		t.Errorf("berth ps -a lacks the finished run:\n%s", ps)
	}
	if out, code := c.berthCombined("logs", "plain"); code != 0 || out != "plain task on plain-node\n" {
		t.Errorf("berth logs plain: exit %d, %q", code, out)
	}
}
