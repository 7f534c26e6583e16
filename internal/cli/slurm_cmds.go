package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
)

// The Slurm front end: `berth sbatch …`, or the binary called through a
// link named sbatch (see Argv), reads Slurm's options and prints what Slurm
// prints. Each command is a function of a slurmEnv, so tests can run it
// against a server without a process of its own.

// slurmEnv is what a Slurm command works with.
type slurmEnv struct {
	ctx       context.Context
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	getenv    func(string) string
	environ   func() []string
	now       func() time.Time
	cwd       string
	newClient func() (*client.Client, error)
	// newStepClient is the client of srun's steps inside a job (the run's
	// own credential).
	newStepClient func() (*client.Client, error)
	executable    func() (string, error)
	interactiveIn *os.File // the terminal for salloc's shell and srun --pty; nil in tests
}

type slurmCommand struct {
	name, short string
	run         func(e *slurmEnv, args []string) error
	// berthName is the command's name under berth when berth's own
	// command has the Slurm name (berth sprio): a hidden one. The link
	// keeps the Slurm name.
	berthName string
}

// berthName is the command line's name of the Slurm command.
func (sc slurmCommand) berthCmd() string {
	if sc.berthName != "" {
		return sc.berthName
	}
	return sc.name
}

var slurmCommands = []slurmCommand{
	{"sbatch", "Submit a batch script, as Slurm's sbatch", runSbatch, ""},
	{"squeue", "List pending and running jobs, as Slurm's squeue", runSqueue, ""},
	{"scancel", "Cancel or signal jobs, as Slurm's scancel", runScancel, ""},
	{"sinfo", "Show partitions and nodes, as Slurm's sinfo", runSinfo, ""},
	{"sacct", "Show finished and running jobs from the accounting records, as Slurm's sacct", runSacct, ""},
	{"scontrol", "Show and change jobs, nodes and partitions, as Slurm's scontrol", runScontrol, ""},
	{"srun", "Run a command on the cluster and wait for it, or a job step inside an allocation, as Slurm's srun", runSrun, ""},
	{"salloc", "Hold an allocation and start a shell in it, as Slurm's salloc", runSalloc, ""},
	{"sstat", "Show the usage of running job steps, as Slurm's sstat", runSstat, ""},
	{"sacctmgr", "Show accounts, users and QOS, as Slurm's sacctmgr", runSacctmgr, ""},
	{"sreport", "Report usage by account and user (cluster AccountUtilizationByUser, user TopUsage), as Slurm's sreport", runSreport, ""},
	{"sshare", "Show the fairshare tree: shares, decayed usage and fairshare factors, as Slurm's sshare", runSshare, ""},
	{"sprio", "Show the pending jobs' priority factors, as Slurm's sprio (berth sprio is Berth's own table)", runSprio, "slurm-sprio"},
}

// SlurmCommandNames are the names Berth answers to as a Slurm command.
func SlurmCommandNames() []string {
	out := make([]string, len(slurmCommands))
	for i, c := range slurmCommands {
		out[i] = c.name
	}
	return out
}

// Argv turns the process's arguments into the command line of Main: when
// the binary was called through a link named after a Slurm command
// (sbatch, squeue…), it is that command.
func Argv(osArgs []string) []string {
	if len(osArgs) == 0 {
		return nil
	}
	name := filepath.Base(osArgs[0])
	for _, sc := range slurmCommands {
		if sc.name == name {
			return append([]string{sc.berthCmd()}, osArgs[1:]...)
		}
	}
	return osArgs[1:]
}

func defaultSlurmEnv(cmd *cobra.Command) *slurmEnv {
	cwd, err := os.Getwd()
	if err != nil {
		cwd = os.Getenv("PWD")
	}
	e := &slurmEnv{
		ctx: cmd.Context(), stdin: cmd.InOrStdin(), stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(),
		getenv: os.Getenv, environ: os.Environ, now: time.Now, cwd: cwd, newClient: newClient, newStepClient: newStepClient, executable: os.Executable,
	}
	if e.ctx == nil {
		e.ctx = context.Background()
	}
	if f, ok := cmd.InOrStdin().(*os.File); ok {
		e.interactiveIn = f
	}
	return e
}

// SlurmCommands adds the Slurm commands to root (cmd/berth registers it,
// unless built with -tags noslurm).
func SlurmCommands(root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: "slurm", Title: "Slurm commands (also as links named after them: berth install-slurm-shims DIR):"})
	root.AddCommand(newSlurmCmds()...)
}

func newSlurmCmds() []*cobra.Command {
	var out []*cobra.Command
	for _, sc := range slurmCommands {
		sc := sc
		out = append(out, &cobra.Command{
			Use:                sc.berthCmd() + " [SLURM OPTIONS]",
			Short:              sc.short,
			Hidden:             sc.berthName != "",
			GroupID:            "slurm",
			DisableFlagParsing: true,
			Args:               cobra.ArbitraryArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				e := defaultSlurmEnv(cmd)
				return slurmExit(e, sc.name, sc.run(e, args))
			},
		})
	}
	out = append(out, newInstallShimsCmd())
	return out
}

