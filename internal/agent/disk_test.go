package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
)

// tmpfsDir mounts a tmpfs of size bytes on a directory of its own, and
// unmounts it when the test ends. Mounting needs root (CAP_SYS_ADMIN):
// without, the test is skipped.
func tmpfsDir(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (needs root): %v", err)
	}
	// Registered after TempDir's own cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// diskAgent is testAgent on the data directory dir.
func diskAgent(t *testing.T, dir string) *Agent {
	t.Helper()
	a, err := New(Config{Name: "n1", DataDir: dir, ShimCommand: []string{os.Args[0], "berth-shim"}, NoCgroups: true,
		Monitor: Monitoring{MinFreeDisk: 256 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "jobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	return a
}

// waitForFile polls until path exists.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 60s for %s", path)
		}
	}
}

// A job that fills the node's disk with its output goes on: the shim keeps
// draining its pipe (8 MB go through it into a 4 MB disk, and the job gets
// past them), drops what it cannot write, and says how much once it can
// write again; its output stays a file of whole frames; its status is
// written although the disk is full; the node reports itself failed (disk
// full) while it is, and healthy once room is back.
func TestFullDiskDropsOutputAndGoesOn(t *testing.T) {
	data := tmpfsDir(t, 4<<20)
	ctl := t.TempDir() // on another disk: the job's signs to the test
	a := diskAgent(t, data)
	filler := filepath.Join(data, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if f := a.diskFindings(); len(f) != 0 {
		t.Fatalf("disk findings with room to spare: %v", f)
	}
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 1, Env: []string{"PATH=" + os.Getenv("PATH"), "CTL=" + ctl}, Commands: []string{
		`head -c 8388608 /dev/zero | tr '\0' x`,
		`echo`,
		`touch "$CTL/written"`,
		`while [ ! -e "$CTL/go" ]; do sleep 0.05; done`,
		`echo after`,
	}})
	j := a.jobs[1]
	a.mu.Unlock()

	waitForFile(t, filepath.Join(ctl, "written"))
	h := a.checkHealth(t.Context(), time.Second)
	if h.Status != api.HealthFailure || !strings.Contains(h.Reason, "disk full: data directory "+data+" has ") {
		t.Errorf("health on a full disk: %+v, want a failure (disk full)", h)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctl, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.ExitCode != 0 || j.exit.Reason != "" || j.exit.Message != "" || j.exit.OutputLost == 0 {
		t.Errorf("exit %+v, want 0, no reason, output lost and said so in the output", j.exit)
	}

	// The output is the x's and the newline that could be written, and in
	// their place lines that count the bytes lost: one, unless the disk
	// had room again for a moment (truncated pages are not always freed
	// at once) and lost more after. Nothing is lost without a word.
	frames := readAll(t, filepath.Join(j.dir, fileOutput))
	written, said, lines := 0, 0, 0
	for _, f := range frames[:len(frames)-1] {
		if m := lostRE.FindStringSubmatch(f); m != nil {
			n, _ := strconv.Atoi(m[1])
			said += n
			lines++
			continue
		}
		s, ok := strings.CutPrefix(f, "stdout:")
		if !ok || strings.Trim(s, "x\n") != "" {
			t.Fatalf("frame %q among the x's", f[:min(len(f), 200)])
		}
		written += len(s)
	}
	if lines == 0 || written+said != 8<<20+1 || int64(said) != j.exit.OutputLost {
		t.Errorf("%d bytes written and %d said lost in %d lines (%d in the status), want 8388609 in all", written, said, lines, j.exit.OutputLost)
	}
	if frames[len(frames)-1] != "stdout:after\n" {
		t.Errorf("last frame %q, want the job's last line once there is room", frames[len(frames)-1])
	}
	if h := a.checkHealth(t.Context(), time.Second); h.Status != api.HealthOK {
		t.Errorf("health with room again: %+v, want ok", h)
	}
	if evs := drain(a); evs[len(evs)-1].Type != "exited" {
		t.Errorf("the job's end is not reported: last event %+v", evs[len(evs)-1])
	}
}

// drain takes every event the agent has to send, as a server that
// acknowledges each batch would.
func drain(a *Agent) []api.AgentEvent {
	var all []api.AgentEvent
	for range 1000 {
		evs, _ := a.collect()
		if len(evs) == 0 {
			break
		}
		ack := &api.AgentAck{LogSize: map[int64]int64{}}
		for _, e := range evs {
			if e.Type == "log" {
				ack.LogSize[e.JobID] = e.Offset + e.Size
			}
		}
		a.acked(evs, ack)
		all = append(all, evs...)
	}
	return all
}

