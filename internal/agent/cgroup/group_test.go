package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// These tests make real groups on this host (cgroup v1 here) and skip where
// that cannot be done (not root, no controllers).

// testName is a group name unique to this test run: other sessions share
// the machine.
func testName(t *testing.T) string {
	return fmt.Sprintf("berth-test-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

func realV1(t *testing.T) *Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	h, err := Detect()
	if err != nil {
		t.Skip(err)
	}
	if h.Version() != 1 {
		t.Skipf("cgroup v%d host", h.Version())
	}
	return h
}

func assertGone(t *testing.T, s Spec) {
	t.Helper()
	for _, d := range s.Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("group left behind: %s (%v)", d, err)
		}
	}
}

func TestV1LimitsAndPlacement(t *testing.T) {
	h := realV1(t)
	if !h.memory || !h.cpu {
		t.Skipf("limits here: %s", h.Limits())
	}
	spec := h.Spec(testName(t), 64<<20, 2)
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(spec) })
	want := map[string]string{
		"memory/memory.limit_in_bytes": "67108864",
		"cpu/cpu.cfs_quota_us":         "200000",
		"cpu/cpu.cfs_period_us":        "100000",
	}
	if spec.Swap {
		want["memory/memory.memsw.limit_in_bytes"] = "67108864"
	}
	for f, v := range want {
		c, file, _ := strings.Cut(f, "/")
		if got := readFile(t, filepath.Join(spec.dir(c), file)); got != v {
			t.Errorf("%s = %s, want %s", f, got, v)
		}
	}
	before := procCgroups(t, os.Getpid())
	cmd := exec.Command("sleep", "30")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	// The child is in the job's group in every hierarchy, and the caller is
	// back where it was.
	in := procCgroups(t, cmd.Process.Pid)
	for c, p := range spec.Paths {
		if in[c] != p {
			t.Errorf("child's %s group = %s, want %s", c, in[c], p)
		}
	}
	if diff := cmp.Diff(before, procCgroups(t, os.Getpid())); diff != "" {
		t.Errorf("the caller did not get home (-before +after):\n%s", diff)
	}
	if pids, err := g.Procs(); err != nil || !slices.Equal(pids, []int{cmd.Process.Pid}) {
		t.Errorf("Procs = %v, %v; want [%d]", pids, err, cmd.Process.Pid)
	}
	if err := Remove(spec); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("sleep ended with %v, want killed", err)
	}
	assertGone(t, spec)
}

// A job over its memory is killed by the kernel, and the group tells.
func TestV1OOM(t *testing.T) {
	h := realV1(t)
	if !h.memory {
		t.Skipf("limits here: %s", h.Limits())
	}
	spec := h.Spec(testName(t), 32<<20, 1)
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(spec) })
	cmd := exec.Command("bash", "-c", "head -c 200M /dev/zero | tail")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 137 {
		t.Errorf("exit = %v (code %d), want 137 (tail SIGKILLed)", err, code)
	}
	if n, err := g.OOMKills(); n < 1 || err != nil {
		t.Errorf("OOMKills = %d, %v; want >= 1", n, err)
	}
	if err := Remove(spec); err != nil {
		t.Fatal(err)
	}
	assertGone(t, spec)
}

// A job that double-forks and starts a session of its own leaves its
// process group, but not its cgroup: Kill finds and kills it.
func TestV1KillDoubleForkSetsid(t *testing.T) {
	h := realV1(t)
	spec := h.Spec(testName(t), 0, 0)
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(spec) })
	runOrphanTest(t, g, spec)
}

