//go:build linux

package main_test

// Helpers of the end-to-end tests: they build the berth binary once, run it
// as real subprocesses (server, agents, client commands) and clean up every
// process a test started, including the job supervisors (`berth shim`) that
// deliberately outlive the server and the agents.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	_ "modernc.org/sqlite" // to read the run history of a failed test

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store/pgtest"
)

// berthBin is the binary under test, built once by TestMain; leanBin is
// the Slurm commands' lean build of the same code (-tags slim), behind the
// Slurm-named links of the tests ("" with BERTH_E2E_BIN: the links go to
// that binary).
var berthBin, leanBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	defer pgtest.StopShared()
	// BERTH_E2E_BIN=PATH tests a binary built elsewhere (another revision).
	if bin := os.Getenv("BERTH_E2E_BIN"); bin != "" {
		berthBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "berth-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	berthBin = filepath.Join(dir, "berth")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	args := []string{"build", "-o", berthBin}
	// BERTH_E2E_RACE=1 builds the binary under test with the race detector;
	// every test then fails when a server or agent log reports a data race.
	if os.Getenv("BERTH_E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool, append(args, "github.com/berth-hq/berth/cmd/berth")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building berth:", err)
		return 1
	}
	leanBin = filepath.Join(dir, "berth-slurm")
	cmd = exec.Command(goTool, "build", "-tags", "slim", "-o", leanBin, "github.com/berth-hq/berth/cmd/berth")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the lean binary:", err)
		return 1
	}
	return m.Run()
}

// cluster is one test's Berth home and every process started in it.
type cluster struct {
	t    testing.TB
	home string

	mu    sync.Mutex
	procs []*proc

	lockRetries atomic.Int64 // starts retried because a killed process's lock was still held
}

// newCluster makes a fresh BERTH_HOME and registers the clean-up that kills
// whatever the test started there.
func newCluster(t testing.TB) *cluster {
	t.Helper()
	return newClusterIn(t, "")
}

// newClusterIn is newCluster with BERTH_HOME at sub under a fresh temporary
// directory ("": the directory itself).
func newClusterIn(t testing.TB, sub string) *cluster {
	t.Helper()
	// TempDir's removal was registered first, so it runs after the kills below.
	c := &cluster{t: t, home: filepath.Join(t.TempDir(), sub)}
	if err := os.MkdirAll(c.home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
		c.mu.Lock()
		procs := append([]*proc(nil), c.procs...)
		c.mu.Unlock()
		for _, p := range procs {
			p.kill()
		}
		if left := killLeftovers(c.home, 10*time.Second); len(left) > 0 {
			t.Errorf("processes of %s still alive after clean-up: %v", c.home, left)
		}
		if os.Getenv("BERTH_E2E_RACE") == "1" {
			c.checkRaces()
		}
	})
	return c
}

// env is the environment of every process of the cluster: the test's own
// without any Berth variables, then BERTH_HOME and extra.
func (c *cluster) env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BERTH_") {
			env = append(env, kv)
		}
	}
	// Jobs do not see BERTH_HOME (it leads to a token): BERTH_E2E_HOME,
	// which they inherit, tells this cluster's jobs apart. No agent of a
	// test listens on the host's socket (each has its own: socket).
	env = append(env, "BERTH_HOME="+c.home, "BERTH_E2E_HOME="+c.home, "BERTH_SOCKET=none")
	return append(env, extra...)
}

// socket is where the cluster's agent of that name listens for its
// host's users (none of a test's agents takes the host's own socket).
func (c *cluster) socket(name string) string { return filepath.Join(c.home, "sock-"+name) }

