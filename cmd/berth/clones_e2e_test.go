//go:build linux

package main_test

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
)

// bareRepo makes root/name.git, a bare repository whose main branch holds
// files (committed) and whose dev branch adds dev.txt.
func bareRepo(t *testing.T, root, name string, files map[string]string) {
	t.Helper()
	work := filepath.Join(root, name+"-work")
	gitRepo(t, work, files)
	for _, args := range [][]string{{"branch", "-M", "main"}, {"checkout", "-q", "-b", "dev"}} {
		if out, err := exec.Command("git", append([]string{"-C", work}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "dev.txt"), []byte("on dev\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-qm", "dev"}, {"checkout", "-q", "main"}} {
		cmd := exec.Command("git", append([]string{"-C", work, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if out, err := exec.Command("git", "clone", "-q", "--bare", work, filepath.Join(root, name+".git")).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
}

// gitDaemon serves the repositories under root over git:// on a free port
// of 127.0.0.1 (git daemon), until the test ends; it returns the base URL.
func gitDaemon(t *testing.T, root string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A file, not a pipe: the daemon's children (one per connection)
	// would hold a pipe open past its end.
	log, err := os.Create(filepath.Join(root, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--base-path="+root, "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port), root)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the daemon and its children
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("git daemon:\n%s", b)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "git://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("git daemon does not listen on %s", addr)
		}
	}
}

// A repo given by URL is cloned on the node before the commands: from a
// git daemon (the shorthand with a port, default branch), from a private
// HTTP server with the project's secret GIT_TOKEN (a branch, into a
// directory, with `files` landing over it); a clone that fails fails the
// run at its start with git's words, once, and the token never shows.
func TestRepoByURLIsClonedOnTheNode(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	c := newCluster(t)
	c.startServer("--agent-name", "clone-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "clone-node")

	root := filepath.Join(c.home, "git")
	bareRepo(t, root, "public", map[string]string{"hello.sh*": "#!/bin/sh\necho hello from the public repo\n"})
	bareRepo(t, root, "private", map[string]string{"secret.txt": "private content\n", "conf.txt": "from the repo\n"})
	base := gitDaemon(t, root)

	conf := c.writeConfig("public.yml", `type: task
name: clone-public
repos:
  - `+base+`/public.git
commands:
  - ./hello.sh
  - git rev-parse --abbrev-ref HEAD
  - git rev-list --count HEAD
`)
	r := c.berth("", "apply", "-y", "-f", conf)
	if want := "hello from the public repo\nmain\n1\n"; r.code != 0 || r.stdout != want {
		t.Errorf("public repo: want %q: %s", want, r)
	}
	if strings.Contains(r.stderr, "Not supported yet") {
		t.Errorf("the plan calls a repo by URL unsupported: %s", r)
	}

	// The private one, over HTTP with Basic credentials.
	const token = "e2e-token-5f3a9c"
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Dir: root,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "oauth2" || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(c.home, "conf.txt"), []byte("from files\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	private := c.writeConfig("private.yml", `type: task
name: clone-private
repos:
  - url: `+srv.URL+`/private.git
    branch: dev
    path: src
files:
  - conf.txt:src/conf.txt
commands:
  - cat src/secret.txt src/dev.txt src/conf.txt
  - "echo token in env: ${GIT_TOKEN:-no}"
`)
	r = c.berth("", "apply", "-y", "-f", private)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "repository wants credentials: berth secret set GIT_TOKEN") {
		t.Errorf("private repo without GIT_TOKEN: want a failure naming the secret: %s", r)
	}
	run := c.waitFinished("clone-private", 30*time.Second)
	if run.Status != "failed" || run.Reason != "failed_to_start" {
		t.Errorf("a clone that fails: status %s, reason %q; want failed, failed_to_start", run.Status, run.Reason)
	}
	c.mustBerth("secret", "set", "GIT_TOKEN", token)
	r = c.berth("", "apply", "-y", "-f", private)
	if want := "private content\non dev\nfrom files\ntoken in env: no\n"; r.code != 0 || r.stdout != want {
		t.Errorf("private repo with GIT_TOKEN: want %q: %s", want, r)
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Errorf("the token shows in the output: %s", r)
	}

	// A repository that is not there: the run fails, once.
	missing := c.writeConfig("missing.yml", `type: task
name: clone-missing
repos:
  - url: `+base+`/nothing-here.git
commands:
  - echo ran
`)
	r = c.berth("", "apply", "-y", "-f", missing)
	if r.code == 0 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stdout+r.stderr, "clone "+base+"/nothing-here.git") {
		t.Errorf("a repository that is not there: %s", r)
	}
	run = c.waitFinished("clone-missing", 30*time.Second)
	if run.Status != "failed" || run.Reason != "failed_to_start" {
		t.Errorf("a missing repository: status %s, reason %q; want failed, failed_to_start", run.Status, run.Reason)
	}
}
