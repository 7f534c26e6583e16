//go:build linux

package main_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// `python: "3.X"` on a native node: the plan says which Python runs
// there, and the job's python and python3 are the host's python3.X; a
// version the node lacks does not fit there, and the plan says why.
func TestPythonIsPickedOnTheNode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("python3", "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output()
	if err != nil {
		t.Skip("python3 is not installed")
	}
	have := strings.TrimSpace(string(out))
	if !slices.Contains(spec.PythonVersions, have) {
		t.Skipf("the host's python3 is %s, which configurations cannot name", have)
	}
	missing := ""
	for _, v := range spec.PythonVersions {
		if _, err := exec.LookPath("python" + v); err != nil && v != have {
			missing = v
			break
		}
	}
	c := newCluster(t)
	c.startServer("--agent-name", "py-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "py-node")

	conf := c.writeConfig("py.yml", `type: task
name: py-pick
python: "`+have+`"
commands:
  - python -c 'import sys; print("python", "%d.%d" % sys.version_info[:2])'
  - python3 --version | cut -c1-6
`)
	r := c.berth("", "apply", "-y", "-f", conf)
	if want := "python " + have + "\nPython\n"; r.code != 0 || r.stdout != want {
		t.Errorf("python %s: want %q: %s", have, want, r)
	}
	if !strings.Contains(r.stderr, "Note: on py-node: python"+have+": /") {
		t.Errorf("the plan does not say which python runs on py-node: %s", r)
	}
	if strings.Contains(r.stderr, "Not supported yet") {
		t.Errorf("the plan calls python unsupported: %s", r)
	}
	if missing == "" {
		return
	}
	conf = c.writeConfig("py-missing.yml", `type: task
name: py-missing
python: "`+missing+`"
commands: [python --version]
`)
	r = c.berth("", "apply", "--dry-run", "-f", conf)
	if !strings.Contains(r.stderr+r.stdout, "never (no python"+missing+" here") {
		t.Errorf("python %s, which the node lacks: the plan does not say so: %s", missing, r)
	}
}
