package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func execShim(dir string) *exec.Cmd { return exec.Command(os.Args[0], "berth-shim", dir) }

func TestShimExitCodeAndOutput(t *testing.T) {
	lines := []string{"echo out", "echo err >&2", "echo out2", "echo err2 >&2", "exit 3"}
	ex, out := shimRun(t, shimSpec{Script: script(lines), Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: t.TempDir()}, nil)
	if ex.ExitCode != 3 || ex.Reason != "" || ex.Signal != "" {
		t.Errorf("exit = %+v, want code 3, no reason", ex)
	}
	// One pipe by default: the order of the job's writes is kept exactly.
	if out != "[stdout]out\nerr\nout2\nerr2\n" {
		t.Errorf("output = %q", out)
	}
	_, out = shimRun(t, shimSpec{Script: "echo a; echo b >&2", Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: t.TempDir(), SplitStderr: true}, nil)
	if out != "[stdout]a\n[stderr]b\n" && out != "[stderr]b\n[stdout]a\n" {
		t.Errorf("split output = %q, want stdout and stderr apart", out)
	}
	if ex.StartedAt.IsZero() || ex.FinishedAt.Before(ex.StartedAt) {
		t.Errorf("times = %v .. %v", ex.StartedAt, ex.FinishedAt)
	}
}

func TestShimEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	ex, out := shimRun(t, shimSpec{Script: "echo $GREETING; pwd", Env: []string{"GREETING=hi", "PATH=" + os.Getenv("PATH")}, Dir: dir}, nil)
	if ex.ExitCode != 0 || out != "[stdout]hi\n"+dir+"\n" {
		t.Errorf("exit %+v, output %q", ex, out)
	}
}

// A job that cannot start says why, naming its working directory when
// that is the cause (it said "fork/exec /usr/bin/bash: no such file or
// directory", as if bash were missing).
func TestShimStartFailure(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		dir, want string
	}{
		"missing":       {"/nonexistent/berth/dir", "berth: cannot start the job: its working directory /nonexistent/berth/dir (working_dir) does not exist on this node\n"},
		"not directory": {file, "berth: cannot start the job: its working directory " + file + " (working_dir) is not a directory\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ex, out := shimRun(t, shimSpec{Script: "true", Dir: tc.dir}, nil)
			if ex.Reason != exitStartFailed || ex.ExitCode != 127 || ex.Message != tc.want {
				t.Errorf("exit = %+v, want start_failed 127 %q", ex, tc.want)
			}
			if out != "[stderr]"+tc.want {
				t.Errorf("output %q, want %q", out, tc.want)
			}
		})
	}
}

// A script over Linux's limit for one argument (128 KiB) runs: bash reads
// it from a file in the job's directory. (As `bash -c SCRIPT` it failed to
// start with "argument list too long".)
func TestShimLongScript(t *testing.T) {
	script := "# " + strings.Repeat("x", 200<<10) + "\necho \"$0\" ran\nexit 4\n"
	dir := t.TempDir()
	ex, out := shimRun(t, shimSpec{Script: script, Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: dir}, nil)
	if ex.ExitCode != 4 || ex.Reason != "" {
		t.Errorf("exit = %+v, want 4", ex)
	}
	if !strings.HasPrefix(out, "[stdout]/") || !strings.HasSuffix(out, "/"+fileScript+" ran\n") {
		t.Errorf("output %q, want the script's own file as $0", out)
	}
}

func TestShimMaxDuration(t *testing.T) {
	start := time.Now()
	ex, out := shimRun(t, shimSpec{Script: "trap 'echo term; exit 0' TERM; echo up; sleep 30 & wait", Env: []string{"PATH=" + os.Getenv("PATH")},
		Dir: t.TempDir(), MaxDuration: 1, Grace: 5}, nil)
	if ex.Reason != exitMaxDuration {
		t.Errorf("reason = %q, want %q", ex.Reason, exitMaxDuration)
	}
	if out != "[stdout]up\nterm\n" {
		t.Errorf("output = %q: the job must get SIGTERM first", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

// A graceful stop that the job ignores ends in SIGKILL after the grace
// period, and nothing of the job's process group survives.
func TestShimStopGraceThenKill(t *testing.T) {
	marker := "berth-shim-test-" + strings.ReplaceAll(t.Name(), "/", "-")
	ex, _ := shimRun(t, shimSpec{Script: "trap '' TERM; (exec -a " + marker + " sleep 60) & echo ready; wait", Env: []string{"PATH=" + os.Getenv("PATH")},
		Dir: t.TempDir(), Grace: 1}, func(pid int) {
		time.Sleep(300 * time.Millisecond)
		_ = unix.Kill(pid, sigStop)
	})
	if ex.Reason != exitStopped || ex.Signal != "SIGKILL" || ex.ExitCode != 137 {
		t.Errorf("exit = %+v, want stopped by SIGKILL", ex)
	}
	if pids := processesNamed(marker); len(pids) > 0 {
		t.Errorf("processes of the job survived: %v", pids)
	}
}

func TestShimAbort(t *testing.T) {
	start := time.Now()
	ex, _ := shimRun(t, shimSpec{Script: "sleep 60", Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: t.TempDir(), Grace: 30}, func(pid int) {
		time.Sleep(200 * time.Millisecond)
		_ = unix.Kill(pid, sigAbort)
	})
	if ex.Reason != exitAborted || ex.Signal != "SIGKILL" {
		t.Errorf("exit = %+v, want aborted by SIGKILL", ex)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("abort waited %v: it must not wait for the grace period", d)
	}
}

func processesNamed(marker string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			found = append(found, e.Name())
		}
	}
	return found
}
