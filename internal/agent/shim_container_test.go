package agent

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

var containerJobID = time.Now().UnixNano() % 1e9

// containerJob is a job of the test image running commands.
func containerJob(commands ...string) shimSpec {
	containerJobID++
	return shimSpec{Grace: 10, Assignment: api.Assignment{JobID: containerJobID, RunID: 1, Commands: commands,
		Env: []string{"BERTH_NODE_NAME=shimtest"}, Container: &api.Container{Image: containertest.Image}}}
}

// startContainerShim starts the real shim on a new job directory; the test
// fails if any container of that directory outlives it.
func startContainerShim(t *testing.T, e *container.Engine, sp shimSpec) (string, *exec.Cmd) {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(sp)
	if err := os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left, err := e.Find(context.Background(), map[string]string{container.LabelDir: dir})
		if err != nil {
			t.Errorf("find: %v", err)
		}
		for _, c := range left {
			t.Errorf("container %s outlived its shim", c.Name)
			_ = c.Remove(context.Background())
		}
	})
	return dir, execShimIn(t, dir)
}

func execShimIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := execShim(dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// finishShim waits for the shim and returns its exit and the job's output,
// stream by stream.
func finishShim(t *testing.T, dir string, cmd *exec.Cmd) (ex shimExit, stdout, stderr string) {
	t.Helper()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shim: %v", err)
	}
	if err := readJSON(filepath.Join(dir, fileExit), &ex); err != nil {
		t.Fatal(err)
	}
	out, errs := jobOutput(t, dir)
	return ex, out, errs
}

func jobOutput(t *testing.T, dir string) (stdout, stderr string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, fileOutput))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	frames, _, err := ReadFrames(f, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var o, e strings.Builder
	for _, fr := range frames {
		if fr.Stream == "stdout" {
			o.Write(fr.Data)
		} else {
			e.Write(fr.Data)
		}
	}
	return o.String(), e.String()
}

func waitForOutput(t *testing.T, dir, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, fileOutput)); err == nil {
			if o, _ := jobOutput(t, dir); strings.Contains(o, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the job's output after 30s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestShimContainerOutputEnvAndExit(t *testing.T) {
	e := containertest.Engine(t)
	vol := t.TempDir()
	sp := containerJob("echo out", "echo err >&2", `echo "$GREETING in $(pwd) as $(id -u)" > /data/f`, "exit 3")
	sp.Assignment.Env = append(sp.Assignment.Env, "GREETING=hi")
	sp.Assignment.WorkingDir = "/w"
	sp.Assignment.Container.Volumes = []spec.Volume{{InstancePath: vol, Path: "/data"}}
	// The host's variables stay out of the container.
	t.Setenv("BERTH_HOST_ONLY", "leak")
	sp.Assignment.Commands = append([]string{`test -z "$BERTH_HOST_ONLY" || echo leaked`}, sp.Assignment.Commands...)
	dir, cmd := startContainerShim(t, e, sp)
	ex, out, errs := finishShim(t, dir, cmd)
	if ex.ExitCode != 3 || ex.Reason != "" || ex.StartedAt.IsZero() || ex.FinishedAt.Before(ex.StartedAt) {
		t.Errorf("exit = %+v, want 3 and no reason", ex)
	}
	if out != "out\n" || errs != "err\n" {
		t.Errorf("stdout %q, stderr %q", out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "f")); err != nil || string(b) != "hi in /w as 0\n" {
		t.Errorf("volume file %q, %v", b, err)
	}
}

// A container job's script over Linux's limit for one argument (128 KiB)
// runs: the shell reads it from a file mounted into the container.
func TestShimContainerLongScript(t *testing.T) {
	e := containertest.Engine(t)
	dir, cmd := startContainerShim(t, e, containerJob("# "+strings.Repeat("x", 200<<10), `echo "$0 ran"`))
	ex, out, errs := finishShim(t, dir, cmd)
	if ex.ExitCode != 0 || ex.Reason != "" || out != containerScript+" ran\n" {
		t.Errorf("exit %+v, stdout %q, stderr %q: want the script run from %s", ex, out, errs, containerScript)
	}
}

func TestShimContainerStop(t *testing.T) {
	e := containertest.Engine(t)
	t.Run("exits within grace", func(t *testing.T) {
		vol := t.TempDir()
		sp := containerJob("trap 'echo term > /data/marker; exit 0' TERM", "echo ready", "sleep 60 & wait")
		sp.Assignment.Container.Volumes = []spec.Volume{{InstancePath: vol, Path: "/data"}}
		dir, cmd := startContainerShim(t, e, sp)
		waitForOutput(t, dir, "ready")
		begin := time.Now()
		_ = unix.Kill(cmd.Process.Pid, sigStop)
		ex, _, _ := finishShim(t, dir, cmd)
		if ex.Reason != exitStopped || ex.ExitCode != 0 || time.Since(begin) > 8*time.Second {
			t.Errorf("exit = %+v after %v, want stopped with 0 from the trap", ex, time.Since(begin))
		}
		if b, err := os.ReadFile(filepath.Join(vol, "marker")); err != nil || string(b) != "term\n" {
			t.Errorf("marker %q, %v", b, err)
		}
	})
	t.Run("killed after grace", func(t *testing.T) {
		sp := containerJob("trap '' TERM", "echo ready", "sleep 60 & wait")
		sp.Grace = 1
		dir, cmd := startContainerShim(t, e, sp)
		waitForOutput(t, dir, "ready")
		_ = unix.Kill(cmd.Process.Pid, sigStop)
		ex, _, _ := finishShim(t, dir, cmd)
		if ex.Reason != exitStopped || ex.ExitCode != 137 || ex.Signal != "SIGKILL" {
			t.Errorf("exit = %+v, want stopped by SIGKILL", ex)
		}
	})
	t.Run("abort", func(t *testing.T) {
		sp := containerJob("echo ready", "sleep 60")
		sp.Grace = 30
		dir, cmd := startContainerShim(t, e, sp)
		waitForOutput(t, dir, "ready")
		begin := time.Now()
		_ = unix.Kill(cmd.Process.Pid, sigAbort)
		ex, _, _ := finishShim(t, dir, cmd)
		if ex.Reason != exitAborted || ex.Signal != "SIGKILL" || time.Since(begin) > 10*time.Second {
			t.Errorf("exit = %+v after %v, want aborted at once", ex, time.Since(begin))
		}
	})
	t.Run("max_duration", func(t *testing.T) {
		sp := containerJob("trap 'echo term; exit 0' TERM", "echo up", "sleep 60 & wait")
		sp.MaxDuration = 1
		dir, cmd := startContainerShim(t, e, sp)
		ex, out, _ := finishShim(t, dir, cmd)
		if ex.Reason != exitMaxDuration || out != "up\nterm\n" {
			t.Errorf("exit = %+v, output %q: want max_duration after SIGTERM", ex, out)
		}
	})
	t.Run("stopped before it started", func(t *testing.T) {
		sp := containerJob("echo never")
		dir := t.TempDir()
		b, _ := json.Marshal(sp)
		_ = os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600)
		_ = os.WriteFile(filepath.Join(dir, fileStop), []byte("1"), 0o600)
		ex, out, _ := finishShim(t, dir, execShimIn(t, dir))
		if ex.Reason != exitStopped || !ex.StartedAt.IsZero() || out != "" {
			t.Errorf("exit = %+v, output %q", ex, out)
		}
	})
}

