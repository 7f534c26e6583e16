//go:build linux

package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
)

// A container run gets its repo, files and disk: the repo in its working
// directory (/workflow), a file at an absolute path beside the image's
// own, resources.disk as the size of /workflow (where the agent can); a
// `python:` run goes to the image given for its version (berth server
// --python-image, for the local agent), and the plan says so.
func TestContainerRunCarriesRepoAndFiles(t *testing.T) {
	t.Parallel()
	e := containertest.Engine(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	out, err := exec.Command("python3", "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output()
	if err != nil {
		t.Skip("python3 is not installed")
	}
	py := strings.TrimSpace(string(out))
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 on the host: the test tells the image from the host by it")
	}
	c := newCluster(t)
	node := fmt.Sprintf("carry-node-%d", time.Now().UnixNano()%1e9)
	c.startServer("--agent-name", node, "--cpus", "2", "--python-image", py+"="+containertest.Image)
	c.waitNodes(30*time.Second, node)
	t.Cleanup(func() {
		left, _ := e.Find(context.Background(), map[string]string{container.LabelNode: node})
		for _, ct := range left {
			t.Errorf("container %s outlived its run", ct.Name)
			_ = ct.Remove(context.Background())
		}
	})

	repo := filepath.Join(c.home, "proj")
	gitRepo(t, repo, map[string]string{"run.sh": "echo run.sh from the repo in $(pwd)\n"})
	if err := os.WriteFile(filepath.Join(c.home, "conf.txt"), []byte("conf from files\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	enforced := os.Geteuid() == 0
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		enforced = false
	}
	conf := filepath.Join(repo, "ctr.yml")
	if err := os.WriteFile(conf, []byte(`type: task
name: ctr-carry
image: `+containertest.Image+`
repos: [.]
files:
  - ../conf.txt:/etc/berth-e2e.conf
resources:
  disk: 64MB
commands:
  - sh run.sh
  - cat /etc/berth-e2e.conf
  - test -s /etc/passwd && echo the image keeps its /etc
  - "df -P . | tail -1 | awk '{print ($2 > 40000 && $2 < 70000) ? \"size ok\" : $2}'"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := c.berth("", "apply", "-y", "-f", conf)
	want := "run.sh from the repo in /workflow\nconf from files\nthe image keeps its /etc\n"
	if r.code != 0 || !strings.HasPrefix(r.stdout, want) {
		t.Errorf("container with repo and files: want %q first: %s", want, r)
	}
	if enforced && !strings.Contains(r.stdout, "size ok\n") {
		t.Errorf("resources.disk in a container: /workflow is not 64MB: %s", r)
	}
	if strings.Contains(r.stderr, "Not supported yet") {
		t.Errorf("the plan calls repos, files or disk unsupported in a container: %s", r)
	}

	pyConf := c.writeConfig("py-image.yml", `type: task
name: py-image
python: "`+py+`"
commands:
  - test -e /usr/bin/python3 || echo in the image given for python `+py+`
`)
	r = c.berth("", "apply", "-y", "-f", pyConf)
	if want := "in the image given for python " + py + "\n"; r.code != 0 || r.stdout != want {
		t.Errorf("python by image: want %q: %s", want, r)
	}
	if !strings.Contains(r.stderr, "Note: on "+node+": python"+py+": image "+containertest.Image) {
		t.Errorf("the plan does not name the image: %s", r)
	}
}