// proc is a long-lived process: a server or an agent.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (c *cluster) start(name, logPath string, env []string, args ...string) *proc {
	c.t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(berthBin, args...)
	cmd.Env = env
	cmd.Dir = c.home
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// lockHolders describes the processes that have a *.lock file of the home
// open, for the message of a server or agent that could not take its lock.
func (c *cluster) lockHolders() string {
	var b strings.Builder
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, _ := filepath.Glob(p + "/fd/*")
		for _, fd := range fds {
			target, err := os.Readlink(fd)
			if err == nil && strings.HasPrefix(target, c.home+"/") && strings.HasSuffix(target, ".lock") {
				pid, _ := strconv.Atoi(filepath.Base(p))
				stat, _ := os.ReadFile(p + "/stat")
				fmt.Fprintf(&b, "  %s is held open by %d (%s) [stat: %s]\n", target, pid, cmdline(pid), strings.TrimSpace(string(stat)))
			}
		}
	}
	if b.Len() == 0 {
		return "(no process has a lock file of the home open now)\n"
	}
	return "lock files open now:\n" + b.String()
}

// server is `berth server` on this cluster's home, restartable.
type server struct {
	c      *cluster
	args   []string
	p      *proc
	url    string
	token  string
	starts int
}

// startServer starts `berth server --listen 127.0.0.1:0 ARGS...` and waits
// until it answers.
func (c *cluster) startServer(args ...string) *server {
	c.t.Helper()
	s := &server{c: c, args: append([]string{"server", "--listen", "127.0.0.1:0", "--socket", c.socket("local")}, args...)}
	if strings.HasPrefix(c.t.Name(), "TestOnPostgres/") {
		// A fresh database for the cluster, kept across the server's
		// restarts (postgres_e2e_test.go).
		url := pgtest.Database(c.t)
		c.t.Logf("the server's state: %s", url)
		s.args = append(s.args, "--db", url)
	}
	s.start()
	return s
}

var listeningRE = regexp.MustCompile(`Berth server on (http://\S+) `)

