//go:build !slim

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

func newBenchHistoryCmd() *cobra.Command {
	var runs int
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List a long history: `berth ps -a` and `ps -a -v` over many finished runs, their time and peak memory",
		Long: `Writes --runs finished runs (one job each) straight into a fresh server's SQLite store, starts
the server on it (no agent), then runs "berth ps -a" and "berth ps -a -v" as separate processes,
their output read and thrown away. Prints each listing's time and lines, the listing process's
peak resident memory, and the server's resident memory before and after (its peak too).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			t0 := time.Now()
			b, err := startBench(ctx, benchOpts{seed: func(home string) error { return seedHistory(ctx, home, runs) }})
			if err != nil {
				return err
			}
			defer b.stop()
			fmt.Fprintf(out, "history: %d finished runs written and the server started in %.1f s\n", runs, time.Since(t0).Seconds())
			before, _ := procMemory(b.cmd.Process.Pid)
			for _, args := range [][]string{{"ps", "-a"}, {"ps", "-a", "-v"}} {
				took, lines, peak, err := timeListing(b.home, args...)
				if err != nil {
					return err
				}
				rss, speak := procMemory(b.cmd.Process.Pid)
				fmt.Fprintf(out, "history: berth %v printed %d lines in %.1f s, its peak RSS %s; server RSS %s before, %s after (peak %s)\n",
					args, lines, took.Seconds(), mib(peak), mib(before), mib(rss), mib(speak))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 1_000_000, "finished runs in the history")
	return cmd
}

// seedHistory writes n finished runs of one job each, a second apart and
// ending now, into the store of a server about to start in home.
func seedHistory(ctx context.Context, home string, n int) error {
	st, err := store.OpenSQLite(ctx, filepath.Join(home, "server", "berth.db"), store.SQLiteOptions{})
	if err != nil {
		return err
	}
	defer st.Close()
	pid, err := st.EnsureProject(ctx, "main")
	if err != nil {
		return err
	}
	uid, err := st.EnsureUser(ctx, "admin", true)
	if err != nil {
		return err
	}
	t := benchTask("true")
	t.MaxDuration = new(spec.Duration(3600))
	body, err := json.Marshal(t)
	if err != nil {
		return err
	}
	now, exit := time.Now().UTC(), 0
	b := &store.Batch{}
	for i := 1; i <= n; i++ {
		sub := now.Add(-time.Duration(n-i+1) * time.Second)
		r := &store.Run{ID: int64(i), ProjectID: pid, UserID: uid, Name: fmt.Sprintf("run-%d", i), Status: string(api.StatusDone),
			ExitCode: &exit, Spec: body, SubmittedAt: sub, StartedAt: sub, FinishedAt: sub.Add(time.Second / 2), ArrayIndex: -1}
		j := &store.Job{ID: int64(i), RunID: int64(i), Status: string(api.StatusDone), ExitCode: &exit, Node: "n1",
			Alloc: []byte(`{"cpus":1}`), SubmittedAt: sub, StartedAt: sub, FinishedAt: r.FinishedAt}
		b.Runs, b.Jobs = append(b.Runs, r), append(b.Jobs, j)
		if len(b.Runs) == 10_000 || i == n {
			if err := st.Apply(ctx, b); err != nil {
				return err
			}
			b = &store.Batch{}
		}
	}
	return nil
}

// timeListing runs `berth ARGS` against the server of home, reading its
// output as it comes: the time it took, the lines it printed and its peak
// resident memory.
func timeListing(home string, args ...string) (took time.Duration, lines int, peak int64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, 0, err
	}
	c := exec.Command(exe, args...)
	c.Env = append(os.Environ(), "BERTH_HOME="+home)
	c.Stderr = os.Stderr
	pipe, err := c.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return 0, 0, 0, err
	}
	lc := &lineCounter{}
	_, _ = io.Copy(lc, pipe)
	if err := c.Wait(); err != nil {
		return 0, 0, 0, fmt.Errorf("berth %v: %w", args, err)
	}
	ru, _ := c.ProcessState.SysUsage().(*syscall.Rusage)
	if ru != nil {
		peak = ru.Maxrss << 10
	}
	return time.Since(start), lc.n, peak, nil
}

// lineCounter counts the lines written to it.
type lineCounter struct{ n int }

func (l *lineCounter) Write(p []byte) (int, error) {
	for _, c := range p {
		if c == '\n' {
			l.n++
		}
	}
	return len(p), nil
}
