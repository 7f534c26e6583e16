//go:build linux

package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// TestNativeTaskSSH: a plain task without an image (no dev environment,
// no container) is reached with OpenSSH's ssh: its shim serves the
// job's SSH endpoint. `berth attach` writes the entries and prints `ssh
// RUN`; a session runs as the job's user, in its working directory,
// environment and control group (compared with what the job itself
// wrote); ssh -L reaches a server the job started on its node's
// loopback; `ssh RUN-1-0` reaches the second job of the two-node run
// (dstack's name for it); the server's SSH gateway reaches both with a
// registered key (sshGateway).
func TestNativeTaskSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client (make test-deps installs openssh-client)")
	}
	t.Parallel()
	c := newCluster(t)
	gwPort := freeTCPPort(t)
	srv := c.startServer("--no-local-agent", "--ssh-listen", fmt.Sprintf("127.0.0.1:%d", gwPort))
	srv.startAgent("nssh-a", filepath.Join(c.home, "data-a"), "--cpus", "1")
	srv.startAgent("nssh-b", filepath.Join(c.home, "data-b"), "--cpus", "1")
	c.waitNodes(30*time.Second, "nssh-a", "nssh-b")
	jobPort := freeTCPPort(t)
	cfg := c.writeConfig("nattask.yml", fmt.Sprintf(`
type: task
name: nattask
nodes: 2
resources: {cpu: 1}
env:
  - GREETING=hello from the spec
commands:
  - id -un > whoami-$BERTH_NODE_RANK; pwd > where-$BERTH_NODE_RANK; cat /proc/self/cgroup > cgroup-$BERTH_NODE_RANK
  - if [ "$BERTH_NODE_RANK" = 0 ]; then echo from-the-task > hello.txt; (python3 -m http.server %d --bind 127.0.0.1 >/dev/null 2>&1 &); fi
  - echo ready
  - sleep 300
`, jobPort))
	if r := c.berth("", "apply", "-y", "--detach", "-f", cfg); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitRun("nattask", 60*time.Second, "running", func(r *api.Run) bool { return r.Status == api.StatusRunning })
	c.waitLog("nattask", "ready", 60*time.Second)

	// berth attach: the SSH entries, and no port to forward.
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	attach := exec.CommandContext(ctx, berthBin, "attach", "nattask")
	attach.Env = c.env("HOME=" + home)
	attach.Dir = c.home
	out, err := attach.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	attach.Stderr = os.Stderr
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = attach.Process.Kill(); _ = attach.Wait() })
	lines := bufio.NewScanner(out)
	var said []string
	for lines.Scan() {
		said = append(said, lines.Text())
		if strings.HasPrefix(lines.Text(), "Other jobs of the run:") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if want := []string{"To connect with SSH: ssh nattask", "Other jobs of the run: ssh nattask-1-0"}; strings.Join(said, "\n") != strings.Join(want, "\n") {
		t.Fatalf("berth attach of a native task said:\n%s\nwant:\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	}
	sshCfg := filepath.Join(c.home, "ssh", "config")
	ssh := func(host, command string) string {
		t.Helper()
		cmd := c.sshClient(ctx, home, "-F", sshCfg, host, command)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ssh %s %q: %v\n%s", host, command, err, b)
		}
		return string(b)
	}

	// ssh RUN: the master job's user, directory, environment and group.
	for rank, host := range []string{"nattask", "nattask-1-0"} {
		got := ssh(host, `id -un; pwd; echo "$BERTH_RUN_NAME $BERTH_NODE_RANK $GREETING"; echo ---; cat /proc/self/cgroup; echo ---; cat whoami-$BERTH_NODE_RANK where-$BERTH_NODE_RANK; echo ---; cat cgroup-$BERTH_NODE_RANK`)
		parts := strings.Split(got, "---\n")
		if len(parts) != 4 {
			t.Errorf("ssh %s: %q", host, got)
			continue
		}
		session, job := strings.Split(strings.TrimSpace(parts[0]), "\n"), strings.Split(strings.TrimSpace(parts[2]), "\n")
		if want := fmt.Sprintf("nattask %d hello from the spec", rank); len(session) != 3 || len(job) != 2 || session[0] != job[0] || session[1] != job[1] || session[2] != want {
			t.Errorf("ssh %s: user, directory, environment %q; want the job's %q and %q", host, session, job, want)
		}
		if parts[1] != parts[3] {
			t.Errorf("ssh %s: the session's control groups\n%s\nare not the job's\n%s", host, parts[1], parts[3])
		}
	}
	// The exit status.
	if err := c.sshClient(ctx, home, "-F", sshCfg, "nattask", "exit 7").Run(); err == nil || err.(*exec.ExitError).ExitCode() != 7 {
		t.Errorf("ssh nattask 'exit 7': %v, want exit status 7", err)
	}

	// ssh -L to a server the task started on its node's loopback.
	fwd := freeTCPPort(t)
	tunnel := c.sshClient(ctx, home, "-F", sshCfg, "-N", "-L", fmt.Sprintf("127.0.0.1:%d:localhost:%d", fwd, jobPort), "nattask")
	tunnel.Stderr = os.Stderr
	if err := tunnel.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tunnel.Process.Kill(); _ = tunnel.Wait() })
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/hello.txt", fwd)); got != "from-the-task\n" {
		t.Errorf("GET through ssh -L: %q", got)
	}
	_ = tunnel.Process.Kill()

	sshGateway(t, c, gwPort, "nattask", "nattask-1-0")
	c.mustBerth("stop", "--abort", "nattask")
	c.waitFinished("nattask", 60*time.Second)
}
