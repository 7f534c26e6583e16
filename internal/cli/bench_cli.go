//go:build !slim

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func newBenchCLICmd() *cobra.Command {
	var (
		n         int
		slurmBin  string
		clientExe string
		leanPath  string
	)
	cmd := &cobra.Command{
		Use:   "cli",
		Short: "A client process's cost: berth --version, sbatch --version and sbatch --wrap true, one after another",
		Long: `Starts a server with its local agent, then runs each client command -n times, one process after
another: berth --version and berth sbatch --version (the full binary), then through a Slurm-named
link as install-slurm-shims makes it (to the lean binary this one carries, else to this binary)
sbatch --version, and sbatch --wrap true against the server. Prints each command's median and mean wall
time and its mean minor page faults, and sbatch --wrap true's submissions per second.

With --slurm DIR (a directory holding real Slurm's sbatch, its slurmctld running), or when an sbatch
that is not a link to berth is on $PATH, runs real sbatch --version and sbatch --wrap true the same
way, side by side.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			exe := clientExe
			if exe == "" {
				var err error
				if exe, err = os.Executable(); err != nil {
					return err
				}
			}
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			bin := filepath.Join(b.home, "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				return err
			}
			if err := os.Symlink(exe, filepath.Join(bin, "berth")); err != nil {
				return err
			}
			lean := embeddedLean()
			if leanPath != "" {
				if lean, err = os.ReadFile(leanPath); err != nil {
					return err
				}
			}
			if len(lean) == 0 {
				fmt.Fprintln(out, "cli: this binary carries no lean binary (make build embeds one; or give --lean-binary): the links go to berth itself")
			}
			if err := installShims(io.Discard, bin, exe, lean, false); err != nil {
				return err
			}
			dir := filepath.Join(b.home, "work")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			env := append(os.Environ(), "BERTH_HOME="+b.home)
			type probe struct {
				name   string
				argv   []string
				env    []string
				submit bool // a job per call: print the rate
			}
			probes := []probe{
				{"berth --version", []string{filepath.Join(bin, "berth"), "--version"}, env, false},
				{"berth sbatch --version", []string{filepath.Join(bin, "berth"), "sbatch", "--version"}, env, false},
				{"sbatch --version", []string{filepath.Join(bin, "sbatch"), "--version"}, env, false},
				{"sbatch --wrap true", []string{filepath.Join(bin, "sbatch"), "--wrap", "true", "-o", "/dev/null"}, env, true},
			}
			if real := realSbatch(slurmBin); real != "" {
				probes = append(probes,
					probe{"Slurm sbatch --version", []string{real, "--version"}, os.Environ(), false},
					probe{"Slurm sbatch --wrap true", []string{real, "--wrap", "true", "-o", "/dev/null"}, os.Environ(), true})
			} else {
				fmt.Fprintln(out, "cli: no real Slurm sbatch (give --slurm DIR): Berth only")
			}
			for _, p := range probes {
				times := make([]time.Duration, 0, n)
				var faults int64
				start := time.Now()
				for range n {
					took, minflt, err := runProbe(ctx, dir, p.argv, p.env)
					if err != nil {
						return fmt.Errorf("bench: %s: %w", p.name, err)
					}
					times, faults = append(times, took), faults+minflt
				}
				wall := time.Since(start)
				var sum time.Duration
				for _, t := range times {
					sum += t
				}
				slices.Sort(times)
				fmt.Fprintf(out, "cli: %-26s median %s, mean %s, %d minor page faults (mean of %d)",
					p.name, ms(times[len(times)/2]), ms(sum/time.Duration(n)), faults/int64(n), n)
				if p.submit {
					fmt.Fprintf(out, "; %.0f submissions/s", float64(n)/wall.Seconds())
				}
				fmt.Fprintln(out)
			}
			stopActive(ctx, b.c)
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "n", "n", 200, "times to run each command")
	cmd.Flags().StringVar(&slurmBin, "slurm", "", "a directory holding real Slurm's sbatch, to run side by side")
	cmd.Flags().StringVar(&clientExe, "client", "", "the berth binary whose client is timed (default this one)")
	cmd.Flags().StringVar(&leanPath, "lean-binary", "", "the Slurm commands' lean binary behind the links (default the one this binary carries)")
	return cmd
}

// runProbe runs one client process to its end: its wall time and minor
// page faults.
func runProbe(ctx context.Context, dir string, argv, env []string) (time.Duration, int64, error) {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir, c.Env = dir, env
	t0 := time.Now()
	out, err := c.Output()
	took := time.Since(t0)
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return 0, 0, fmt.Errorf("%w: %s%s", err, out, stderr)
	}
	var minflt int64
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		minflt = ru.Minflt
	}
	return took, minflt, nil
}

// realSbatch is real Slurm's sbatch: in dir when given, else on $PATH when
// that one is not a link to a berth binary; "" when there is none.
func realSbatch(dir string) string {
	if dir != "" {
		return filepath.Join(dir, "sbatch")
	}
	p, err := exec.LookPath("sbatch")
	if err != nil {
		return ""
	}
	if target, err := filepath.EvalSymlinks(p); err == nil && filepath.Base(target) == "berth" {
		return ""
	}
	return p
}
