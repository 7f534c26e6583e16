package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSys writes a mountinfo and a /proc/self/cgroup into a temporary
// directory and returns the sys that reads them.
func fakeSys(t *testing.T, mountinfo, cgroup string) sys {
	t.Helper()
	dir := t.TempDir()
	mi, cg := filepath.Join(dir, "mountinfo"), filepath.Join(dir, "cgroup")
	writeFile(t, mi, mountinfo)
	writeFile(t, cg, cgroup)
	return sys{mountinfo: mi, cgroup: cg, pid: 4242}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A v1 host like this one: a controller per mount, the memory group nested
// in a sandbox, cpu and cpuacct mounted together behind a symlink.
func TestDetectV1Nested(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory/sandbox/s1", "cpu,cpuacct", "freezer"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("cpu,cpuacct", filepath.Join(root, "cpu")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "memory/sandbox/s1/memory.memsw.limit_in_bytes"), "9223372036854771712\n")
	mi := fmt.Sprintf(`31 23 0:28 / %[1]s rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / %[1]s/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / %[1]s/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / %[1]s/freezer rw,relatime - cgroup cgroup rw,freezer
41 31 0:38 / %[1]s/unified rw,relatime - cgroup2 cgroup2 rw
`, root)
	cg := "9:name=systemd:/\n6:freezer:/\n4:memory:/sandbox/s1\n1:cpu,cpuacct:/\n0::/\n"
	h, err := detect(fakeSys(t, mi, cg))
	if err != nil {
		t.Fatal(err)
	}
	if h.Version() != 1 || h.root != root {
		t.Fatalf("version %d root %s", h.Version(), h.root)
	}
	if diff := cmp.Diff(map[string]string{"memory": "/sandbox/s1", "cpu": "/", "freezer": "/"}, h.base); diff != "" {
		t.Errorf("base (-want +got):\n%s", diff)
	}
	if got := h.Limits(); got != "memory, cpu (cgroup v1)" {
		t.Errorf("Limits = %q", got)
	}
	s := h.Spec("berth-abc-7", 64<<20, 2)
	want := Spec{Version: 1, Root: root, Memory: 64 << 20, Swap: true, CPUs: 2,
		Paths: map[string]string{"memory": "/sandbox/s1/berth-abc-7", "cpu": "/berth-abc-7", "freezer": "/berth-abc-7"}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Spec (-want +got):\n%s", diff)
	}
	if got := s.Dirs(); !strings.HasSuffix(got[0], "cpu/berth-abc-7") || !strings.HasSuffix(got[2], "memory/sandbox/s1/berth-abc-7") {
		t.Errorf("Dirs = %v", got)
	}
}

// Without a memory controller the host still groups, and says what it
// does not limit.
func TestDetectV1NoMemory(t *testing.T) {
	root := t.TempDir()
	mi := fmt.Sprintf("32 31 0:29 / %[1]s/cpu rw - cgroup cgroup rw,cpu\n37 31 0:34 / %[1]s/freezer rw - cgroup cgroup rw,freezer\n", root)
	h, err := detect(fakeSys(t, mi, "2:cpu:/\n1:freezer:/\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Limits(); got != "cpu (cgroup v1; memory: not mounted)" {
		t.Errorf("Limits = %q", got)
	}
	if s := h.Spec("x", 1<<30, 1); s.Memory != 0 || s.CPUs != 1 {
		t.Errorf("Spec asks for what the host cannot limit: %+v", s)
	}
}

func TestDetectNone(t *testing.T) {
	_, err := detect(fakeSys(t, "22 1 0:21 / /proc rw - proc proc rw\n", "0::/\n"))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no cgroup hierarchy") {
		t.Errorf("err = %v", err)
	}
}

// fakeV2 lays out a unified hierarchy with the agent at /user.slice/agent.
func fakeV2(t *testing.T) (root string, s sys) {
	t.Helper()
	root = t.TempDir()
	agent := filepath.Join(root, "user.slice/agent")
	writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	writeFile(t, filepath.Join(root, "cgroup.subtree_control"), "cpu io memory pids\n")
	writeFile(t, filepath.Join(root, "user.slice/cgroup.subtree_control"), "cpu memory\n")
	writeFile(t, filepath.Join(agent, "cgroup.controllers"), "cpu memory pids\n")
	writeFile(t, filepath.Join(agent, "cgroup.procs"), "4242\n")
	writeFile(t, filepath.Join(agent, "cgroup.subtree_control"), "")
	mi := fmt.Sprintf("29 23 0:26 / %s rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", root)
	return root, fakeSys(t, mi, "0::/user.slice/agent\n")
}

func TestDetectV2EnablesControllers(t *testing.T) {
	root, s := fakeV2(t)
	h, err := detect(s)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version() != 2 || h.root != root || h.base[""] != "/user.slice/agent" {
		t.Fatalf("host = %+v", h)
	}
	if got := readFile(t, filepath.Join(root, "user.slice/agent/cgroup.subtree_control")); got != "+memory +cpu" {
		t.Errorf("subtree_control = %q, want the controllers enabled for the jobs", got)
	}
	if got := h.Limits(); got != "memory, cpu (cgroup v2)" {
		t.Errorf("Limits = %q", got)
	}
}

// When the kernel refuses to enable controllers (the agent's group holds
// processes), the agent moves into a leaf and tries again; if that fails
// too it says so and limits nothing.
func TestDetectV2CannotEnable(t *testing.T) {
	root, s := fakeV2(t)
	ctl := filepath.Join(root, "user.slice/agent/cgroup.subtree_control")
	// A directory in place of the file: every write fails, as EBUSY would.
	if err := os.Remove(ctl); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ctl, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := detect(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "user.slice/agent", v2Leaf, "cgroup.procs")); got != "4242" {
		t.Errorf("the agent did not move into its leaf: %q", got)
	}
	got := h.Limits()
	if !strings.HasPrefix(got, "none (cgroup v2; cannot enable memory, cpu for child groups of /user.slice/agent") || !strings.Contains(got, "Delegate=yes") {
		t.Errorf("Limits = %q", got)
	}
}

func TestDetectV2NotDelegated(t *testing.T) {
	root, s := fakeV2(t)
	writeFile(t, filepath.Join(root, "user.slice/agent/cgroup.controllers"), "pids\n")
	h, err := detect(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Limits(); got != "none (cgroup v2; memory: not delegated to /user.slice/agent; cpu: not delegated to /user.slice/agent)" {
		t.Errorf("Limits = %q", got)
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/mnt/a\040b\134c`); got != `/mnt/a b\c` {
		t.Errorf("unescape = %q", got)
	}
}
