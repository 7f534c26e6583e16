//go:build slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/berth-hq/berth/internal/client"
	"github.com/spf13/cobra"
)

// The lean build (`go build -tags slim`, what `make build` embeds in the
// full binary as berth-slurm) is the Slurm commands that only talk to the
// server: sbatch, squeue, scancel, sinfo, sacct, scontrol, sstat,
// sacctmgr, sreport, sshare, sprio. It links none of the server's, the
// agent's or the store's packages, whose initialisation costs the full
// binary ~10 ms on every call: a Slurm command starts about as fast as a
// Go program can. Anything else it is asked (srun, salloc, berth's own
// commands) it hands, arguments unchanged, to the full binary, which
// install-slurm-shims links beside it as berth-slurm.full.
const lean = true

func addFullCmds(*cobra.Command) {}

// leanServes tells whether the lean build runs args itself.
func leanServes(args []string) bool {
	if len(args) == 0 {
		return false
	}
	return slices.ContainsFunc(slurmCommands, func(sc slurmCommand) bool {
		return sc.berthCmd() == args[0] && sc.name != "srun" && sc.name != "salloc"
	})
}

// execFull replaces this process with the full binary, with the same
// argv[0] (a Slurm link's name picks the command there too) and
// arguments.
func execFull(_ []string, stderr io.Writer) int {
	full, err := fullBinary()
	if err == nil {
		err = syscall.Exec(full, os.Args, os.Environ())
	}
	fmt.Fprintf(stderr, "berth: the Slurm commands' lean binary cannot run the full one: %v\n", err)
	return 1
}

// fullBinary is the full berth beside this one: EXE.full (a link that
// install-slurm-shims makes), else BERTH_FULL_BINARY.
func fullBinary() (string, error) {
	if p := os.Getenv("BERTH_FULL_BINARY"); p != "" {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := exe + ".full"
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// runSrun and runSalloc run in the full binary (srun's steps and
// salloc's allocation supervise processes: the agent's code).
func runSrun(*slurmEnv, []string) error   { os.Exit(execFull(nil, os.Stderr)); return nil }
func runSalloc(*slurmEnv, []string) error { os.Exit(execFull(nil, os.Stderr)); return nil }

// remoteRun needs the SSH client: the lean build has no apply.
func remoteRun(context.Context, *client.Client, string, string) (string, error) {
	return "", errors.New("not in the Slurm commands' lean binary")
}

// embeddedLean: the lean binary carries no lean binary.
func embeddedLean() []byte { return nil }