// A stop or an abort ends a job whose output filled the disk, for good:
// its status is written, and the agent reports its end (it used to wait
// for the rest of a frame cut short, and the run never ended).
func TestFullDiskStopEndsTheJob(t *testing.T) {
	for name, abort := range map[string]bool{"stop": false, "abort": true} {
		t.Run(name, func(t *testing.T) {
			data := tmpfsDir(t, 2<<20)
			ctl := t.TempDir()
			a := diskAgent(t, data)
			a.mu.Lock()
			a.startLocked(api.Assignment{JobID: 1, Env: []string{"PATH=" + os.Getenv("PATH"), "CTL=" + ctl}, Commands: []string{
				`head -c 8388608 /dev/zero | tr '\0' y`, `touch "$CTL/written"`, `sleep 600`,
			}})
			j := a.jobs[1]
			a.mu.Unlock()
			waitForFile(t, filepath.Join(ctl, "written"))
			a.stop(1, abort)
			waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
			want := exitStopped
			if abort {
				want = exitAborted
			}
			if j.exit.Reason != want || j.exit.OutputLost == 0 || lossSaid(t, j) != j.exit.OutputLost {
				t.Errorf("exit %+v, want %s, with the output lost said (%d)", j.exit, want, lossSaid(t, j))
			}
			var types []string
			for _, e := range drain(a) {
				if e.Type != "log" {
					types = append(types, e.Type)
				}
			}
			if diff := cmp.Diff([]string{"started", "exited"}, types); diff != "" {
				t.Errorf("events but the output (-want +got):\n%s", diff)
			}
			readAll(t, filepath.Join(j.dir, fileOutput)) // whole frames, to the end
		})
	}
}

// A job that fills the disk with a file of its own still gets its status
// written (into room its shim took before starting it), and what it then
// says is counted as lost.
func TestFullDiskStatusIsWritten(t *testing.T) {
	data := tmpfsDir(t, 2<<20)
	a := diskAgent(t, data)
	j := runTestJob(t, a, 1, `cat /dev/zero >"$BERTH_JOB_DIR/fill"`)
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.ExitCode != 1 || j.exit.Reason != "" || j.exit.OutputLost == 0 || lossSaid(t, j) != j.exit.OutputLost {
		t.Errorf("exit %+v, want 1 (cat's write error), with its message lost and said so (%d)", j.exit, lossSaid(t, j))
	}
	if evs := drain(a); len(evs) == 0 || evs[len(evs)-1].Type != "exited" {
		t.Errorf("the job's end is not reported: %+v", evs)
	}
	if f := a.diskFindings(); len(f) != 1 || !strings.HasPrefix(f[0].text, "disk full: data directory "+data) {
		t.Errorf("disk findings %v, want disk full", f)
	}
}

// lostRE is a line that says how much output was lost, and why.
var lostRE = regexp.MustCompile(`^(?:stderr:berth: )?(\d+) bytes of output lost: write .*output\.log: no space left on device\n?$`)

// lossSaid is the output j's job lost, as said in its output and, for what
// was lost at the end, in its status message.
func lossSaid(t *testing.T, j *localJob) int64 {
	t.Helper()
	var said int64
	for _, f := range append(readAll(t, filepath.Join(j.dir, fileOutput)), j.exit.Message) {
		if m := lostRE.FindStringSubmatch(f); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			said += n
		}
	}
	return said
}

func TestDiskVerdict(t *testing.T) {
	tests := map[string]struct {
		free, total     int64
		freeInodes, all uint64
		least           int64
		want            []finding
	}{
		"room":           {free: 10 << 30, total: 100 << 30, freeInodes: 1000, all: 2000},
		"under 64MB":     {free: 60 << 20, total: 100 << 30, freeInodes: 1000, all: 2000, want: []finding{{api.HealthFailure, "disk full: data directory /d has 60.0MB free of 100.0GB (under 64.0MB)"}}},
		"small disk 5%":  {free: 60 << 20, total: 1 << 30, freeInodes: 1000, all: 2000},
		"small full":     {free: 50 << 10, total: 1 << 30, freeInodes: 1000, all: 2000, want: []finding{{api.HealthFailure, "disk full: data directory /d has 50.0KB free of 1.0GB (under 51.2MB)"}}},
		"configured":     {free: 2 << 30, total: 100 << 30, freeInodes: 1000, all: 2000, least: 4 << 30, want: []finding{{api.HealthFailure, "disk full: data directory /d has 2.0GB free of 100.0GB (under 4.0GB)"}}},
		"no inodes":      {free: 10 << 30, total: 100 << 30, freeInodes: 3, all: 2000, want: []finding{{api.HealthFailure, "disk full: data directory /d has 3 inodes free of 2000"}}},
		"no inode count": {free: 10 << 30, total: 100 << 30},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := diskVerdict("/d", tc.free, tc.total, tc.freeInodes, tc.all, tc.least)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(finding{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
