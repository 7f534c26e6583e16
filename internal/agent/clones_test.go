package agent

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// gitRun runs git in dir, failing the test on an error.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// testGitServer serves a bare repository (main: two commits, hello.txt
// "v1" then "v2"; dev: dev.txt) over Git's smart HTTP (git http-backend
// as a CGI), asking for Basic credentials user:token. It returns the
// repository's URL and the first commit's hash.
func testGitServer(t *testing.T, user, token string) (url, first string) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gitRun(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "hello.txt"), []byte("v1\n"), 0o644)
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "-q", "-m", "one")
	first = gitRun(t, work, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(work, "hello.txt"), []byte("v2\n"), 0o644)
	gitRun(t, work, "commit", "-q", "-am", "two")
	gitRun(t, work, "checkout", "-q", "-b", "dev")
	os.WriteFile(filepath.Join(work, "dev.txt"), []byte("on dev\n"), 0o644)
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "-q", "-m", "dev")
	gitRun(t, work, "checkout", "-q", "main")
	gitRun(t, root, "clone", "-q", "--bare", work, filepath.Join(root, "repo.git"))

	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Dir: root,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git", first
}

// A repo given by URL is cloned before the commands run, with the token
// the server put in as HTTP credentials: the default branch shallow, a
// branch into a directory, a commit by its hash; a wrong token fails the
// job at its start with git's words and without the token.
func TestClonesFromAGitServer(t *testing.T) {
	url, first := testGitServer(t, "oauth2", "tok-123456")
	a := testAgent(t)
	start := func(id int64, c api.Clone, cmds ...string) *localJob {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.startLocked(api.Assignment{JobID: id, RunID: 90, Alloc: api.Alloc{CPUs: 1}, Commands: cmds,
			Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, Clones: []api.Clone{c}})
		return a.jobs[id]
	}
	cases := []struct {
		clone api.Clone
		cmds  []string
		want  string
	}{
		{api.Clone{URL: url, Dest: ".", Username: "oauth2", Token: "tok-123456"},
			[]string{"cat hello.txt", "git rev-list --count HEAD", "git rev-parse --abbrev-ref HEAD"}, "v2\n1\nmain\n"},
		{api.Clone{URL: url, Branch: "dev", Dest: "src", Username: "oauth2", Token: "tok-123456"},
			[]string{"cat src/dev.txt src/hello.txt", "git -C src rev-parse --abbrev-ref HEAD"}, "on dev\nv2\ndev\n"},
		{api.Clone{URL: url, Hash: first, Dest: ".", Username: "oauth2", Token: "tok-123456"},
			[]string{"cat hello.txt", "git rev-parse HEAD"}, "v1\n" + first + "\n"},
		{api.Clone{URL: url, Hash: first[:8], Dest: ".", Username: "oauth2", Token: "tok-123456"},
			[]string{"cat hello.txt"}, "v1\n"},
	}
	for i, c := range cases {
		j := start(int64(91+i), c.clone, c.cmds...)
		waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
		out, stderr := jobOutput(t, j.dir)
		if j.exit.ExitCode != 0 || out != c.want {
			t.Errorf("clone %+v: exit %+v, output %q, want %q (stderr %q)", c.clone, j.exit, out, c.want, stderr)
		}
		if !strings.Contains(stderr, "berth: cloned "+url) {
			t.Errorf("clone %+v: the output does not say what was cloned: %q", c.clone, stderr)
		}
	}

	j := start(99, api.Clone{URL: url, Dest: ".", Username: "oauth2", Token: "wrong-token-789"}, "echo ran")
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	out, stderr := jobOutput(t, j.dir)
	if j.exit.Reason != exitStartFailed || out != "" || !strings.Contains(j.exit.Message, "clone "+url) ||
		!strings.Contains(j.exit.Message, "the server refused the project's secret GIT_TOKEN as user oauth2") {
		t.Errorf("a clone with a wrong token: exit %+v, output %q", j.exit, out)
	}
	if strings.Contains(j.exit.Message+stderr, "wrong-token-789") {
		t.Errorf("the token is in the job's output or message: %q %q", j.exit.Message, stderr)
	}

	// A destination that is not empty: an error, or left as it is.
	j = start(100, api.Clone{URL: url, Dest: "/", Username: "oauth2", Token: "tok-123456"}, "echo ran")
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.Reason != exitStartFailed || !strings.Contains(j.exit.Message, "is not empty") {
		t.Errorf("a clone into a directory that is not empty: exit %+v", j.exit)
	}
	j = start(101, api.Clone{URL: url, Dest: "/", IfExists: "skip"}, "echo ran")
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if out, _ := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != "ran\n" {
		t.Errorf("if_exists: skip: exit %+v, output %q", j.exit, out)
	}
}

