package agent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
)

// jobWithStep is a batch shell that starts a step as srun does: a task in
// a process group of its own (bash's job control), recorded in the job's
// steps directory. Each says whether USR1 reached it; the batch shell
// ends when the step does, or on USR1.
const jobWithStep = `set -m
(trap 'echo step got usr1; exit 0' USR1; echo $BASHPID >step.pid; while :; do sleep 0.2; done) &
mkdir -p "$BERTH_JOB_DIR/steps" && touch "$BERTH_JOB_DIR/steps/$!"
set +m
trap 'echo batch got usr1; exit 0' USR1
echo up
wait
echo step done`

// TestShimWarningStepsOrBatchShell: `signal:` with S: (sbatch's --signal
// without B:) reaches the tasks of the job's steps and not its batch
// shell; with B: the batch shell and not the steps. Either way the step's
// process group, which left the batch shell's, ends with the job.
func TestShimWarningStepsOrBatchShell(t *testing.T) {
	for name, tc := range map[string]struct {
		sig  api.SignalAt
		want []string
	}{
		"steps only": {api.SignalAt{Number: 10, Before: 55, StepsOnly: true}, []string{"step done", "step got usr1", "up"}},
		"batch only": {api.SignalAt{Number: 10, Before: 55, BatchOnly: true}, []string{"batch got usr1", "up"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, work := t.TempDir(), t.TempDir()
			asg := api.Assignment{MaxDuration: 60, Signal: &tc.sig}
			sp := shimSpec{Script: jobWithStep, Env: []string{"PATH=" + os.Getenv("PATH"), "BERTH_JOB_DIR=" + dir}, Dir: work,
				MaxDuration: asg.MaxDuration, Grace: 5, Assignment: asg}
			b, _ := json.Marshal(sp)
			if err := os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600); err != nil {
				t.Fatal(err)
			}
			ex, out, errs := finishShim(t, dir, execShimIn(t, dir))
			if ex.ExitCode != 0 || ex.Reason != "" {
				t.Errorf("exit = %+v (stderr %q), want 0 with no reason: the job ends on the signal, before its limit", ex, errs)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				// The step's `sleep` got it too (the whole group does),
				// which its shell may report.
				if l != "User defined signal 1" {
					lines = append(lines, l)
				}
			}
			slices.Sort(lines)
			if !slices.Equal(lines, tc.want) {
				t.Errorf("output %q, want the lines %q", out, tc.want)
			}
			b, err := os.ReadFile(filepath.Join(work, "step.pid"))
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			// The shim killed the step's group as the job ended; the
			// process may take a moment to be reaped by init.
			deadline := time.Now().Add(30 * time.Second)
			for pid > 0 && !errors.Is(unix.Kill(pid, 0), unix.ESRCH) && time.Now().Before(deadline) {
				if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(st), ") Z ") {
					break // a zombie: dead, not yet reaped
				}
				time.Sleep(20 * time.Millisecond)
			}
			if time.Now().After(deadline) {
				t.Errorf("the step's task %d outlived its job", pid)
			}
		})
	}
}

// TestStepGroupsTrustNothing: the steps directory is the job user's, so a
// name that is not a live process group of the shim's own session is not
// signalled: not init, not a process elsewhere, not a group that is gone.
func TestStepGroupsTrustNothing(t *testing.T) {
	dir := t.TempDir()
	done := RecordStepTask(dir, 1)
	done()
	for _, name := range []string{"1", "0", "-5", "abc", strconv.Itoa(os.Getppid()), "999999999"} {
		if err := os.MkdirAll(filepath.Join(dir, StepsDirName), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, StepsDirName, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sid, _ := unix.Getsid(0)
	got := stepGroups(filepath.Join(dir, StepsDirName), 0)
	for _, g := range got {
		if s, _ := unix.Getsid(g); s != sid || g <= 1 {
			t.Errorf("stepGroups returned %d, not a group of this session", g)
		}
	}
	if p := os.Getppid(); slices.Contains(got, p) {
		if s, _ := unix.Getsid(p); s != sid {
			t.Errorf("the test's parent %d (another session) would be signalled", p)
		}
	}
	done = RecordStepTask(dir, unix.Getpgrp())
	if got := stepGroups(filepath.Join(dir, StepsDirName), 0); slices.Contains(got, unix.Getpgrp()) {
		t.Errorf("the shim's own group %d would be signalled", unix.Getpgrp())
	}
	done()
	if _, err := os.Stat(filepath.Join(dir, StepsDirName, strconv.Itoa(unix.Getpgrp()))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record outlived its task: %v", err)
	}
}
