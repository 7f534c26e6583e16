package agent

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// A job without a container that has an instance volume sees the host's
// directory at its path, and a /dev/shm of its shm_size; the host and a
// job running beside it see neither (the mounts are in the first job's
// own mount namespace). A read-only volume cannot be written, and an
// optional one that cannot be mounted is skipped with a word.
func TestNativeVolumesAndShmInMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mount namespaces for native jobs need a root agent")
	}
	a := testAgent(t)
	host := t.TempDir()  // the instance volume's directory
	ro := t.TempDir()    // mounted read-only
	ctl := t.TempDir()   // the jobs' signs to the test
	point := t.TempDir() // the mount point's parent, on the host
	target := filepath.Join(point, "data")
	if err := os.WriteFile(filepath.Join(host, "from-host"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const shm = 48 << 20
	env := []string{"PATH=" + os.Getenv("PATH"), "CTL=" + ctl, "T=" + target}
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 1, Env: env, ShmSize: shm,
		Mounts: []spec.Volume{
			{InstancePath: host, Path: target},
			{InstancePath: ro, Path: filepath.Join(point, "ro"), ReadOnly: true},
			{InstancePath: "/proc/nonexistent/x", Path: filepath.Join(point, "opt"), Optional: true},
		},
		Commands: []string{
			`cat "$T/from-host"`,
			`echo job1 > "$T/from-job"`,
			`echo $(( $(stat -f -c '%b * %S' /dev/shm) )) > "$CTL/shm"`,
			`touch "$T/../ro/x" 2>/dev/null && echo ro-writable`,
			`touch "$CTL/ready"`,
			`while [ ! -e "$CTL/go" ]; do sleep 0.05; done`,
		}})
	j1 := a.jobs[1]
	a.mu.Unlock()
	waitForFile(t, filepath.Join(ctl, "ready"))

	// The host sees what the job wrote in its own directory, and nothing
	// at the mount point.
	if b, err := os.ReadFile(filepath.Join(host, "from-job")); err != nil || string(b) != "job1\n" {
		t.Errorf("the host directory has %q, %v; want the job's file", b, err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("the host sees %d entries at the job's mount point, want none (a private namespace)", len(ents))
	}
	if b, err := os.ReadFile(filepath.Join(ctl, "shm")); err != nil || strings.TrimSpace(string(b)) != "50331648" {
		t.Errorf("the job's /dev/shm is %q bytes (%v), want 50331648", b, err)
	}

	// A second job, at the same time, without volumes: it sees neither
	// the volume nor the small /dev/shm.
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 2, Env: env, Commands: []string{
		`ls -A "$T"`,
		`echo $(( $(stat -f -c '%b * %S' /dev/shm) ))`,
	}})
	j2 := a.jobs[2]
	a.mu.Unlock()
	waitFor(t, a, "job 2's end", func() bool { return j2.exit != nil })
	out2 := strings.Join(readAll(t, filepath.Join(j2.dir, fileOutput)), "")
	if strings.Contains(out2, "from-") || strings.Contains(out2, "stdout:50331648\n") || j2.exit.ExitCode != 0 {
		t.Errorf("job 2 (exit %d) saw job 1's mounts: %q", j2.exit.ExitCode, out2)
	}

	if err := os.WriteFile(filepath.Join(ctl, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, "job 1's end", func() bool { return j1.exit != nil })
	out1 := strings.Join(readAll(t, filepath.Join(j1.dir, fileOutput)), "")
	if j1.exit.ExitCode != 0 || !strings.Contains(out1, "stdout:hello\n") || strings.Contains(out1, "ro-writable") ||
		!strings.Contains(out1, "optional volume /proc/nonexistent/x not mounted") {
		t.Errorf("job 1 exit %+v, output %q; want 0, the host's file read, the read-only volume unwritable, the optional one skipped", j1.exit, out1)
	}
}

// A volume that cannot be mounted and is not optional fails the job's
// start, saying which.
func TestNativeVolumeThatCannotMountFailsTheStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mount namespaces for native jobs need a root agent")
	}
	a := testAgent(t)
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 1, Env: []string{"PATH=" + os.Getenv("PATH")},
		Mounts:   []spec.Volume{{InstancePath: "/proc/nonexistent/x", Path: "/tmp/berth-never"}},
		Commands: []string{`echo ran`}})
	j := a.jobs[1]
	a.mu.Unlock()
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	out := strings.Join(readAll(t, filepath.Join(j.dir, fileOutput)), "")
	if j.exit.ExitCode != 127 || strings.Contains(out, "ran") || !strings.Contains(out, "volumes[0] (/proc/nonexistent/x:/tmp/berth-never)") {
		t.Errorf("exit %+v, output %q; want 127 and the volume named", j.exit, out)
	}
}

// As another user, in the job's cgroup: the mounting copy drops to the
// user after mounting (a missing volume directory is made theirs), and
// the job runs in its cgroup.
func TestNativeVolumesAsItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip(err)
	}
	a := testAgent(t)
	if h, err := cgroup.Detect(); err == nil {
		a.cg = h
	}
	spool, err := os.MkdirTemp("", "berth-spool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(spool) })
	if err := os.Chmod(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	a.cfg.SpoolDir = filepath.Join(spool, "spool")
	base, err := os.MkdirTemp("", "berth-vol-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil { // the user reaches the mount point
		t.Fatal(err)
	}
	host := filepath.Join(base, "made") // missing: made, owned by nobody
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 3, User: "nobody", Alloc: api.Alloc{CPUs: 1, Memory: 64 << 20}, ShmSize: 16 << 20,
		Mounts:   []spec.Volume{{InstancePath: host, Path: filepath.Join(base, "mnt")}},
		Commands: []string{`id -u`, `echo hi > "` + filepath.Join(base, "mnt") + `/f"`, `grep -c ':/.*berth' /proc/self/cgroup`},
		Env:      []string{"PATH=" + os.Getenv("PATH")}})
	j := a.jobs[3]
	a.mu.Unlock()
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	out, _ := jobOutput(t, j.dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if j.exit.ExitCode != 0 || len(lines) < 2 || lines[0] != nobody.Uid || (a.cg != nil && lines[1] == "0") {
		t.Fatalf("exit %+v, output %q; want uid %s, in its cgroup", j.exit, out, nobody.Uid)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(host, "f"), &st); err != nil || strconv.Itoa(int(st.Uid)) != nobody.Uid {
		t.Errorf("the job's file in the volume: uid %d, %v; want nobody's", st.Uid, err)
	}
}
