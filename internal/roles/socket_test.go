package roles

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/cli"
)

// TestMain lets the test binary be berth itself (BERTH_TEST_MAIN=1): the
// server, its agent's shims and the clients these tests start.
func TestMain(m *testing.M) {
	if os.Getenv("BERTH_TEST_MAIN") == "1" {
		cli.Register(Register) // as cmd/berth does: the roles and the Slurm commands
		cli.Register(cli.SlurmCommands)
		os.Exit(cli.Main(cli.Argv(os.Args), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// socketWorld is a real `berth server` (a process, with its local agent
// as root) whose agent listens on a socket in a directory any user reaches,
// and a throwaway Unix user of this host.
type socketWorld struct {
	bin, sock, shared, home string
	user                    *user.User
	uid, gid                uint32
}

func newSocketWorld(t *testing.T) *socketWorld {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes a Unix user and runs clients as them")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd")
	}
	w := &socketWorld{}
	// A directory every user reaches (t.TempDir's are 0700): the binary,
	// the socket and the clients' working directory.
	var err error
	if w.shared, err = os.MkdirTemp("", "berth-socket-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(w.shared) })
	if err := os.Chmod(w.shared, 0o777); err != nil {
		t.Fatal(err)
	}
	w.bin = filepath.Join(w.shared, "berth")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	w.sock = filepath.Join(w.shared, "berth.sock")
	w.home = t.TempDir()

	w.user, w.uid, w.gid = newUnixUser(t)

	// Jobs run as their users, in directories of theirs under the spool,
	// which is made here rather than in /var/spool/berth.
	srv := exec.Command(w.bin, "server", "--listen", "127.0.0.1:0", "--socket", w.sock, "--agent-name", "sock-node",
		"--cpus", "2", "--memory", "1GB", "--no-cgroups", "--metrics-interval", "0", "--spool-dir", filepath.Join(w.shared, "spool"))
	srv.Env = append(baseEnv(), "BERTH_HOME="+w.home)
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = srv.Process.Kill()
			<-done
		}
	})
	// The server says when its socket is up; the rest of its log goes to
	// the test's when it fails.
	up := make(chan struct{})
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "local socket: this host's users need no token") {
				once = true
				close(up)
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server's socket did not come up")
	}
	return w
}

// newUnixUser makes a throwaway Unix user of this host (no home), removed
// after the test.
func newUnixUser(t *testing.T) (u *user.User, uid, gid uint32) {
	t.Helper()
	name := fmt.Sprintf("berthtest%d", rand.IntN(1_000_000))
	if out, err := exec.Command("useradd", "-M", "-s", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.Atoi(u.Uid)
	g, _ := strconv.Atoi(u.Gid)
	return u, uint32(id), uint32(g)
}

// baseEnv is the environment of the processes the test starts: no Berth
// variable of the test's own, and the switch that makes the test binary
// berth.
func baseEnv() []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "BERTH_TEST_MAIN=1"}
}

// run runs berth args as uid (0: root) with no token and no configuration:
// only the socket's path.
func (w *socketWorld) run(t *testing.T, uid, gid uint32, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Env = append(baseEnv(), "HOME="+w.shared, "BERTH_SOCKET="+w.sock)
	cmd.Dir = w.shared
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("berth %v as uid %d: timed out; output:\n%s", args, uid, out.String())
		return "", nil
	}
}