// slurmExit prints a Slurm command's error as Slurm would and turns it into
// the exit status.
func slurmExit(e *slurmEnv, prog string, err error) error {
	if err == nil {
		return nil
	}
	var ce *slurm.CommandError
	if errors.As(err, &ce) {
		io.WriteString(e.stdout, ce.Stdout)
		for _, l := range ce.Stderr {
			fmt.Fprintln(e.stderr, l)
		}
		if ce.ExitCode == 0 {
			return nil
		}
		return &ExitError{Code: ce.ExitCode}
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(e.stderr, "%s: error: %v\n", prog, ee.Err)
		}
		return &ExitError{Code: ee.Code}
	}
	fmt.Fprintf(e.stderr, "%s: error: %v\n", prog, err)
	return &ExitError{Code: 1}
}

// slurmFail is an error of a Slurm command: "prog: error: msg", exit code.
func slurmFail(code int, lines ...string) *slurm.CommandError {
	return &slurm.CommandError{Stderr: lines, ExitCode: code}
}

func newInstallShimsCmd() *cobra.Command {
	var force, system, noLean bool
	var leanPath string
	cmd := &cobra.Command{
		Use:   "install-slurm-shims DIR | --system",
		Short: "Create links named sbatch, squeue, scancel… to this binary in DIR",
		Long: `Create, in DIR, a link for each Slurm command Berth answers to (` +
			strings.Join(SlurmCommandNames(), ", ") + `).
Called through such a link, berth acts as that command, so scripts and tools that run sbatch or
squeue work unchanged once DIR is on their PATH. Existing links are replaced; other files are
left alone unless --force. --system installs them in /usr/local/bin, on every login shell's PATH
(a job's #!/bin/bash -l script also finds links elsewhere on the submitter's PATH: its BASH_ENV
puts their directory back after the profile).

A binary built with make build carries the Slurm commands' lean binary: the same commands built
without the server, agent and store, so that each call starts in about a millisecond instead of
ten. It is written to DIR/berth-slurm (with berth-slurm.full, a link to this binary, to which it
hands srun, salloc and anything else) and the links point to it; --no-lean links to this binary
instead.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if system {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if system {
				args = []string{systemShimsDir}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			if exe, err = filepath.EvalSymlinks(exe); err != nil {
				return err
			}
			var leanBin []byte
			switch {
			case noLean:
			case leanPath != "":
				if leanBin, err = os.ReadFile(leanPath); err != nil {
					return fmt.Errorf("--lean-binary: %w", err)
				}
			default:
				leanBin = embeddedLean()
			}
			return installShims(cmd.OutOrStdout(), args[0], exe, leanBin, force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace files that are not links")
	cmd.Flags().BoolVar(&system, "system", false, "install in "+systemShimsDir+" (for every user and login shell)")
	cmd.Flags().BoolVar(&noLean, "no-lean", false, "link to this binary, not to the lean one it carries")
	cmd.Flags().StringVar(&leanPath, "lean-binary", "", "the lean binary to install (one built with go build -tags slim), instead of the one this binary carries")
	return cmd
}

// systemShimsDir is where install-slurm-shims --system puts the links: on
// the PATH that /etc/profile gives every login shell.
const systemShimsDir = "/usr/local/bin"

// leanName is the lean binary's name in the links' directory; the full
// binary it hands the rest to is leanName+".full" there.
const leanName = "berth-slurm"

// installShims links the Slurm names in dir to exe, or, with lean (the
// lean binary's bytes), to a copy of lean written there, beside a link to
// exe that it hands the rest to.
func installShims(w io.Writer, dir, exe string, lean []byte, force bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	target := exe
	if len(lean) > 0 {
		target = filepath.Join(dir, leanName)
		tmp := target + ".tmp"
		if err := os.WriteFile(tmp, lean, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(tmp, 0o755); err != nil { // whatever the umask
			return err
		}
		if err := os.Rename(tmp, target); err != nil {
			return err
		}
		full := target + ".full"
		if err := os.Remove(full); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Symlink(exe, full); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: the Slurm commands' lean binary (%s -> %s for the rest)\n", target, full, exe)
	}
	for _, name := range SlurmCommandNames() {
		p := filepath.Join(dir, name)
		if fi, err := os.Lstat(p); err == nil {
			if fi.Mode()&os.ModeSymlink == 0 && !force {
				return fmt.Errorf("%s exists and is not a link (use --force to replace it)", p)
			}
			if err := os.Remove(p); err != nil {
				return err
			}
		}
		if err := os.Symlink(target, p); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s -> %s\n", p, target)
	}
	return nil
}
