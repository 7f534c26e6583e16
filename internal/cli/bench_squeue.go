//go:build !slim

package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

func newBenchSqueueCmd() *cobra.Command {
	var (
		runs, repeat int
		clientExes   []string
		full         bool
	)
	cmd := &cobra.Command{
		Use:   "squeue",
		Short: "The Slurm listings (squeue, scontrol show job, sacct) against a server holding many waiting runs",
		Long: `Starts a server with its local agent and submits --runs runs of "sleep 3600" that each need the
whole node (so one runs and the rest wait), through the API from 8 clients. Then runs, as separate
processes through Slurm-named links, each listing --repeat times and prints its median wall time
and the client's peak resident memory: squeue -j N, scontrol show job N, sacct -j N, a full squeue
and a full sacct. Prints the server process's resident memory before and after the listings.
--client runs another berth binary's Slurm commands against the same server (to compare builds);
given several times, each binary's listings are timed in turn, against the same runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			exes := clientExes
			if len(exes) == 0 {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				exes = []string{exe}
			}
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			// One folder of Slurm-named links per client binary.
			bins := make([]string, len(exes))
			for i, exe := range exes {
				bins[i] = filepath.Join(b.home, "bin"+strconv.Itoa(i))
				if err := os.MkdirAll(bins[i], 0o755); err != nil {
					return err
				}
				for _, name := range []string{"squeue", "scontrol", "sacct"} {
					if err := os.Symlink(exe, filepath.Join(bins[i], name)); err != nil {
						return err
					}
				}
			}
			t := &spec.Task{Type: "task", Commands: []string{"sleep 3600"}, Resources: spec.Resources{CPU: &spec.CPUSpec{Count: spec.IntRange{Min: runtime.NumCPU()}}}}
			t.Normalize()
			start := time.Now()
			if _, _, err := submitAll(ctx, b.c, runs, 8, t); err != nil {
				return err
			}
			fmt.Fprintf(out, "squeue: %d waiting runs submitted in %.1f s\n", runs, time.Since(start).Seconds())
			time.Sleep(5 * time.Second) // settled: a pass has seen every run
			rss, _ := procMemory(b.cmd.Process.Pid)
			fmt.Fprintf(out, "squeue: server RSS %s before the listings\n", mib(rss))
			mid := strconv.Itoa(runs / 2)
			listings := []struct {
				name string
				args []string
			}{
				{"squeue -j " + mid, []string{"squeue", "-j", mid}},
				{"scontrol show job " + mid, []string{"scontrol", "show", "job", mid}},
				{"sacct -j " + mid, []string{"sacct", "-j", mid}},
				{"squeue", []string{"squeue"}},
				{"sacct", []string{"sacct"}},
			}
			if !full {
				listings = listings[:3]
			}
			for i, bin := range bins {
				if len(bins) > 1 {
					fmt.Fprintf(out, "squeue: client %s\n", exes[i])
				}
				for _, l := range listings {
					var times, cpus []time.Duration
					var peak int64
					lines := 0
					for range repeat {
						pid := b.cmd.Process.Pid
						server0 := procCPU(pid)
						took, cpu, hwm, n, err := timeClient(ctx, b.home, filepath.Join(bin, l.args[0]), l.args[1:])
						if err != nil {
							return fmt.Errorf("bench: %s: %w", l.name, err)
						}
						times, peak, lines = append(times, took), max(peak, hwm), n
						cpus = append(cpus, cpu, procCPU(pid)-server0)
					}
					slices.Sort(times)
					// CPU times: a loaded machine stretches the wall time, not these.
					var ccpu, scpu time.Duration
					for i := 0; i < len(cpus); i += 2 {
						ccpu, scpu = ccpu+cpus[i], scpu+cpus[i+1]
					}
					n := time.Duration(repeat)
					fmt.Fprintf(out, "squeue: %-24s %10s median of %d (%d lines; client peak RSS %s; CPU client %s, server %s, mean)\n",
						l.name, ms(times[len(times)/2]), repeat, lines, mib(peak), ms(ccpu/n), ms(scpu/n))
				}
				rss, _ := procMemory(b.cmd.Process.Pid)
				fmt.Fprintf(out, "squeue: server RSS %s\n", mib(rss))
			}
			time.Sleep(time.Second)
			rss2, peak2 := procMemory(b.cmd.Process.Pid)
			fmt.Fprintf(out, "squeue: server RSS %s after the listings (peak %s)\n", mib(rss2), mib(peak2))
			stopActive(ctx, b.c)
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 100000, "waiting runs to hold")
	cmd.Flags().IntVar(&repeat, "repeat", 5, "times to run each listing")
	cmd.Flags().BoolVar(&full, "full", true, "also time the full listings (squeue, sacct)")
	cmd.Flags().StringArrayVar(&clientExes, "client", nil, "a berth binary whose Slurm commands are timed (default this one); repeat to compare")
	return cmd
}

// timeClient runs one client process against the benchmark's server: its
// wall time, its peak resident memory (from rusage) and its output lines.
func timeClient(ctx context.Context, home, path string, args []string) (took, cpu time.Duration, peak int64, lines int, err error) {
	c := exec.CommandContext(ctx, path, args...)
	c.Env = append(os.Environ(), "BERTH_HOME="+home)
	var stderr bytes.Buffer
	lc := &lineCounter{}
	c.Stdout, c.Stderr = lc, &stderr
	t0 := time.Now()
	err = c.Run()
	took = time.Since(t0)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		peak = ru.Maxrss << 10
	}
	return took, c.ProcessState.UserTime() + c.ProcessState.SystemTime(), peak, lc.n, nil
}

// procCPU is the CPU time a process has used so far (user and system,
// from /proc/PID/stat), zero when unreadable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th (clock ticks, 100 a second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// treeCPU is the CPU time of process pid, of its children it has waited
// for, and of those still running with theirs (an agent: itself, its shims
// and their jobs).
func treeCPU(pid int) time.Duration {
	stat := func(pid int) []string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil
		}
		return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	}
	children := map[int][]int{}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if f := stat(p); len(f) > 1 {
				ppid, _ := strconv.Atoi(f[1])
				children[ppid] = append(children[ppid], p)
			}
		}
	}
	var sum func(pid int) time.Duration
	sum = func(pid int) time.Duration {
		f := stat(pid)
		if len(f) < 15 {
			return 0
		}
		// utime, stime, cutime, cstime: the 12th to 15th fields after
		// the command (clock ticks, 100 a second on Linux).
		var ticks int64
		for _, x := range f[11:15] {
			n, _ := strconv.ParseInt(x, 10, 64)
			ticks += n
		}
		d := time.Duration(ticks) * 10 * time.Millisecond
		for _, c := range children[pid] {
			d += sum(c)
		}
		return d
	}
	return sum(pid)
}

// stopActive stops the benchmark's running run and waits until nothing
// runs: no job outlives the benchmark.
func stopActive(ctx context.Context, c *client.Client) {
	running := func() []api.Run {
		rs, _ := c.Runs(ctx, client.ListOptions{Statuses: []api.Status{api.StatusProvisioning, api.StatusRunning, api.StatusTerminating}})
		return rs
	}
	for _, r := range running() {
		_, _ = c.Stop(ctx, strconv.FormatInt(r.ID, 10), true)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(running()) > 0 {
		time.Sleep(100 * time.Millisecond)
	}
}
