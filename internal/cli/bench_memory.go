//go:build !slim

package cli

import (
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

func newBenchMemoryCmd() *cobra.Command {
	var runs int
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "The server's memory while it holds many waiting runs, and after listing them",
		Long: `Starts a server with its local agent and submits --runs runs of "sleep 3600" that each need the
whole node (so one runs and the rest wait), through the API from 8 clients. Prints the server
process's resident memory once the queue is settled (the scheduler has seen every run), and again
after listing every active run as squeue does, with the listing's time. The process holds the
server and its local agent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			t := &spec.Task{Type: "task", Commands: []string{"sleep 3600"}, Resources: spec.Resources{CPU: &spec.CPUSpec{Count: spec.IntRange{Min: runtime.NumCPU()}}}}
			t.Normalize()
			before, _ := procMemory(b.cmd.Process.Pid)
			start := time.Now()
			if _, _, err := submitAll(ctx, b.c, runs, 8, t); err != nil {
				return err
			}
			submitted := time.Since(start)
			// Settled: a full pass has seen every run (the safety-net pass
			// comes within 30 s; a pass also follows each submission).
			time.Sleep(5 * time.Second)
			rss, peak := procMemory(b.cmd.Process.Pid)
			st, err := b.c.Status(ctx)
			if err != nil {
				return err
			}
			t0 := time.Now()
			list, err := b.c.Runs(ctx, client.ListOptions{})
			if err != nil {
				return err
			}
			took := time.Since(t0)
			time.Sleep(time.Second)
			rss2, peak2 := procMemory(b.cmd.Process.Pid)
			fmt.Fprintf(out, "memory: %d waiting runs submitted in %.1f s (%d transactions, %d passes); server RSS %s before, %s settled (peak %s; Go heap live %s, next collection at %s); listing %d active runs took %.2f s, RSS after %s (peak %s)\n",
				runs, submitted.Seconds(), st.Commits, st.Passes, mib(before), mib(rss), mib(peak), mib(st.HeapLive), mib(st.HeapGoal), len(list), took.Seconds(), mib(rss2), mib(peak2))
			// The one running run must not outlive the benchmark.
			for _, r := range list {
				if r.Status != api.StatusSubmitted {
					_, _ = b.c.Stop(ctx, strconv.FormatInt(r.ID, 10), true)
				}
			}
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				running, err := b.c.Runs(ctx, client.ListOptions{Statuses: []api.Status{api.StatusProvisioning, api.StatusRunning, api.StatusTerminating}})
				if err == nil && len(running) == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 100000, "waiting runs to hold")
	return cmd
}

// procMemory is a process's resident memory now and at its peak, in bytes
// (/proc/PID/status VmRSS and VmHWM, in kB).
func procMemory(pid int) (rss, peak int64) {
	return statusField(pid, "VmRSS") << 10, statusField(pid, "VmHWM") << 10
}

func mib(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