// A repo given by an SSH URL is cloned with the project's key (written
// for that clone only, then removed); without the key the job fails at
// its start, saying which secret to set. A real sshd on a free port of
// 127.0.0.1 serves the repository (root, with the key only).
func TestCloneOverSSHWithTheProjectKey(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (sshd)")
	}
	for _, tool := range []string{"/usr/sbin/sshd", "ssh", "ssh-keygen", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (make test-deps installs openssh-server and git)", tool)
		}
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	gitRun(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "hello.txt"), []byte("over ssh\n"), 0o644)
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "-q", "-m", "one")
	repo := filepath.Join(dir, "repo.git")
	gitRun(t, dir, "clone", "-q", "--bare", work, repo)

	key := filepath.Join(dir, "client_key")
	hostKey := filepath.Join(dir, "host_key")
	for _, k := range []string{key, hostKey} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, _ := os.ReadFile(key + ".pub")
	ak := filepath.Join(dir, "authorized_keys")
	os.WriteFile(ak, pub, 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	_ = os.MkdirAll("/run/sshd", 0o755)
	cfg := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nPidFile %s\nAuthorizedKeysFile %s\n"+
		"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nUseDNS no\nAllowUsers root\n",
		port, hostKey, filepath.Join(dir, "sshd.pid"), ak)), 0o600)
	log, err := os.Create(filepath.Join(dir, "sshd.log")) // a file: sshd's children may outlive it
	if err != nil {
		t.Fatal(err)
	}
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	sshd.Stdout, sshd.Stderr = log, log
	sshd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-sshd.Process.Pid, syscall.SIGKILL)
		_ = sshd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("sshd:\n%s", b)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sshd does not listen")
		}
	}

	url := fmt.Sprintf("ssh://root@127.0.0.1:%d%s", port, repo)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the shims' (where the key is written)
	private, _ := os.ReadFile(key)
	a := testAgent(t)
	home := t.TempDir()
	start := func(id int64, c api.Clone) *localJob {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.startLocked(api.Assignment{JobID: id, RunID: 95, Alloc: api.Alloc{CPUs: 1}, Commands: []string{"cat hello.txt"},
			Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}, Clones: []api.Clone{c}})
		return a.jobs[id]
	}
	j := start(96, api.Clone{URL: url, Dest: ".", SSHKey: string(private)})
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if out, stderr := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != "over ssh\n" {
		t.Errorf("clone over ssh: exit %+v, output %q %q", j.exit, out, stderr)
	}
	if entries, _ := filepath.Glob(filepath.Join(tmp, "berth-git-*")); len(entries) > 0 {
		t.Errorf("the clone's key is left behind: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(home, ".ssh", "known_hosts")); err == nil {
		t.Error("the clone wrote the user's known_hosts")
	}
	j = start(97, api.Clone{URL: url, Dest: "."})
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.Reason != exitStartFailed || !strings.Contains(j.exit.Message, "berth secret set GIT_SSH_KEY") {
		t.Errorf("clone over ssh without a key: exit %+v", j.exit)
	}

	// GIT_KNOWN_HOSTS: the host's own key lets the clone in; another key
	// for that host fails it, saying which secret to fix.
	knownLine := func(pubFile string) string {
		b, err := os.ReadFile(pubFile)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		return fmt.Sprintf("[127.0.0.1]:%d %s %s", port, f[0], f[1])
	}
	j = start(98, api.Clone{URL: url, Dest: ".", SSHKey: string(private), KnownHosts: knownLine(hostKey + ".pub")})
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if out, stderr := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != "over ssh\n" {
		t.Errorf("clone with the host in GIT_KNOWN_HOSTS: exit %+v, output %q %q", j.exit, out, stderr)
	}
	j = start(99, api.Clone{URL: url, Dest: ".", SSHKey: string(private), KnownHosts: knownLine(key + ".pub")})
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.Reason != exitStartFailed || !strings.Contains(j.exit.Message, "GIT_KNOWN_HOSTS") {
		t.Errorf("clone with another host key in GIT_KNOWN_HOSTS: exit %+v", j.exit)
	}
}