func TestShimContainerOOM(t *testing.T) {
	e := containertest.Engine(t)
	sp := containerJob("echo start", "dd if=/dev/zero of=/dev/null bs=100M count=1", "echo survived")
	sp.Assignment.Alloc.Memory = 32 << 20
	dir, cmd := startContainerShim(t, e, sp)
	ex, out, errs := finishShim(t, dir, cmd)
	if ex.Reason != api.ReasonOOM || ex.ExitCode != 137 || ex.Signal != "SIGKILL" || strings.Contains(out, "survived") {
		t.Errorf("exit = %+v, output %q: want OOM", ex, out)
	}
	if !strings.Contains(errs, "berth: the job ran out of memory (it holds 32MB)") {
		t.Errorf("stderr %q does not say why", errs)
	}
}

func TestShimContainerStartFailures(t *testing.T) {
	e := containertest.Engine(t)
	t.Run("missing image", func(t *testing.T) {
		sp := containerJob("true")
		sp.Assignment.Container.Image = "local/berth-no-such-image:missing"
		dir, cmd := startContainerShim(t, e, sp)
		ex, _, errs := finishShim(t, dir, cmd)
		if ex.Reason != exitStartFailed || ex.ExitCode != 127 || !strings.Contains(errs, "cannot start the job's container") {
			t.Errorf("exit = %+v, stderr %q", ex, errs)
		}
	})
	t.Run("network volume", func(t *testing.T) {
		sp := containerJob("true")
		sp.Assignment.Container.Volumes = []spec.Volume{{Name: "data", Path: "/data"}}
		dir, cmd := startContainerShim(t, e, sp)
		ex, _, errs := finishShim(t, dir, cmd)
		if ex.Reason != exitStartFailed || !strings.Contains(errs, "network volumes are not supported") {
			t.Errorf("exit = %+v, stderr %q", ex, errs)
		}
	})
	t.Run("no engine", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix:///nonexistent/berth.sock")
		dir := t.TempDir()
		b, _ := json.Marshal(containerJob("true"))
		_ = os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600)
		ex, _, errs := finishShim(t, dir, execShimIn(t, dir))
		if ex.Reason != exitStartFailed || !strings.Contains(errs, "this node has no container engine") {
			t.Errorf("exit = %+v, stderr %q", ex, errs)
		}
	})
}

