package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
)

// testHost is this machine's cgroup host, or the test skips.
func testHost(t *testing.T) *cgroup.Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	h, err := cgroup.Detect()
	if err != nil {
		t.Skip(err)
	}
	return h
}

func testGroup(t *testing.T, h *cgroup.Host, memory int64, cpus int) *cgroup.Spec {
	t.Helper()
	s := h.Spec(fmt.Sprintf("berth-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")), memory, cpus)
	t.Cleanup(func() {
		_ = cgroup.Remove(s)
		for _, d := range s.Dirs() {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the job's cgroup was left behind: %s", d)
			}
		}
	})
	return &s
}

// A job over its memory is killed by the kernel; the shim records it in
// exit.json and says so in the job's output.
func TestShimOOM(t *testing.T) {
	h := testHost(t)
	if !strings.HasPrefix(h.Limits(), "memory") {
		t.Skipf("limits here: %s", h.Limits())
	}
	sp := shimSpec{Script: "echo start; head -c 200M /dev/zero | tail; echo survived", Env: []string{"PATH=" + os.Getenv("PATH")},
		Dir: t.TempDir(), Cgroup: testGroup(t, h, 64<<20, 1)}
	ex, out := shimRun(t, sp, nil)
	if !ex.OOMKilled {
		t.Errorf("exit = %+v, want oom_killed", ex)
	}
	if !strings.Contains(out, "berth: the job exceeded its memory (64MB): the kernel killed 1 of its processes (OOM)") {
		t.Errorf("output = %q", out)
	}
}

// A job that double-forks and starts a session of its own (a daemon) leaves
// its process group but not its cgroup: it ends with the job, and holds the
// job's output open no longer than that. Without a cgroup it survives.
func TestShimKillsDaemons(t *testing.T) {
	h := testHost(t)
	for name, confined := range map[string]bool{"cgroup": true, "process group only": false} {
		t.Run(name, func(t *testing.T) {
			marker := fmt.Sprintf("berth-daemon-%d-%v", os.Getpid(), confined)
			// The job waits for its daemon to be on its own before it ends.
			sp := shimSpec{Script: "(setsid bash -c 'touch ready; exec -a " + marker + " sleep 3600' &); while [ ! -e ready ]; do sleep 0.01; done; echo started",
				Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: t.TempDir()}
			if confined {
				sp.Cgroup = testGroup(t, h, 0, 1)
			}
			start := time.Now()
			ex, out := shimRun(t, sp, nil)
			took := time.Since(start)
			left := processesNamed(marker)
			for _, p := range left {
				var pid int
				_, _ = fmt.Sscan(p, &pid)
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			if ex.ExitCode != 0 || out != "[stdout]started\n" {
				t.Errorf("exit %+v, output %q", ex, out)
			}
			switch {
			case confined && len(left) > 0:
				t.Errorf("the daemon survived its job: %v", left)
			case confined && took > 2*time.Minute:
				// Not a speed check: a daemon holding the output open keeps
				// the shim for its hour, far past any machine's load.
				t.Errorf("the shim took %v: the daemon held the output open", took)
			case !confined && len(left) == 0:
				t.Errorf("without a cgroup the daemon should have survived (is the test still testing?)")
			}
		})
	}
}

func TestAgentReportsLimits(t *testing.T) {
	a, err := New(Config{Server: "http://127.0.0.1:1", Name: "n", DataDir: t.TempDir(), NoCgroups: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.info.Cgroups != "none" || a.info.Limits != "none (disabled: --no-cgroups)" || a.cg != nil {
		t.Errorf("disabled: cgroups %q, limits %q", a.info.Cgroups, a.info.Limits)
	}
	h := testHost(t)
	a, err = New(Config{Server: "http://127.0.0.1:1", Name: "n", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("v%d", h.Version()); a.info.Cgroups != want || a.info.Limits != h.Limits() || a.cg == nil {
		t.Errorf("cgroups %q, limits %q; want %q, %q", a.info.Cgroups, a.info.Limits, want, h.Limits())
	}
	if names, err := a.cg.Groups(a.prefix); err != nil || len(names) != 0 {
		t.Errorf("the probe left groups: %v, %v", names, err)
	}
	// Agents on one host never share a group name.
	if groupPrefix("n", "/a") == groupPrefix("n", "/b") || groupPrefix("n", "/a") == groupPrefix("m", "/a") {
		t.Error("group prefixes collide")
	}
}

// An OOM kill recorded in exit.json reaches the server even when the agent
// restarted after the job ended.
func TestRestoredOOMIsReported(t *testing.T) {
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "jobs", "9")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(filepath.Join(dir, fileSpec), shimSpec{Script: "true", Assignment: api.Assignment{JobID: 9}}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().UTC()
	if err := writeJSONAtomic(filepath.Join(dir, fileExit), shimExit{ExitCode: 137, Signal: "SIGKILL", OOMKilled: true, StartedAt: end.Add(-time.Second), FinishedAt: end}); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Server: "http://127.0.0.1:1", Name: "n", DataDir: dataDir, NoCgroups: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.restore(); err != nil {
		t.Fatal(err)
	}
	a.jobs[9].synced = true
	evs, _ := a.collect()
	if len(evs) == 0 || evs[len(evs)-1].Type != "exited" || !evs[len(evs)-1].OOMKilled || evs[len(evs)-1].ExitCode != 137 {
		t.Errorf("events = %+v, want an exit with oom_killed", evs)
	}
}
