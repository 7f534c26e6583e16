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
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
)

// TestContainerSSH: a dev environment with `image:` is reached with
// OpenSSH's ssh although Berth's binary is not in the image (its shim
// serves SSH on the host and runs each session through the engine's
// exec): `berth apply` prints the IDE link and writes the SSH entry; a
// command runs in the container as the job's user, in its working
// directory and environment, with stdin and the exit status passed; a
// session with a terminal gets one; ssh -L reaches a server listening on
// the container's own loopback. A plain container task is reached the
// same way through `berth attach`, and through the server's SSH gateway
// with a registered key and no token (sshGateway); an idle containerised
// dev environment ends done after its inactivity_duration.
func TestContainerSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client (make test-deps installs openssh-client)")
	}
	t.Parallel()
	e := containertest.Engine(t)
	c := newCluster(t)
	node := fmt.Sprintf("ssh-ctr-%d", time.Now().UnixNano()%1e9)
	// Four CPUs and runs of one: each container is on a bridge network of
	// its own, so its localhost is not the host's.
	gwPort := freeTCPPort(t)
	c.startServer("--agent-name", node, "--cpus", "4", "--stop-grace", "5s", "--ssh-listen", fmt.Sprintf("127.0.0.1:%d", gwPort))
	c.waitNodes(30*time.Second, node)
	t.Cleanup(func() {
		left, _ := e.Find(context.Background(), map[string]string{container.LabelNode: node})
		for _, ct := range left {
			t.Errorf("container %s outlived its run", ct.Name)
			_ = ct.Remove(context.Background())
		}
	})
	jobPort := freeTCPPort(t)
	cfg := c.writeConfig("ctrdev.yml", fmt.Sprintf(`
type: dev-environment
name: ctrbox
ide: vscode
image: %s
working_dir: /tmp
resources: {cpu: 1}
init:
  - mkdir -p /tmp/www && echo from-the-container > /tmp/www/hello.txt
  - id -u > /tmp/job-uid
  - httpd -p 127.0.0.1:%d -h /tmp/www
`, containertest.Image, jobPort))

	// berth apply (attached): the IDE link and the ssh command.
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apply := exec.CommandContext(ctx, berthBin, "apply", "-y", "-f", cfg)
	apply.Env = c.env("HOME=" + home)
	apply.Dir = c.home
	apply.Stdout = io.Discard
	errPipe, err := apply.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apply.Process.Kill(); _ = apply.Wait() })
	lines := bufio.NewScanner(errPipe)
	var said []string
	link := regexp.MustCompile(`^To open in VS Code: vscode://vscode-remote/ssh-remote\+ctrbox/tmp$`)
	sawSSH, sawLink := false, false
	for !sawLink && lines.Scan() {
		said = append(said, lines.Text())
		sawSSH = sawSSH || lines.Text() == "To connect with SSH: ssh ctrbox"
		sawLink = link.MatchString(lines.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()
	if !sawSSH || !sawLink {
		t.Fatalf("berth apply of a dev environment in a container did not print the ssh command and the IDE link:\n%s", strings.Join(said, "\n"))
	}
	sshCfg := filepath.Join(c.home, "ssh", "config")
	ssh := func(stdin string, args ...string) (string, int) {
		t.Helper()
		cmd := c.sshClient(ctx, home, append([]string{"-F", sshCfg}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("ssh %v: %v", args, err)
		}
		return string(out), 0
	}

	// A command: in the container, as the job's user, in its working
	// directory and environment; stdin reaches it.
	got, code := ssh("typed\n", "ctrbox", `test -f /.dockerenv && echo container; echo $BERTH_RUN_NAME; id -u; cat /tmp/job-uid; pwd; cat`)
	lns := strings.Split(strings.TrimSpace(got), "\n")
	if code != 0 || len(lns) != 6 || lns[0] != "container" || lns[1] != "ctrbox" || lns[2] != lns[3] || lns[4] != "/tmp" || lns[5] != "typed" {
		t.Errorf("ssh ctrbox '…': exit %d, %q; want container, ctrbox, the job's uid twice, /tmp, typed", code, got)
	}
	if _, code := ssh("", "ctrbox", "exit 7"); code != 7 {
		t.Errorf("ssh ctrbox 'exit 7': exit status %d, want 7", code)
	}
	// A terminal: the session has one, of the client's type.
	got, code = ssh("", "-tt", "ctrbox", "tty; echo term=$TERM")
	if code != 0 || !strings.Contains(got, "/dev/pts/") || !regexp.MustCompile(`term=\S`).MatchString(got) {
		t.Errorf("ssh -tt ctrbox 'tty': exit %d, %q; want a /dev/pts terminal", code, got)
	}

	// ssh -L to the container's own localhost.
	fwd := freeTCPPort(t)
	tunnel := c.sshClient(ctx, home, "-F", sshCfg, "-N", "-L", fmt.Sprintf("127.0.0.1:%d:localhost:%d", fwd, jobPort), "ctrbox")
	tunnel.Stderr = os.Stderr
	if err := tunnel.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tunnel.Process.Kill(); _ = tunnel.Wait() })
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/hello.txt", fwd)); got != "from-the-container\n" {
		t.Errorf("GET through ssh -L to the container's localhost: %q", got)
	}
	_ = tunnel.Process.Kill()

	// A plain task in a container: `berth attach` sets up `ssh RUN`.
	task := c.writeConfig("ctrtask.yml", fmt.Sprintf(`
type: task
name: ctrtask
image: %s
resources: {cpu: 1}
commands:
  - echo started
  - sleep 300
`, containertest.Image))
	if r := c.berth("", "apply", "-y", "--detach", "-f", task); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitRun("ctrtask", 90*time.Second, "running", func(r *api.Run) bool { return r.Status == api.StatusRunning })
	attach := exec.CommandContext(ctx, berthBin, "attach", "ctrtask")
	attach.Env = c.env("HOME=" + home)
	attach.Dir = c.home
	aout, err := attach.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = attach.Process.Kill(); _ = attach.Wait() })
	asaid := bufio.NewScanner(aout)
	for asaid.Scan() && asaid.Text() != "To connect with SSH: ssh ctrtask" {
	}
	go func() { _, _ = io.Copy(io.Discard, aout) }()
	if got, code := ssh("", "ctrtask", "test -f /.dockerenv && echo $BERTH_RUN_NAME"); code != 0 || got != "ctrtask\n" {
		t.Errorf("ssh ctrtask: exit %d, %q; want ctrtask", code, got)
	}
	sshGateway(t, c, gwPort, "ctrtask", "")
	c.mustBerth("stop", "--abort", "ctrtask")
	c.mustBerth("stop", "--abort", "ctrbox")
	c.waitFinished("ctrtask", 60*time.Second)
	c.waitFinished("ctrbox", 60*time.Second)

	// Nobody connects: done after inactivity_duration, saying why.
	idle := c.writeConfig("ctridle.yml", fmt.Sprintf(`
type: dev-environment
name: ctridle
ide: cursor
image: %s
resources: {cpu: 1}
inactivity_duration: 2s
`, containertest.Image))
	if r := c.berth("", "apply", "-y", "--detach", "-f", idle); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	if run := c.waitFinished("ctridle", 90*time.Second); run.Status != api.StatusDone {
		t.Errorf("idle dev environment in a container ended %s, want done", run.Status)
	}
	if out, _ := c.berthCombined("logs", "ctridle"); !strings.Contains(out, "no SSH connection for 2s (inactivity_duration)") {
		t.Errorf("its log does not say why it ended: %q", out)
	}
}

