//go:build linux

package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// freeTCPPort is a port free on 127.0.0.1 a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// sshClient runs Debian's OpenSSH client with the cluster's environment
// and a HOME of the test's.
func (c *cluster) sshClient(ctx context.Context, home string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ssh", args...)
	cmd.Env = c.env("HOME=" + home)
	cmd.Dir = c.home
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// httpGet fetches url, retrying for a while (the server in the job may
// not listen yet).
func httpGet(t *testing.T, url string) string {
	t.Helper()
	var last error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return string(b)
		}
		last = fmt.Errorf("status %d, %v", resp.StatusCode, err)
	}
	t.Fatalf("GET %s: %v", url, last)
	return ""
}

// TestDevEnvironmentSSH: a dev environment runs its init and is reached
// with OpenSSH's ssh through the ProxyCommand `berth attach` writes: the
// session runs in the job (its run name, its user, its working
// directory); `berth attach` forwards the run's port to an HTTP server
// the init started, and so does `ssh -L`.
func TestDevEnvironmentSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client (make test-deps installs openssh-client)")
	}
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "dev-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "dev-node")
	jobPort, localPort := freeTCPPort(t), freeTCPPort(t)
	cfg := c.writeConfig("dev.yml", fmt.Sprintf(`
type: dev-environment
name: devbox
ide: vscode
ports: ["%d:%d"]
init:
  - echo from-the-job > hello.txt
  - (python3 -m http.server %d --bind 127.0.0.1 >/dev/null 2>&1 &)
`, localPort, jobPort, jobPort))
	if r := c.berth("", "apply", "-y", "--detach", "-f", cfg); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitRun("devbox", 60*time.Second, "running", func(r *api.Run) bool { return r.Status == api.StatusRunning })

	// berth attach: the forwarded port, and the SSH entry.
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	attach := exec.CommandContext(ctx, berthBin, "attach", "devbox")
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
	var url string
	forwarded := regexp.MustCompile(`^Forwarded (http://localhost:\d+) → port (\d+) of run devbox$`)
	for lines.Scan() {
		line := lines.Text()
		if m := forwarded.FindStringSubmatch(line); m != nil {
			url = m[1]
			if m[2] != strconv.Itoa(jobPort) {
				t.Errorf("attach forwarded job port %s, want %d", m[2], jobPort)
			}
		}
		if line == "To connect with SSH: ssh devbox" {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if want := fmt.Sprintf("http://localhost:%d", localPort); url != want {
		t.Errorf("attach forwarded to %q, want %q (the configuration's local port)", url, want)
	}
	if url != "" {
		if got := httpGet(t, url+"/hello.txt"); got != "from-the-job\n" {
			t.Errorf("GET through berth attach: %q", got)
		}
	}
	sshCfg := filepath.Join(c.home, "ssh", "config")
	if b, err := os.ReadFile(filepath.Join(home, ".ssh", "config")); err != nil || !strings.Contains(string(b), "Include "+sshCfg) {
		t.Errorf("~/.ssh/config does not include %s: %q, %v", sshCfg, b, err)
	}

	// ssh RUN: a session in the job.
	ssh := c.sshClient(ctx, home, "-F", sshCfg, "devbox", `echo $BERTH_RUN_NAME; id -u; pwd; cat hello.txt`)
	got, err := ssh.CombinedOutput()
	if err != nil {
		t.Fatalf("ssh devbox: %v\n%s", err, got)
	}
	lns := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lns) != 4 || lns[0] != "devbox" || lns[1] != strconv.Itoa(os.Getuid()) || !strings.HasSuffix(lns[2], "/work") || lns[3] != "from-the-job" {
		t.Errorf("ssh devbox 'echo $BERTH_RUN_NAME; id -u; pwd; cat hello.txt': %q; want devbox, %d, the job's work directory, from-the-job", got, os.Getuid())
	}
	// The exit status comes back.
	if err := c.sshClient(ctx, home, "-F", sshCfg, "devbox", "exit 7").Run(); err == nil || err.(*exec.ExitError).ExitCode() != 7 {
		t.Errorf("ssh devbox 'exit 7': %v, want exit status 7", err)
	}

	// ssh -L: a port forwarded by the SSH endpoint.
	fwd := freeTCPPort(t)
	tunnel := c.sshClient(ctx, home, "-F", sshCfg, "-N", "-L", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:%d", fwd, jobPort), "devbox")
	if err := tunnel.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tunnel.Process.Kill(); _ = tunnel.Wait() })
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/hello.txt", fwd)); got != "from-the-job\n" {
		t.Errorf("GET through ssh -L: %q", got)
	}
	c.mustBerth("stop", "--abort", "devbox")
	c.waitFinished("devbox", 60*time.Second)
}

// TestDevEnvironmentInactivity: a dev environment nobody connects to ends
// after its inactivity_duration, done, saying why.
func TestDevEnvironmentInactivity(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "idle-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "idle-node")
	cfg := c.writeConfig("idle.yml", `
type: dev-environment
name: idlebox
ide: cursor
inactivity_duration: 2s
`)
	if r := c.berth("", "apply", "-y", "--detach", "-f", cfg); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	run := c.waitFinished("idlebox", 90*time.Second)
	if run.Status != api.StatusDone {
		t.Errorf("idle dev environment ended %s, want done", run.Status)
	}
	if out, _ := c.berthCombined("logs", "idlebox"); !strings.Contains(out, "no SSH connection for 2s (inactivity_duration)") {
		t.Errorf("its log does not say why it ended: %q", out)
	}
}
