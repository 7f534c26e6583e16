package cgroup

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The v2 path on a fake cgroupfs: this host's unified hierarchy has no
// memory or cpu controller to try it on.

// fakeKernel plays the part of the kernel for a fake v2 group: it drops
// from cgroup.procs the processes that are gone, empties it when
// cgroup.kill is written, and reports cgroup.freeze in cgroup.events.
func fakeKernel(t *testing.T, dir string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
			procs := filepath.Join(dir, "cgroup.procs")
			b, err := os.ReadFile(procs)
			if err != nil {
				continue
			}
			killed, _ := os.ReadFile(filepath.Join(dir, "cgroup.kill"))
			var keep []string
			for _, f := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(f)
				if strings.TrimSpace(string(killed)) == "1" {
					_ = unix.Kill(pid, unix.SIGKILL)
					continue
				}
				if alive(pid) {
					keep = append(keep, f)
				}
			}
			_ = os.WriteFile(procs, []byte(strings.Join(keep, "\n")), 0o644)
			if fr, err := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); err == nil {
				_ = os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("populated 1\nfrozen "+strings.TrimSpace(string(fr))+"\n"), 0o644)
			}
		}
	}()
	return stop
}

// alive tells whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// v2Job makes the job's directory as the kernel would on mkdir (with the
// interface files Create looks for) and returns its Spec.
func v2Job(t *testing.T, withKill bool) (Spec, string) {
	t.Helper()
	root, s := fakeV2(t)
	h, err := detect(s)
	if err != nil {
		t.Fatal(err)
	}
	spec := h.Spec("berth-0123456789ab-7", 64<<20, 2)
	dir := filepath.Join(root, "user.slice/agent/berth-0123456789ab-7")
	files := []string{"cgroup.procs", "cgroup.freeze", "cgroup.events", "memory.swap.max", "memory.events", "cgroup.type"}
	if withKill {
		files = append(files, "cgroup.kill")
	}
	for _, f := range files {
		writeFile(t, filepath.Join(dir, f), "")
	}
	writeFile(t, filepath.Join(dir, "cgroup.type"), "domain\n")
	return spec, dir
}

func TestV2CreateLimits(t *testing.T) {
	spec, dir := v2Job(t, true)
	if diff := spec.Dirs(); len(diff) != 1 || diff[0] != dir {
		t.Fatalf("Dirs = %v, want [%s]", diff, dir)
	}
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"memory.max":      "67108864",
		"memory.swap.max": "0", // v2 counts swap apart: none at all
		"cpu.max":         "200000 100000",
	} {
		if got := readFile(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	// The parent hands the controllers down.
	if got := readFile(t, filepath.Join(filepath.Dir(dir), "cgroup.subtree_control")); !strings.Contains(got, "+memory") || !strings.Contains(got, "+cpu") {
		t.Errorf("parent's subtree_control = %q", got)
	}
	writeFile(t, filepath.Join(dir, "memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n")
	if n, err := g.OOMKills(); n != 1 || err != nil {
		t.Errorf("OOMKills = %d, %v", n, err)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("group left behind: %v", err)
	}
}

// Kill writes cgroup.kill and waits until the group is empty.
func TestV2KillFile(t *testing.T) {
	spec, dir := v2Job(t, true)
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := startSleeper(t)
	writeFile(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(sleeper.pid)+"\n")
	stopKernel := fakeKernel(t, dir)
	if err := g.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "cgroup.kill")); got != "1" {
		t.Errorf("cgroup.kill = %q", got)
	}
	sleeper.waitGone(t)
	stopKernel() // it would write its files again while they are removed
	if err := Remove(spec); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("group left behind: %v", err)
	}
}

// Before cgroup.kill (Linux 5.14) Kill freezes, kills each process, thaws.
func TestV2KillByFreezing(t *testing.T) {
	spec, dir := v2Job(t, false)
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := startSleeper(t)
	writeFile(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(sleeper.pid)+"\n")
	stopKernel := fakeKernel(t, dir)
	if err := g.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	sleeper.waitGone(t)
	stopKernel()
	if got := readFile(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze = %q: the group must be thawed again", got)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
}

// The real unified hierarchy of this host has no controllers but can still
// group and kill: the v2 Start, Kill and Delete run on it for real.
func TestV2RealUnified(t *testing.T) {
	h := realUnified(t)
	spec := h.Spec(testName(t), 64<<20, 1)
	if spec.Memory != 0 || spec.CPUs != 0 {
		t.Fatalf("limits asked of a hierarchy without controllers: %+v", spec)
	}
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(spec) })
	if d := spec.Dirs()[0]; !exists(filepath.Join(d, "cgroup.kill")) && !exists(filepath.Join(d, "cgroup.freeze")) {
		t.Skip("cgroup v2 here can neither kill nor freeze")
	}
	runOrphanTest(t, g, spec)
}

type sleeper struct {
	pid    int
	reaped chan struct{}
}

// startSleeper starts a child that sleeps until killed (and is killed at
// the end of the test in any case).
func startSleeper(t *testing.T) *sleeper {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sleeper{pid: cmd.Process.Pid, reaped: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.reaped) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-s.reaped })
	return s
}

func (s *sleeper) waitGone(t *testing.T) {
	t.Helper()
	select {
	case <-s.reaped:
	case <-time.After(5 * time.Second):
		t.Fatal("the process listed in the group was not killed")
	}
}

// realUnified is a v2 Host on this machine's unified mount, or skips.
func realUnified(t *testing.T) *Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	mounts, err := readMounts("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	i := slices.IndexFunc(mounts, func(m mount) bool { return m.fstype == "cgroup2" })
	if i < 0 {
		t.Skip("no cgroup v2 mount")
	}
	own, err := readOwn("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	h, err := detectV2(sys{pid: os.Getpid()}, &mounts[i], own)
	if err != nil {
		t.Skip(err)
	}
	return h
}

// procCgroups reads /proc/PID/cgroup into hierarchy → path.
func procCgroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 {
			for _, c := range strings.Split(parts[1], ",") {
				out[c] = parts[2]
			}
		}
	}
	return out
}

// Probe makes and removes a group; a v2 group without memory.swap.max
// (swap not accounted) is reported as such.
func TestV2ProbeWithoutSwapAccounting(t *testing.T) {
	root, s := fakeV2(t)
	h, err := detect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Probe("berth-probe"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "user.slice/agent/berth-probe")); !os.IsNotExist(err) {
		t.Errorf("the probe group was left: %v", err)
	}
	if got := h.Limits(); got != "memory (swap not limited), cpu (cgroup v2; swap: not accounted (memory.swap.max missing))" {
		t.Errorf("Limits = %q", got)
	}
	if s := h.Spec("j", 1<<30, 1); s.Swap {
		t.Errorf("Spec asks to limit swap: %+v", s)
	}
}
