package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/cgroup"
)

// TestShimNativeSSH: the shim of a job without a container serves SSH on
// a socket in the job's directory once the job has lived a moment, and
// each session is the job's: its user (the job's credential, where the
// test runs as root), its working directory and environment, its control
// group (where this host has them); stdin, the exit status, a terminal of
// the client's size owned by the job's user, and a connection forwarded
// from the host. A session still running when the job ends ends with it,
// and the socket goes.
func TestShimNativeSSH(t *testing.T) {
	dir := t.TempDir()
	// The job's user may not pass through the test's own 0700 directory.
	work, err := os.MkdirTemp("", "berth-ssh-work-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("berth-ssh-session-%d", os.Getpid())
	sp := shimSpec{Script: "echo up; sleep 120", Dir: work,
		Env: []string{"PATH=" + os.Getenv("PATH"), "BERTH_RUN_NAME=sshjob", "GREETING=hello there"}}
	uid := os.Getuid()
	var group string
	if os.Geteuid() == 0 {
		// As an agent running as root runs a job of another user.
		uid = 65534
		sp.Cred = &jobCred{UID: 65534, GID: 65534, Login: "nobody"}
		sp.UserDir = work // where the agent writes the script of a job run as its user
		if err := os.WriteFile(filepath.Join(work, fileScript), []byte(sp.Script), 0o644); err != nil {
			t.Fatal(err)
		}
		if h, err := cgroup.Detect(); err == nil {
			sp.Cgroup = testGroup(t, h, 0, 1)
			sp.Cgroup.Owner = 65534
			group = "/" + filepath.Base(sp.Cgroup.Dirs()[0]) + "\n" // the group's name ends its path in each hierarchy
		}
	}
	b, _ := json.Marshal(sp)
	if err := os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600); err != nil {
		t.Fatal(err)
	}
	shim := execShim(dir)
	if err := shim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shim.Process.Kill(); _ = shim.Wait() })

	sock := filepath.Join(dir, fileNativeSSH)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, fileExit))
			t.Fatalf("no SSH socket %s after 30s (exit.json %s)", sock, b)
		}
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v (%v), want 0600: only the agent may reach it", fi.Mode().Perm(), err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(c, "job", &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	cl := ssh.NewClient(sc, chans, reqs)
	defer cl.Close()

	// A command: the job's user, directory, environment and group; stdin.
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	s.Stdin = strings.NewReader("typed\n")
	out, err := s.CombinedOutput(`id -u; pwd; echo "$GREETING $BERTH_RUN_NAME"; cat; cat /proc/self/cgroup`)
	if err != nil {
		t.Fatalf("session: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 4 || lines[0] != strconv.Itoa(uid) || lines[1] != work || lines[2] != "hello there sshjob" || lines[3] != "typed" {
		t.Errorf("session said %q; want uid %d, %s, the job's environment, stdin", out, uid, work)
	}
	if group != "" && !strings.Contains(string(out), group) {
		t.Errorf("the session is not in the job's group %s:\n%s", group, out)
	}

	// The exit status.
	s, _ = cl.NewSession()
	var ee *ssh.ExitError
	if err := s.Run("exit 5"); !errors.As(err, &ee) || ee.ExitStatus() != 5 {
		t.Errorf("exit 5: %v, want exit status 5", err)
	}

	// A terminal of the client's size, the job's user's.
	s, _ = cl.NewSession()
	if err := s.RequestPty("xterm", 33, 101, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	out, err = s.Output(`stty size; stat -c %u "$(tty)"; echo "term=$TERM"`)
	if err != nil {
		t.Fatalf("session with a terminal: %v\n%s", err, out)
	}
	if got := strings.ReplaceAll(string(out), "\r", ""); got != fmt.Sprintf("33 101\n%d\nterm=xterm\n", uid) {
		t.Errorf("session with a terminal said %q; want its size 33 101, owner %d, TERM xterm", got, uid)
	}

	// ssh -L: dialled from the host, the job's network.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			_, _ = io.WriteString(conn, "from-the-host\n")
			conn.Close()
		}
	}()
	fc, err := cl.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(fc); err != nil || string(b) != "from-the-host\n" {
		t.Errorf("forwarded connection read %q, %v", b, err)
	}
	fc.Close()

	// A session still running when the job ends ends with it (in no
	// group: it leads a process group out of the job's).
	s, _ = cl.NewSession()
	if err := s.Start("exec -a " + marker + " sleep 300"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(processesNamed(marker)) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if len(processesNamed(marker)) == 0 {
		t.Fatal("the session's command did not start")
	}
	_ = unix.Kill(shim.Process.Pid, sigAbort)
	if err := shim.Wait(); err != nil {
		t.Fatalf("shim: %v", err)
	}
	var ex shimExit
	if err := readJSON(filepath.Join(dir, fileExit), &ex); err != nil || ex.Reason != exitAborted {
		t.Errorf("exit %+v, %v; want aborted", ex, err)
	}
	if pids := processesNamed(marker); len(pids) > 0 {
		t.Errorf("a session's process outlived its job: %v", pids)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the SSH socket outlived its job: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the session did not end with its job")
	}
}
