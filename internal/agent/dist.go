package agent

import (
	"os"
	"path/filepath"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// Distributed runs and time-limit signals, on the node's side.
//
// The server composes the run's MPI hostfile (one "ADDR slots=N" line per
// node, in rank order); the agent writes it into the job's directory and
// names it in DSTACK_MPI_HOSTFILE, ahead of the server's variables and the
// run's env, which may name another. A container job finds it mounted
// read-only at containerHostfile.
//
// A run's `signal:` reaches the shim in the assignment: the shim sends it
// Before seconds ahead of max_duration, to every process of the job (its
// cgroup, else its process group), or with BatchOnly (Slurm's `B:`) to the
// job's main process only, the shell that runs `commands`.

// fileHostfile is the job's MPI hostfile in its directory.
const fileHostfile = "mpi_hostfile"

// containerHostfile is where a container job finds it.
const containerHostfile = "/berth/mpi_hostfile"

// writeHostfile writes the run's hostfile into the job's directory dir and
// returns the variable that names it (none when the server sent none).
func writeHostfile(dir string, asg api.Assignment) ([]string, error) {
	if asg.Hostfile == "" {
		return nil, nil
	}
	abs, err := filepath.Abs(filepath.Join(dir, fileHostfile))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(abs, []byte(asg.Hostfile), 0o644); err != nil {
		return nil, err
	}
	return []string{"DSTACK_MPI_HOSTFILE=" + abs}, nil
}

// signalDue is when the run's `signal:` is due, counted from the job's
// start: Before ahead of the time limit, at once when the limit is nearer
// than that (as Slurm). ok is false when there is nothing to send.
func signalDue(asg api.Assignment) (d time.Duration, ok bool) {
	sig := asg.Signal
	if sig == nil || asg.MaxDuration <= 0 || sig.Number <= 0 {
		return 0, false
	}
	return max(time.Duration(asg.MaxDuration-sig.Before)*time.Second, 0), true
}

// containerHostfileEnv names the hostfile where a container job finds it.
func containerHostfileEnv(asg api.Assignment) []string {
	if asg.Hostfile == "" {
		return nil
	}
	return []string{"DSTACK_MPI_HOSTFILE=" + containerHostfile}
}