func (s *server) start() {
	t := s.c.t
	t.Helper()
	s.starts++
	logPath := filepath.Join(s.c.home, fmt.Sprintf("server-%d.log", s.starts))
	var url string
	s.p = s.c.startLocked(fmt.Sprintf("server #%d", s.starts), logPath, s.c.env(), func(b []byte) bool {
		if m := listeningRE.FindSubmatch(b); m != nil {
			url = string(m[1])
			return true
		}
		return false
	}, s.args...)
	// The server wrote the client configuration before it said where it listens.
	var cfg struct {
		URL   string `yaml:"url"`
		Token string `yaml:"token"`
	}
	b, err := os.ReadFile(filepath.Join(s.c.home, "config.yml"))
	if err != nil {
		t.Fatalf("server #%d: %v", s.starts, err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("server #%d: config.yml: %v", s.starts, err)
	}
	if cfg.URL != url || cfg.Token == "" {
		t.Fatalf("server #%d listens on %s but config.yml says url %q, token %q", s.starts, url, cfg.URL, cfg.Token)
	}
	if s.token != "" && cfg.Token != s.token {
		t.Errorf("server #%d changed the admin token in config.yml across a restart", s.starts)
	}
	s.url, s.token = cfg.URL, cfg.Token
	resp, err := http.Get(s.url + "/healthz")
	if err != nil {
		t.Fatalf("server #%d: healthz: %v", s.starts, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("server #%d: healthz answered %s %q", s.starts, resp.Status, body)
	}
}

// kill9 kills the server process (and so its local agent) with SIGKILL.
func (s *server) kill9() { s.p.kill() }

func (s *server) restart() {
	s.c.t.Helper()
	s.kill9()
	s.start()
}

// startAgent starts `berth agent` against s with its token from BERTH_TOKEN.
func (s *server) startAgent(name, dataDir string, args ...string) *proc {
	s.c.t.Helper()
	logPath := filepath.Join(s.c.home, "agent-"+name+".log")
	// Each agent listens on a socket of its own, which its jobs' Slurm
	// commands (scancel, squeue, sbatch inside a job) reach the server by.
	all := append([]string{"agent", "--server", s.url, "--name", name, "--data-dir", dataDir, "--socket", s.c.socket(name)}, args...)
	return s.c.startLocked("agent "+name, logPath, s.c.env("BERTH_TOKEN="+s.token), func(b []byte) bool {
		return bytes.Contains(b, []byte(`msg="agent starting"`))
	}, all...)
}

// lockBusyRE is how a server or an agent says that another process holds
// the lock of its database or data directory.
var lockBusyRE = regexp.MustCompile(`another berth (server|agent) uses `)

// startLocked starts a server or an agent and waits until ready says its
// new log output shows it working. A process killed with SIGKILL can leave
// its lock held for a moment by a child it was forking (see the report of
// these tests): a start that fails only because of that is retried, for at
// most 5s, and logged.
func (c *cluster) startLocked(name, logPath string, env []string, ready func(newLog []byte) bool, args ...string) *proc {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	retryUntil := time.Now().Add(5 * time.Second)
	for {
		fi, _ := os.Stat(logPath)
		var from int64
		if fi != nil {
			from = fi.Size()
		}
		p := c.start(name, logPath, env, args...)
		for {
			b, _ := os.ReadFile(logPath)
			if int64(len(b)) >= from {
				b = b[from:]
			}
			if ready(b) {
				return p
			}
			if p.exited() {
				if lockBusyRE.Match(b) && time.Now().Before(retryUntil) {
					c.t.Logf("%s: could not take its lock right after the previous process was killed; retrying: %s%s",
						name, bytes.TrimSpace(b), "\n"+c.lockHolders())
					c.lockRetries.Add(1)
					time.Sleep(20 * time.Millisecond)
					break
				}
				c.t.Fatalf("%s exited before it was ready (%v):\n%s%s", name, p.err, b, c.lockHolders())
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("%s not ready after 30s:\n%s", name, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// result is what a client command did.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// berth runs a client command to its end with stdin as its input.
func (c *cluster) berth(stdin string, args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := c.run(stdin, &out, &errb, args...)
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// berthCombined runs a client command with stdout and stderr on one pipe,
// so that their relative order is kept.
func (c *cluster) berthCombined(args ...string) (string, int) {
	c.t.Helper()
	var out bytes.Buffer
	code := c.run("", &out, &out, args...)
	return out.String(), code
}

func (c *cluster) run(stdin string, stdout, stderr io.Writer, args ...string) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, berthBin, args...)
	cmd.Env = c.env()
	cmd.Dir = c.home
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		c.t.Fatalf("berth %s: timed out after 60s", strings.Join(args, " "))
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	c.t.Fatalf("berth %s: %v", strings.Join(args, " "), err)
	return -1
}

// mustBerth runs a client command that must succeed and returns its stdout.
func (c *cluster) mustBerth(args ...string) string {
	c.t.Helper()
	r := c.berth("", args...)
	if r.code != 0 {
		c.t.Fatalf("berth %s: %s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// writeConfig writes a configuration file into the home and returns its path.
func (c *cluster) writeConfig(name, text string) string {
	c.t.Helper()
	path := filepath.Join(c.home, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// runs is `berth ps -a --json`.
func (c *cluster) runs() ([]api.Run, error) {
	r := c.berth("", "ps", "-a", "--json")
	if r.code != 0 {
		return nil, fmt.Errorf("berth ps -a --json: %s", r)
	}
	var runs []api.Run
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		return nil, fmt.Errorf("berth ps -a --json: %v\n%s", err, r.stdout)
	}
	return runs, nil
}

func (c *cluster) mustRuns() []api.Run {
	c.t.Helper()
	runs, err := c.runs()
	if err != nil {
		c.t.Fatal(err)
	}
	return runs
}

func findRun(runs []api.Run, name string) *api.Run {
	for i := range runs {
		if runs[i].Name == name {
			return &runs[i]
		}
	}
	return nil
}

// waitRun polls `berth ps -a --json` until the run named name satisfies ok,
// tolerating a server that is restarting, and returns it.
func (c *cluster) waitRun(name string, timeout time.Duration, what string, ok func(*api.Run) bool) *api.Run {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		runs, err := c.runs()
		if err != nil {
			last = err.Error()
		} else if r := findRun(runs, name); r == nil {
			last = "no such run"
		} else if ok(r) {
			return r
		} else {
			last = fmt.Sprintf("status %s, reason %q, exit code %s", r.Status, r.Reason, codeText(r.ExitCode))
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("run %s: not %s after %v; last: %s", name, what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pollRun is waitRun that reports a timeout instead of failing the test; it
// returns the last state seen (nil when none was).
func (c *cluster) pollRun(name string, timeout time.Duration, ok func(*api.Run) bool) (*api.Run, bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last *api.Run
	for {
		if runs, err := c.runs(); err == nil {
			if r := findRun(runs, name); r != nil {
				last = r
				if ok(r) {
					return r, true
				}
			}
		}
		if time.Now().After(deadline) {
			if last == nil {
				last = &api.Run{Name: name, Status: "(not found)"}
			}
			return last, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) waitFinished(name string, timeout time.Duration) *api.Run {
	c.t.Helper()
	return c.waitRun(name, timeout, "finished", func(r *api.Run) bool { return r.Status.Finished() })
}

// waitLog polls `berth logs NAME` until its output contains want.
func (c *cluster) waitLog(name, want string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, code := c.berthCombined("logs", name)
		if code == 0 && strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("run %s: log has no %q after %v; it has:\n%s", name, want, timeout, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNodes polls `berth fleet --json` until every named node is online.
func (c *cluster) waitNodes(timeout time.Duration, names ...string) []api.Node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		r := c.berth("", "fleet", "--json")
		var nodes []api.Node
		if r.code != 0 {
			last = r.String()
		} else if err := json.Unmarshal([]byte(r.stdout), &nodes); err != nil {
			c.t.Fatalf("berth fleet --json: %v\n%s", err, r.stdout)
		} else {
			online := 0
			for _, want := range names {
				for _, n := range nodes {
					if n.Name == want && n.Status != "offline" {
						online++
					}
				}
			}
			if online == len(names) {
				return nodes
			}
			last = r.stdout
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nodes %v not all online after %v; last fleet:\n%s", names, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func codeText(c *int) string {
	if c == nil {
		return "none"
	}
	return strconv.Itoa(*c)
}

// numberedLines is "line 1\n" .. "line N\n".
func numberedLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// diffLines describes how got differs from "line 1".."line n": missing,
// duplicated and out-of-order lines; "" when equal.
func diffLines(got string, n int) string {
	want := numberedLines(n)
	if got == want {
		return ""
	}
	seen := map[string]int{}
	var order []string
	prev := 0
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		seen[l]++
		var k int
		if _, err := fmt.Sscanf(l, "line %d", &k); err != nil || fmt.Sprintf("line %d", k) != l {
			order = append(order, fmt.Sprintf("unexpected %q", l))
			continue
		}
		if k <= prev {
			order = append(order, fmt.Sprintf("%d after %d", k, prev))
		}
		prev = k
	}
	var missing, dup []string
	for i := 1; i <= n; i++ {
		l := fmt.Sprintf("line %d", i)
		switch seen[l] {
		case 0:
			missing = append(missing, strconv.Itoa(i))
		case 1:
		default:
			dup = append(dup, fmt.Sprintf("%d (x%d)", i, seen[l]))
		}
	}
	if !strings.HasSuffix(got, "\n") && got != "" {
		order = append(order, "no final newline")
	}
	return fmt.Sprintf("%d bytes, want %d; missing %v; duplicated %v; order/other problems %v",
		len(got), len(want), clip(missing), clip(dup), clip(order))
}

func clip(s []string) []string {
	if len(s) > 20 {
		return append(s[:20:20], fmt.Sprintf("... %d more", len(s)-20))
	}
	return s
}

// procsWith lists the processes other than this one whose command line or
// environment contains marker.
func procsWith(marker string) []int {
	return procsMatching(func(cmdline, environ []byte) bool {
		return bytes.Contains(cmdline, []byte(marker)) || bytes.Contains(environ, []byte(marker))
	})
}

// shimsOf lists the supervisors of the cluster's jobs: `berth shim DIR`
// with DIR under the home, or a shim working in a directory under the home
// (a pre-started shim gets its directory later). Pre-started shims that have
// no job yet are not listed.
func (c *cluster) shimsOf() []int {
	var pids []int
	for _, pid := range procsMatching(func(cmdline, _ []byte) bool {
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		return len(args) == 3 && args[1] == "shim"
	}) {
		args := strings.Split(strings.TrimRight(cmdline(pid), " "), " ")
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if strings.HasPrefix(args[len(args)-1], c.home+"/") || strings.HasPrefix(cwd, c.home+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// jobProcs lists the processes of the cluster's jobs: those with the job
// variables and the cluster's BERTH_E2E_HOME in their environment.
func (c *cluster) jobProcs() []int {
	home := []byte("\x00BERTH_E2E_HOME=" + c.home + "\x00")
	return procsMatching(func(_, environ []byte) bool {
		environ = append([]byte{0}, environ...)
		return bytes.Contains(environ, home) && bytes.Contains(environ, []byte("\x00BERTH_JOB_ID="))
	})
}

func procsMatching(match func(cmdline, environ []byte) bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if match(cl, env) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// describe is "PID cmdline" of each process, for messages.
func describe(pids []int) []string {
	var s []string
	for _, pid := range pids {
		s = append(s, fmt.Sprintf("%d %s", pid, cmdline(pid)))
	}
	return s
}

// waitNone polls list until it is empty; it returns what is left at timeout.
func waitNone(list func() []int, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		pids := list()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return describe(pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdline is a process's command line, for messages.
func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// killLeftovers SIGKILLs every process that carries dir in its command line
// or environment (shims are `berth shim DIR/...`; jobs inherit BERTH_E2E_HOME)
// until none is left, and returns those still there after timeout.
func killLeftovers(dir string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		pids := procsWith(dir)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return describe(pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dumpLogs prints the tail of every server and agent log of a failed test.
func (c *cluster) dumpLogs() {
	files, _ := filepath.Glob(filepath.Join(c.home, "*.log"))
	// The last ones written: the restarts of a server make many.
	mtime := func(f string) time.Time {
		fi, err := os.Stat(f)
		if err != nil {
			return time.Time{}
		}
		return fi.ModTime()
	}
	sort.SliceStable(files, func(i, k int) bool { return mtime(files[i]).Before(mtime(files[k])) })
	if len(files) > 6 {
		c.t.Logf("(%d logs in %s; the last 6 written:)", len(files), c.home)
		files = files[len(files)-6:]
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = append([]byte("...\n"), b[len(b)-6000:]...)
		}
		c.t.Logf("=== %s:\n%s", filepath.Base(f), b)
	}
	if ev := c.events(); ev != "" {
		c.t.Logf("=== run history (events table):\n%s", ev)
	}
}

// events is the server's run history, read from its database.
func (c *cluster) events() string {
	path := filepath.Join(c.home, "server", "berth.db")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	db, err := sql.Open("sqlite", sqliteURI(path)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	rows, err := db.Query(`SELECT run_id, job_id, time, type, message FROM events ORDER BY id`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var run, job, ns int64
		var typ, msg string
		if err := rows.Scan(&run, &job, &ns, &typ, &msg); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%s run %d job %d %s: %s\n", time.Unix(0, ns).UTC().Format("15:04:05.000"), run, job, typ, msg)
	}
	return b.String()
}

// sqliteURI is a SQLite "file:" URI of path: '#', '?' and '%' in a file
// name must be escaped, or SQLite opens another file.
func sqliteURI(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "#", "%23", "?", "%3F").Replace(path)
}

// checkRaces fails the test when a race-enabled server or agent reported one.
func (c *cluster) checkRaces() {
	files, _ := filepath.Glob(filepath.Join(c.home, "*.log"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "WARNING: DATA RACE") {
				c.t.Errorf("%s reports a data race", filepath.Base(f))
				break
			}
		}
		fh.Close()
	}
}
