package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// These run real agents whose jobs get real cgroups (the agent's own
// detection); they skip where this host cannot make them.

func requireLimits(t *testing.T) *cgroup.Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	h, err := cgroup.Detect()
	if err != nil {
		t.Skip(err)
	}
	if !strings.HasPrefix(h.Limits(), "memory") || !strings.Contains(h.Limits(), "cpu") {
		t.Skipf("limits here: %s", h.Limits())
	}
	return h
}

// A job that allocates more than its memory is killed by the kernel and the
// run ends failed with reason OOM.
func TestRunOutOfMemory(t *testing.T) {
	host := requireLimits(t)
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	nodes, err := h.c.Nodes(context.Background())
	if err != nil || len(nodes) != 1 || nodes[0].Limits != host.Limits() || nodes[0].Cgroups == "none" {
		t.Fatalf("nodes = %+v, %v; want limits %q", nodes, err, host.Limits())
	}
	r := submit(t, h, "type: task\nname: hog\nresources:\n  memory: 64MB\ncommands:\n  - echo start\n  - head -c 200M /dev/zero | tail\n")
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusFailed || end.Reason != api.ReasonOOM || end.ExitCode == nil || *end.ExitCode != 137 {
		t.Errorf("final run = %s %s %v, want failed OOM 137", end.Status, end.Reason, codeOf(end.ExitCode))
	}
	if !strings.HasPrefix(out, "start\n") || !strings.Contains(out, "(OOM)") {
		t.Errorf("output = %q", out)
	}
	got, err := h.c.Run(context.Background(), "hog")
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(got.Events, func(e api.Event) bool { return e.Type == "job_finished" }); i < 0 || !strings.Contains(got.Events[i].Message, "OOM") {
		t.Errorf("events = %+v", got.Events)
	}
}

// The CPU quota and the memory limit are those allocated, set before the
// job runs, and the group goes when the job does.
func TestRunLimitsApplied(t *testing.T) {
	requireLimits(t)
	h := newHarness(t, t.TempDir())
	dir := t.TempDir()
	startAgent(t, h, agentOpts{name: "n1", cpus: 4, dir: dir})
	r := submit(t, h, "type: task\nname: busy\nresources:\n  cpu: 2..\n  memory: 256MB..\ncommands:\n  - cat /proc/self/cgroup\n  - echo ready\n  - sleep 60\n")
	var spec *cgroup.Spec
	waitFor(t, "the job's cgroup", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "jobs", "*", "job.json"))
		if len(files) != 1 {
			return false
		}
		var js struct {
			Cgroup *cgroup.Spec `json:"cgroup"`
		}
		b, err := os.ReadFile(files[0])
		if err != nil || json.Unmarshal(b, &js) != nil || js.Cgroup == nil {
			return false
		}
		spec = js.Cgroup
		return true
	})
	waitFor(t, "the job running in its group", func() bool {
		var out strings.Builder
		_, err := h.c.Logs(context.Background(), fmt.Sprint(r.ID), client.LogOptions{Job: -1}, func(e api.LogEntry) { out.Write(e.Data) })
		return err == nil && strings.Contains(out.String(), "ready\n")
	})
	// The lower bounds of the ranges are allocated, and enforced.
	want := map[string]string{"cpu/cpu.cfs_quota_us": "200000", "cpu/cpu.cfs_period_us": "100000", "memory/memory.limit_in_bytes": "268435456"}
	if spec.Version == 2 {
		want = map[string]string{"/cpu.max": "200000 100000", "/memory.max": "268435456"}
	}
	for f, v := range want {
		c, file, _ := strings.Cut(f, "/")
		d := filepath.Join(spec.Root, c, spec.Paths[c])
		b, err := os.ReadFile(filepath.Join(d, file))
		if err != nil || strings.TrimSpace(string(b)) != v {
			t.Errorf("%s = %q, %v; want %s", f, b, err, v)
		}
	}
	if _, err := h.c.Stop(context.Background(), fmt.Sprint(r.ID), true); err != nil {
		t.Fatal(err)
	}
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusAborted {
		t.Errorf("final run = %s %s", end.Status, end.Reason)
	}
	// The job saw itself in its group from its first command.
	for c, p := range spec.Paths {
		if !strings.Contains(out, ":"+p+"\n") {
			t.Errorf("the job's /proc/self/cgroup has no %s group %s:\n%s", c, p, out)
		}
	}
	// The shim removes the group once the job's end is reported (its
	// bookkeeping, which the node's release need not wait for).
	for _, d := range spec.Dirs() {
		waitFor(t, "the job's cgroup "+d+" removed", func() bool {
			_, err := os.Stat(d)
			return errors.Is(err, os.ErrNotExist)
		})
	}
}

// A job whose supervisor dies is lost, and does not outlive it: the agent
// empties and removes the job's cgroup.
func TestLostJobKilled(t *testing.T) {
	requireLimits(t)
	h := newHarness(t, t.TempDir())
	dir := t.TempDir()
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, dir: dir})
	marker := fmt.Sprintf("berth-lost-%d", os.Getpid())
	r := submit(t, h, "type: task\nname: lost\ncommands:\n  - bash -c 'exec -a "+marker+" sleep 300' & wait\n")
	var jobDir string
	waitFor(t, "the job running", func() bool {
		dirs, _ := filepath.Glob(filepath.Join(dir, "jobs", "*"))
		if len(dirs) == 1 {
			jobDir = dirs[0]
		}
		return jobDir != "" && exists(filepath.Join(jobDir, "shim.pid")) && len(procsWith(marker)) > 0
	})
	var js struct {
		Cgroup *cgroup.Spec `json:"cgroup"`
	}
	b, err := os.ReadFile(filepath.Join(jobDir, "job.json"))
	if err != nil || json.Unmarshal(b, &js) != nil || js.Cgroup == nil {
		t.Fatalf("job.json: %s, %v", b, err)
	}
	b, err = os.ReadFile(filepath.Join(jobDir, "shim.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pids := procsWith(marker) // the job's bash and its sleep
	var shim int
	if _, err := fmt.Sscan(string(b), &shim); err != nil || syscall.Kill(shim, syscall.SIGKILL) != nil {
		t.Fatalf("kill the shim %q: %v", b, err)
	}
	_, end := follow(t, h, r.ID)
	if end.Status != api.StatusFailed || end.Reason != api.ReasonLostByAgent {
		t.Errorf("final run = %s %s, want failed lost_by_agent", end.Status, end.Reason)
	}
	waitFor(t, "the job's processes gone", func() bool {
		for _, pid := range pids {
			if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && !strings.Contains(string(st), ") Z") {
				return false
			}
		}
		return true
	})
	for _, d := range js.Cgroup.Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the job's cgroup was left behind: %s", d)
		}
	}
}

// procsWith lists the live processes whose command line holds marker.
func procsWith(marker string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err == nil && strings.Contains(string(b), marker) && !strings.Contains(string(st), ") Z") {
			found = append(found, e.Name())
		}
	}
	return found
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func codeOf(c *int) string {
	if c == nil {
		return "nil"
	}
	return fmt.Sprint(*c)
}
