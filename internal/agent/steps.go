package agent

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
)

// A job's srun steps run their tasks in process groups of their own, as
// slurmstepd keeps a step's tasks apart from the batch shell: then a
// signal for the steps (Slurm's --signal without B:, sent to a job's steps
// and not to its batch script) can miss the batch shell. srun on the
// batch node and `berth step-host` on the others record each task's group
// as an empty file named for its id in the job's steps directory
// ($BERTH_JOB_DIR/steps), and remove it when the task ends.
//
// The directory is the job user's, so the shim (root, maybe) trusts none
// of its names: a group is signalled only while its leader is alive in the
// shim's own session, which holds this job and nothing else (the agent
// starts each shim in a session of its own, and a process cannot join a
// group of another session).

// StepsDirName is the directory under BERTH_JOB_DIR where a job's step
// tasks record their process groups.
const StepsDirName = "steps"

// stepGroups lists the process groups recorded in stepsDir that belong to
// the job, less its main group (the batch shell's, main).
func stepGroups(stepsDir string, main int) []int {
	ents, err := os.ReadDir(stepsDir)
	if err != nil {
		return nil
	}
	sid, err := unix.Getsid(0)
	if err != nil {
		return nil
	}
	own := unix.Getpgrp()
	var out []int
	for _, e := range ents {
		g, err := strconv.Atoi(e.Name())
		if err != nil || g <= 1 || g == main || g == own {
			continue
		}
		if s, err := unix.Getsid(g); err != nil || s != sid {
			continue
		}
		if p, err := unix.Getpgid(g); err != nil || p != g {
			continue
		}
		out = append(out, g)
	}
	return out
}

// signalSteps sends sig to every task of the job's steps running here.
func signalSteps(stepsDir string, main int, sig unix.Signal) {
	for _, g := range stepGroups(stepsDir, main) {
		_ = unix.Kill(-g, sig)
	}
}

// RecordStepTask notes, for the job's shim, that the task whose process
// group is pgid runs a step of the job whose directory is jobDir
// (BERTH_JOB_DIR); the returned function removes the note once the task
// has ended. Without jobDir (not inside a job) nothing is recorded.
func RecordStepTask(jobDir string, pgid int) (done func()) {
	if jobDir == "" || pgid <= 1 {
		return func() {}
	}
	dir := filepath.Join(jobDir, StepsDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return func() {}
	}
	path := filepath.Join(dir, strconv.Itoa(pgid))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return func() {}
	}
	f.Close()
	return func() { _ = os.Remove(path) }
}

// warnJob sends the job its `signal:` warning as slurmctld does: SIGCONT
// first (a stopped task could not act on it), then the signal. B: goes to
// the batch shell (the job's main process) only; S: (Slurm's default) to
// the tasks of the job's steps running here only; neither, to every
// process of the job (signalJob). sent is false when S: found no step
// running: the shim tries again a second later, as Slurm's periodic
// check, which comes up to 30 s after the job starts, finds the steps a
// script starts first.
func warnJob(sig *api.SignalAt, main int, stepsDir string, signalJob func(unix.Signal)) (sent bool) {
	n := unix.Signal(sig.Number)
	switch {
	case sig.BatchOnly:
		_ = unix.Kill(main, unix.SIGCONT)
		_ = unix.Kill(main, n)
	case sig.StepsOnly:
		groups := stepGroups(stepsDir, main)
		for _, g := range groups {
			_ = unix.Kill(-g, unix.SIGCONT)
		}
		for _, g := range groups {
			_ = unix.Kill(-g, n)
		}
		return len(groups) > 0
	default:
		signalJob(n)
	}
	return true
}