// A shim killed while its container runs is replaced by a new shim on the
// same directory: it finds the container, resumes the output at the byte the
// first one stopped at (no line lost or doubled), and records the exit.
func TestShimContainerReattach(t *testing.T) {
	e := containertest.Engine(t)
	sp := containerJob("for i in $(seq 1 30); do echo line$i; sleep 0.05; done", "exit 5")
	dir, first := startContainerShim(t, e, sp)
	waitForOutput(t, dir, "line5\n")
	_ = first.Process.Kill()
	_ = first.Wait()
	if _, err := os.Stat(filepath.Join(dir, fileExit)); err == nil {
		t.Fatal("the first shim recorded an exit: the job ended too soon for this test")
	}
	second := execShimIn(t, dir)
	ex, out, _ := finishShim(t, dir, second)
	var want strings.Builder
	for i := 1; i <= 30; i++ {
		want.WriteString("line" + strconv.Itoa(i) + "\n")
	}
	if ex.ExitCode != 5 || ex.Reason != "" || ex.StartedAt.IsZero() {
		t.Errorf("exit = %+v, want 5", ex)
	}
	if out != want.String() {
		t.Errorf("output across the two shims:\n%q\nwant\n%q", out, want.String())
	}
}

// An agent that restarts and finds a container job whose shim is gone
// starts a new shim, which takes the running container over.
func TestAgentRestoreResumesContainer(t *testing.T) {
	e := containertest.Engine(t)
	data := t.TempDir()
	sp := containerJob("echo begin", "sleep 1", "echo end", "exit 7")
	dir := filepath.Join(data, "jobs", strconv.FormatInt(sp.Assignment.JobID, 10))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sp)
	if err := os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left, _ := e.Find(context.Background(), map[string]string{container.LabelDir: dir})
		for _, c := range left {
			t.Errorf("container %s outlived its shims", c.Name)
			_ = c.Remove(context.Background())
		}
	})
	first := execShimIn(t, dir)
	waitForOutput(t, dir, "begin\n")
	_ = first.Process.Kill()
	_ = first.Wait()

	a, err := New(Config{Name: "n1", DataDir: data, ShimCommand: []string{os.Args[0], "berth-shim"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.restore(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.mu.Lock()
		j := a.jobs[sp.Assignment.JobID]
		var ex *shimExit
		if j != nil {
			ex = j.exit
		}
		a.mu.Unlock()
		if ex != nil {
			if ex.ExitCode != 7 || ex.Reason != "" {
				t.Errorf("exit = %+v, want 7 from the container", ex)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not finish after the agent restored it")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, _ := jobOutput(t, dir); out != "begin\nend\n" {
		t.Errorf("output %q, want begin and end once each", out)
	}
}

// A finished job's directory goes with any container its shim left behind.
func TestAgentRemovesLeftoverContainer(t *testing.T) {
	e := containertest.Engine(t)
	dir := t.TempDir()
	name := container.NewName("shimtest", containerJobID)
	c, err := e.Create(context.Background(), container.Spec{Name: name, Image: containertest.Image, Cmd: []string{"true"},
		Labels: map[string]string{container.LabelDir: dir}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Remove(context.Background()) })
	if err := writeJSONAtomic(filepath.Join(dir, fileContainer), containerRecord{Name: name, Started: true}); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Name: "n1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	j := &localJob{id: 1, dir: dir, exit: &shimExit{}}
	a.mu.Lock()
	a.jobs[1] = j
	a.removeLocked(j)
	a.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := e.Get(context.Background(), name); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leftover container is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A container removed behind the shim's back (docker rm -f) ends the job:
// killed (137) when the engine still tells the exit, else lost; never a
// shim waiting for ever.
func TestShimContainerRemovedBehindItsBack(t *testing.T) {
	e := containertest.Engine(t)
	dir, cmd := startContainerShim(t, e, containerJob("echo ready", "sleep 60"))
	waitForOutput(t, dir, "ready")
	found, err := e.Find(context.Background(), map[string]string{container.LabelDir: dir})
	if err != nil || len(found) != 1 {
		t.Fatalf("Find = %v, %v", found, err)
	}
	if err := found[0].Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	ex, _, _ := finishShim(t, dir, cmd)
	killed := ex.ExitCode == 137 && ex.Reason == ""
	lost := ex.Reason == api.ReasonLostByAgent && strings.Contains(ex.Message, "removed by someone else")
	if !killed && !lost {
		t.Errorf("exit = %+v, want killed (137) or lost", ex)
	}
}