// TestSocketIdentity is the end state: a fresh Unix user of the
// host, with no environment variable and no configuration file, submits
// with sbatch through the local agent's socket; squeue shows their login;
// their log streams back through the socket; they are not an admin, root
// is; a second UID is told apart from the first.
func TestSocketIdentity(t *testing.T) {
	w := newSocketWorld(t)
	login := w.user.Username

	out, err := w.run(t, w.uid, w.gid, "sbatch", "--parsable", "--wrap", "hostname")
	if err != nil {
		t.Fatalf("sbatch as %s: %v\n%s", login, err, out)
	}
	id := strings.TrimSpace(out)
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch --parsable printed %q", out)
	}
	// sbatch's output goes to slurm-ID.out in the submit directory; the
	// wait for the end streams through the socket.
	if out, err := w.run(t, w.uid, w.gid, "logs", "-f", id); err != nil {
		t.Errorf("berth logs -f %s as %s through the socket: %v\n%s", id, login, err, out)
	}
	host, _ := os.Hostname()
	if b, err := os.ReadFile(filepath.Join(w.shared, "slurm-"+id+".out")); err != nil || strings.TrimSpace(string(b)) != host {
		t.Errorf("slurm-%s.out: %q %v, want %s", id, b, err, host)
	}
	// A run's output streamed back through the socket as it comes.
	yml := filepath.Join(w.shared, "hello.berth.yml")
	if err := os.WriteFile(yml, []byte("type: task\ncommands: [\"echo hello from the socket\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := w.run(t, w.uid, w.gid, "apply", "-y", "-f", yml); err != nil || !strings.Contains(out, "hello from the socket") {
		t.Errorf("berth apply as %s through the socket: %v\n%s", login, err, out)
	}

	out, err = w.run(t, w.uid, w.gid, "sbatch", "--parsable", "--hold", "--wrap", "sleep 60")
	if err != nil {
		t.Fatalf("sbatch --hold: %v\n%s", err, out)
	}
	held := strings.TrimSpace(out)
	out, err = w.run(t, w.uid, w.gid, "squeue")
	if err != nil {
		t.Fatalf("squeue as %s: %v\n%s", login, err, out)
	}
	row := regexp.MustCompile(`(?m)^\s*` + held + `\s.*$`).FindString(out)
	if !strings.Contains(row, login[:8]) { // squeue's USER is 8 wide, as Slurm's
		t.Errorf("squeue's row of %s does not name %s:\n%s", held, login, out)
	}
	if out, err := w.run(t, w.uid, w.gid, "scancel", held); err != nil {
		t.Errorf("scancel %s as %s: %v\n%s", held, login, err, out)
	}

	// Not an admin; root through the same socket is.
	if out, err := w.run(t, w.uid, w.gid, "user", "list"); err == nil || !strings.Contains(out, "admin") {
		t.Errorf("berth user list as %s: %v\n%s; want refused (it takes an admin)", login, err, out)
	}
	out, err = w.run(t, 0, 0, "user", "list")
	if err != nil || !strings.Contains(out, login) {
		t.Errorf("berth user list as root through the socket: %v\n%s; want it, with %s made by their first request", err, out, login)
	}
	// A UID with no login on the host is refused.
	if out, err := w.run(t, 54321, 54321, "ps"); err == nil || !strings.Contains(out, "no login") {
		t.Errorf("berth ps as UID 54321 (no login): %v\n%s; want refused", err, out)
	}
}

// TestJobSeesNoCredential: a job's environment, and the files of its own
// directory, hold no user's, admin's or node's token and no way to one
// (BERTH_HOME, BERTH_TOKEN); only its run's credential, with which srun
// inside the job makes a step.
func TestJobSeesNoCredential(t *testing.T) {
	w := newSocketWorld(t)
	cfg, err := cli.ReadClientConfig(filepath.Join(w.home, "config.yml"))
	if err != nil || cfg.Token == "" {
		t.Fatalf("the server's client configuration: %+v %v", cfg, err)
	}
	script := `env; echo ---; for f in "$BERTH_JOB_DIR"/* "$BERTH_JOB_DIR"/.*; do [ -f "$f" ] && cat "$f"; done; echo ---; ` +
		w.bin + ` srun -n1 echo step-ok`
	out, err := w.run(t, w.uid, w.gid, "sbatch", "--parsable", "--wrap", script)
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	if out, err := w.run(t, w.uid, w.gid, "logs", "-f", id); err != nil {
		t.Fatalf("logs: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(w.shared, "slurm-"+id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	out = string(b)
	for _, leak := range []string{cfg.Token, "berthnode_", "BERTH_HOME=", "BERTH_TOKEN=", filepath.Join(w.home, "config.yml")} {
		if strings.Contains(out, leak) {
			t.Errorf("the job saw %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{"BERTH_JOB_TOKEN=bjob_" + id + "_", "BERTH_URL=http://127.0.0.1:", "step-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("the job's output lacks %q:\n%s", want, out)
		}
	}
}