// runOrphanTest starts a job that leaves a daemon behind (double fork,
// setsid) and checks that Kill ends it and Delete leaves nothing.
func runOrphanTest(t *testing.T, g *Group, spec Spec) {
	t.Helper()
	marker := testName(t) + "-orphan"
	cmd := exec.Command("bash", "-c", "(setsid bash -c 'exec -a "+marker+" sleep 300' </dev/null >/dev/null 2>&1 &); exit 0")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	var orphan int
	for end := time.Now().Add(5 * time.Second); orphan == 0; {
		if pids := processesNamed(marker); len(pids) > 0 {
			orphan = pids[0]
		} else if time.Now().After(end) {
			t.Fatal("the daemon never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// It leads a session of its own, but has not left the group.
	if sid, err := unix.Getsid(orphan); err != nil || sid != orphan {
		t.Fatalf("the daemon's session = %d, %v; want its own", sid, err)
	}
	if pids, err := g.Procs(); err != nil || !slices.Contains(pids, orphan) {
		t.Fatalf("Procs = %v, %v; want the daemon %d in it", pids, err, orphan)
	}
	if err := g.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * time.Second); len(processesNamed(marker)) > 0; {
		if time.Now().After(end) {
			t.Fatalf("the daemon survived: %v", processesNamed(marker))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, spec)
}

func TestV1Probe(t *testing.T) {
	h := realV1(t)
	name := testName(t)
	if err := h.Probe(name); err != nil {
		t.Fatal(err)
	}
	assertGone(t, h.Spec(name, 1, 1))
	if names, err := h.Groups(name); err != nil || len(names) != 0 {
		t.Errorf("Groups = %v, %v", names, err)
	}
}

func TestRemoveMissing(t *testing.T) {
	h := realV1(t)
	if err := Remove(h.Spec(testName(t), 0, 0)); err != nil {
		t.Errorf("Remove of no group = %v", err)
	}
}

// processesNamed lists the live processes called marker (argv[0]), as
// `exec -a marker` names them.
func processesNamed(marker string) []int {
	var found []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(b), marker+"\x00") && alive(pid) {
			found = append(found, pid)
		}
	}
	return found
}

// StartIn makes the group while the job's bash starts: the job runs in it,
// with its limits, from its first command; a group that cannot be made
// fails the start with a CreateError, leaving no process behind.
func TestV1StartIn(t *testing.T) {
	h := realV1(t)
	if !h.memory || !h.cpu {
		t.Skipf("limits here: %s", h.Limits())
	}
	spec := h.Spec(testName(t), 64<<20, 1)
	t.Cleanup(func() { _ = Remove(spec) })
	out := filepath.Join(t.TempDir(), "cgroup")
	cmd := exec.Command("bash", "-c", "cat /proc/self/cgroup > "+out)
	g, err := StartIn(spec, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// The job's first command saw itself in the group in every hierarchy.
	seen := map[string]string{}
	for _, line := range strings.Split(readFile(t, out), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			for _, c := range strings.Split(parts[1], ",") {
				seen[c] = parts[2]
			}
		}
	}
	for c, p := range spec.Paths {
		if seen[c] != p {
			t.Errorf("the job's %s group = %q, want %q", c, seen[c], p)
		}
	}
	if got := readFile(t, filepath.Join(spec.dir("memory"), "memory.limit_in_bytes")); got != "67108864" {
		t.Errorf("memory limit %s", got)
	}
	if err := g.Kill(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, spec)

	bad := spec
	bad.Paths = map[string]string{"nosuch": spec.Paths["memory"]} // a controller Berth does not use
	cmd = exec.Command("bash", "-c", "echo ran")
	var ce *CreateError
	if _, err := StartIn(bad, cmd); !errors.As(err, &ce) {
		t.Fatalf("StartIn in an impossible group: %v, want a CreateError", err)
	}
	if err := unix.Kill(cmd.Process.Pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("the gated bash outlived the failed start: %v", err)
	}
}

// A gated bash that cannot move itself into its group (v1 self-move) runs
// nothing of the job, and the start fails.
func TestSelfMoveFailureRunsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command("bash", "-c", "echo ran > "+marker)
	gt, err := startGated(cmd, []string{"/nonexistent/berth/tasks"})
	if err != nil {
		t.Fatal(err)
	}
	err = gt.enter(&Group{spec: Spec{Version: 1, Root: "/nonexistent", Paths: map[string]string{"memory": "/j"}}})
	if err == nil || !strings.Contains(err.Error(), "could not move") {
		t.Fatalf("enter = %v, want a failure to move", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the job ran (%v)", err)
	}
	if err := unix.Kill(cmd.Process.Pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("the gated bash is still there: %v", err)
	}
}

// `bash FILE` is gated by bash's startup file, in one bash: the script
// runs inside the group from its first line, as a script (not sourced),
// with no descriptor of the gate left open and the job's own BASH_ENV read
// after the gate.
func TestV1StartInScriptFile(t *testing.T) {
	h := realV1(t)
	if !h.memory {
		t.Skipf("limits here: %s", h.Limits())
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	script := filepath.Join(dir, "job.sh")
	own := filepath.Join(dir, "own-env")
	body := strings.Join([]string{
		"echo \"cgroup $(grep -c " + testName(t) + " /proc/self/cgroup)\"",
		"echo \"args $0 $*\"",
		"(return 0 2>/dev/null) && echo sourced || echo executed",
		"echo \"bash_env ${BASH_ENV-unset} own ${OWN-unset}\"",
		"echo \"fds $(ls /proc/$$/fd | sort -n | tr '\\n' ' ')\"",
	}, "\n") + "\n"
	for name, text := range map[string]string{script: body, own: "OWN=read\n"} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The descriptors bash itself has open when the script looks (command
	// substitution's among them), without the gate.
	plain, err := exec.Command("bash", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	fds := strings.TrimSpace(regexp.MustCompile(`(?m)^fds .*$`).FindString(string(plain)))
	for _, tc := range []struct {
		name, env, want string
	}{
		{"no BASH_ENV", "", "bash_env unset own unset"},
		{"its own BASH_ENV", "BASH_ENV=" + own, "bash_env " + own + " own read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := h.Spec(testName(t), 64<<20, 0)
			t.Cleanup(func() { _ = Remove(spec) })
			f, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd := exec.Command("bash", script, "a", "b")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			cmd.Stdout, cmd.Stderr = f, f
			g, err := StartIn(spec, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v: %s", err, readFile(t, out))
			}
			got := readFile(t, out)
			for _, want := range []string{
				fmt.Sprintf("cgroup %d", len(spec.Paths)),
				"args " + script + " a b",
				"executed",
				tc.want,
				fds,
			} {
				if !strings.Contains(got+"\n", want+"\n") {
					t.Errorf("the job printed %q, want a line with %q", got, want)
				}
			}
			if err := g.Kill(time.Second); err != nil {
				t.Fatal(err)
			}
			if err := g.Delete(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkV1StartIn is a trivial job's life in its group: made, started
// behind the gate (`bash FILE`), waited for, emptied and removed.
func BenchmarkV1StartIn(b *testing.B) {
	h, err := Detect()
	if err != nil || os.Geteuid() != 0 || h.Version() != 1 || !h.memory {
		b.Skip("needs root and cgroup v1 with the memory controller")
	}
	script := filepath.Join(b.TempDir(), "job.sh")
	if err := os.WriteFile(script, []byte("true\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		spec := h.Spec(fmt.Sprintf("berth-bench-%d-%d", os.Getpid(), i), 64<<20, 1)
		cmd := exec.Command("bash", script)
		g, err := StartIn(spec, cmd)
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if err := g.Kill(time.Second); err != nil {
			b.Fatal(err)
		}
		if err := g.Delete(); err != nil {
			b.Fatal(err)
		}
	}
}

// nobody is a user other than root for the tests that start jobs as one.
const nobody = 65534

// asNobody is a bash script (in a directory nobody reaches) run as
// nobody, as the shim runs a job as its user.
func asNobody(tb testing.TB, body string) *exec.Cmd {
	tb.Helper()
	dir, err := os.MkdirTemp("", "berth-cgroup-user-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// A job that runs as a user moves itself into its v1 group as that user:
// the group's `tasks` files are theirs (Owner), nothing else; without
// them the start fails and nothing of the job runs.
func TestV1StartInAsUser(t *testing.T) {
	h := realV1(t)
	if !h.memory {
		t.Skipf("limits here: %s", h.Limits())
	}
	spec := h.Spec(testName(t), 64<<20, 1)
	spec.Owner = nobody
	t.Cleanup(func() { _ = Remove(spec) })
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := asNobody(t, "id -u; grep memory: /proc/self/cgroup\n")
	cmd.Stdout = f
	g, err := StartIn(spec, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, out); !strings.HasSuffix(got, ":memory:"+spec.Paths["memory"]) || !strings.HasPrefix(got, fmt.Sprintf("%d\n", nobody)) {
		t.Errorf("the job printed %q, want uid %d and memory group %s", got, nobody, spec.Paths["memory"])
	}
	for _, c := range spec.keys() {
		for file, owner := range map[string]uint32{"tasks": nobody, "cgroup.procs": 0, "memory.limit_in_bytes": 0, "": 0} {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(spec.dir(c), file), &st); err != nil {
				if file == "memory.limit_in_bytes" {
					continue
				}
				t.Fatal(err)
			}
			if st.Uid != owner {
				t.Errorf("%s/%s is uid %d's, want %d's", spec.dir(c), file, st.Uid, owner)
			}
		}
	}
	if err := g.Kill(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}

	// Without Owner the user's bash cannot move itself: nothing runs.
	spec.Owner = 0
	marker := filepath.Join(t.TempDir(), "ran")
	cmd = asNobody(t, "echo ran >"+marker+"\n")
	if _, err := StartIn(spec, cmd); err == nil || !strings.Contains(err.Error(), "could not move") {
		t.Errorf("StartIn as nobody without Owner = %v, want a failure to move", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the job ran (%v)", err)
	}
	_ = Remove(spec)
	assertGone(t, spec)
}

// BenchmarkV1StartInAsUser is BenchmarkV1StartIn's job run as another
// user: the group's `tasks` files given to them, bash started with their
// credentials.
func BenchmarkV1StartInAsUser(b *testing.B) {
	h, err := Detect()
	if err != nil || os.Geteuid() != 0 || h.Version() != 1 || !h.memory {
		b.Skip("needs root and cgroup v1 with the memory controller")
	}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		cmd := asNobody(b, "true\n")
		b.StartTimer()
		spec := h.Spec(fmt.Sprintf("berth-bench-%d-%d", os.Getpid(), i), 64<<20, 1)
		spec.Owner = nobody
		g, err := StartIn(spec, cmd)
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if err := g.Kill(time.Second); err != nil {
			b.Fatal(err)
		}
		if err := g.Delete(); err != nil {
			b.Fatal(err)
		}
	}
}