// sshGateway: OpenSSH with a key registered by `berth ssh-key add`, and
// no token or berth in its environment, reaches the running ctrtask
// through the server's SSH gateway (ProxyJump); an unregistered key, a
// removed one and another user's key do not. run is the running run to
// reach (ctrtask is the one of TestContainerSSH); other, when given, the
// host name of its second job (RUN-1-0), reached the same way.
func sshGateway(t *testing.T, c *cluster, gwPort int, run, other string) {
	home := t.TempDir()
	for _, name := range []string{"mine", "other", "stranger"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name+"@e2e", "-f", filepath.Join(home, name)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	out := c.mustBerth("ssh-key", "add", filepath.Join(home, "mine.pub"))
	if !regexp.MustCompile(`^Added ssh-ed25519 key SHA256:\S+ \(mine@e2e\) for user \S+\n$`).MatchString(out) {
		t.Errorf("berth ssh-key add: %q", out)
	}
	if r := c.berth("", "ssh-key", "add", filepath.Join(home, "mine")); r.code == 0 || !strings.Contains(r.stderr, "is a private key") {
		t.Errorf("berth ssh-key add of a private key: %s", r)
	}
	if out := c.mustBerth("ssh-key", "list"); !strings.Contains(out, "mine@e2e") {
		t.Errorf("berth ssh-key list does not show the key:\n%s", out)
	}
	// Another user registers their key: it does not reach this user's run.
	c.mustBerth("user", "create", "gwother")
	tok := strings.TrimSpace(c.mustBerth("token", "create", "--user", "gwother"))
	add := exec.Command(berthBin, "ssh-key", "add", filepath.Join(home, "other.pub"))
	add.Env = c.env("BERTH_TOKEN=" + tok)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("gwother: berth ssh-key add: %v\n%s", err, out)
	}

	// No BERTH_* variable, no berth on the way: ssh and the key only.
	cfg := filepath.Join(home, "config")
	write := func(key string) {
		text := fmt.Sprintf(`Host gw
  HostName 127.0.0.1
  Port %d
  User berth
  IdentityFile %s
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode yes
  LogLevel ERROR
Host %s %s
  ProxyJump gw
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode yes
  LogLevel ERROR
`, gwPort, filepath.Join(home, key), run, other)
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sshTo := func(host, command string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ssh", "-F", cfg, host, command)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("ssh: %v", err)
		}
		return string(out), 0
	}
	ssh := func() (string, int) { return sshTo(run, "echo $BERTH_RUN_NAME; exit 3") }
	write("mine")
	if got, code := ssh(); code != 3 || got != run+"\n" {
		t.Errorf("ssh -J gateway %s with a registered key: exit %d, %q; want exit 3, %s", run, code, got, run)
	}
	if other != "" {
		if got, code := sshTo(other, "echo $BERTH_RUN_NAME $BERTH_NODE_RANK"); code != 0 || got != run+" 1\n" {
			t.Errorf("ssh -J gateway %s: exit %d, %q; want %s 1 (its second job)", other, code, got, run)
		}
	}
	for _, key := range []string{"stranger", "other"} {
		write(key)
		if got, code := ssh(); code != 255 || strings.Contains(got, run+"\n") {
			t.Errorf("ssh through the gateway with %s's key: exit %d, %q; want refused (255)", key, code, got)
		}
	}
	c.mustBerth("ssh-key", "remove", filepath.Join(home, "mine.pub"))
	write("mine")
	if got, code := ssh(); code != 255 {
		t.Errorf("ssh through the gateway with a removed key: exit %d, %q; want refused (255)", code, got)
	}
}
