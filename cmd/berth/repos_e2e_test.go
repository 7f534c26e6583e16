//go:build linux

package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo makes a Git repository at dir with files (path: content; a
// name ending in "*" is made executable, without the star), committed.
func gitRepo(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "first"}} {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// The migration guide's first example (a `python train.py` task with
// `repos: [.]`), run from a Git repository: the job finds train.py and its
// module in its working directory, with the uncommitted change and
// without the ignored file; the second apply of the unchanged tree uploads
// nothing; a change is uploaded again. `files` carries a file (mode kept)
// and a directory to a path under the working directory and under ~.
func TestRepoTravelsWithTheRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	c := newCluster(t)
	c.startServer("--agent-name", "repo-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "repo-node")

	repo := filepath.Join(c.home, "proj")
	gitRepo(t, repo, map[string]string{
		"train.py": `import os, sys
from lib import model
print("train.py: lr", os.environ["LEARNING_RATE"], "args", sys.argv[1:], "model", model.NAME)
print("ignored present:", os.path.exists("data/huge.bin"))
`,
		"lib/__init__.py": "",
		"lib/model.py":    "NAME = 'committed'\n",
		".gitignore":      "data/\n",
		"run.sh*":         "#!/bin/sh\necho run.sh ran\n",
	})
	// Uncommitted, untracked and ignored: the job sees the first two.
	if err := os.WriteFile(filepath.Join(repo, "lib", "model.py"), []byte("NAME = 'uncommitted'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "data", "huge.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("untracked\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The guide's example, less what this machine lacks (a GPU, 32GB,
	// python 3.9 by name): its repos, env, commands and max_duration.
	conf := filepath.Join(repo, ".dstack.yml")
	if err := os.WriteFile(conf, []byte(`type: task
name: train-model

repos:
  - .

env:
  - LEARNING_RATE=0.001

commands:
  - python3 train.py --batch-size=64
  - ./run.sh
  - cat notes.txt

max_duration: 2h
`), 0o644); err != nil {
		t.Fatal(err)
	}

	r := c.berth("", "apply", "-y", "-f", conf, "--env", "LEARNING_RATE=0.002")
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	want := "train.py: lr 0.002 args ['--batch-size=64'] model uncommitted\nignored present: False\nrun.sh ran\nuntracked\n"
	if r.stdout != want {
		t.Errorf("apply: stdout %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "repo .: 7 files") || !strings.Contains(r.stderr, "uploading") {
		t.Errorf("first apply: stderr does not say it uploads the repo's 7 files:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "Not supported yet") {
		t.Errorf("the plan calls something of the example unsupported:\n%s", r.stderr)
	}

	// Unchanged: nothing is sent.
	r = c.berth("", "apply", "-y", "-f", conf, "--env", "LEARNING_RATE=0.002")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("second apply: %s", r)
	}
	if strings.Contains(r.stderr, "uploading") || !strings.Contains(r.stderr, "unchanged, the server has it") {
		t.Errorf("second apply of an unchanged tree: stderr does not say it sent nothing:\n%s", r.stderr)
	}

	// Changed: sent again, and the job sees the change.
	if err := os.WriteFile(filepath.Join(repo, "lib", "model.py"), []byte("NAME = 'changed'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = c.berth("", "apply", "-y", "-f", conf, "--env", "LEARNING_RATE=0.002")
	if r.code != 0 || !strings.Contains(r.stdout, "model changed") || !strings.Contains(r.stderr, "uploading") {
		t.Errorf("apply after a change: %s", r)
	}

	// --no-repo: the run carries nothing, and train.py is not there.
	r = c.berth("", "apply", "-y", "--no-repo", "-f", conf, "--env", "LEARNING_RATE=0.002")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "can't open file") {
		t.Errorf("apply --no-repo: want python's can't open file: %s", r)
	}

	// files: a file (its mode kept) and a directory, to the working
	// directory and to the job user's home.
	home := fmt.Sprintf("berth-e2e-files-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if h, err := os.UserHomeDir(); err == nil {
			os.RemoveAll(filepath.Join(h, home))
		}
	})
	if err := os.MkdirAll(filepath.Join(c.home, "cfg", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"tool.sh": 0o750, "cfg/a.yaml": 0o600, "cfg/sub/b.txt": 0o644} {
		if err := os.WriteFile(filepath.Join(c.home, p), []byte("content of "+p+"\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	files := c.writeConfig("files.yml", `type: task
name: carry-files
files:
  - tool.sh:bin/tool.sh
  - local_path: cfg
    path: ~/`+home+`/cfg
commands:
  - stat -c '%n %a' bin/tool.sh ~/`+home+`/cfg/a.yaml ~/`+home+`/cfg/sub/b.txt
  - cat ~/`+home+`/cfg/sub/b.txt
`)
	r = c.berth("", "apply", "-y", "-f", files)
	wantFiles := "bin/tool.sh 750\n"
	if r.code != 0 || !strings.HasPrefix(r.stdout, wantFiles) || !strings.Contains(r.stdout, "/cfg/a.yaml 600\n") ||
		!strings.Contains(r.stdout, "/cfg/sub/b.txt 644\ncontent of cfg/sub/b.txt\n") {
		t.Errorf("files: %s", r)
	}
}

// resources.disk: where the agent is root and has mkfs.ext4, the job's
// working directory is a file system of that size: writing past it fails
// with ENOSPC, and the plan does not call it unenforced.
func TestDiskIsEnforced(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("resources.disk is enforced by a root agent only")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 is not installed (make test-deps: scripts/test-disk.sh)")
	}
	c := newCluster(t)
	c.startServer("--agent-name", "disk-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "disk-node")
	conf := c.writeConfig("disk.yml", `type: task
name: fill-disk
resources:
  disk: 64MB
commands:
  - "df -P . | tail -1 | awk '{print \"size\", ($2 > 40000 && $2 < 70000) ? \"ok\" : $2}'"
  - "dd if=/dev/zero of=ok.bin bs=1M count=16 status=none && echo 16MB written"
  - "dd if=/dev/zero of=big.bin bs=1M count=100 status=none || echo dd failed: $?"
`)
	r := c.berth("", "apply", "-y", "-f", conf)
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	for _, want := range []string{"size ok\n", "16MB written\n", "No space left on device", "dd failed: 1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q: %s", want, r)
		}
	}
	if strings.Contains(r.stderr, "disk: not enforced") || strings.Contains(r.stdout, "not enforced") {
		t.Errorf("the plan or the job says the disk is not enforced: %s", r)
	}
	if strings.Contains(r.stderr, "Not supported yet") {
		t.Errorf("the plan calls resources.disk unsupported: %s", r)
	}
}
