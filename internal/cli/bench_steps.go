//go:build !slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// newBenchStepsCmd times job steps (srun inside an allocation) through the
// step relay: how long a trivial step on two nodes takes, and how fast a
// step's output comes back from another node.
func newBenchStepsCmd() *cobra.Command {
	var rounds, megabytes int
	cmd := &cobra.Command{
		Use:   "steps",
		Short: "Time job steps through the step relay: a trivial two-node step, and a remote step's output rate",
		Long: `Starts a server with its local agent and a second agent, takes a two-node allocation whose nodes run
` + "`berth step-host`" + ` (as salloc's do), then (1) runs ROUNDS steps of ` + "`true`" + ` on both nodes, as srun does
(create, follow the output, wait for both exits), and prints the median and the worst; (2) runs one
step writing MEGABYTES MiB on the second node and prints the rate at which it reaches the client.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			if err := b.startAgent("bench-n2"); err != nil {
				return err
			}
			if err := b.waitNodes(ctx, 2); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			t := &spec.Task{Type: "task", Nodes: 2, Commands: []string{shQuote(exe) + " step-host </dev/null"}}
			t.Normalize()
			run, err := b.c.Submit(ctx, api.SubmitRequest{Spec: t})
			if err != nil {
				return err
			}
			ref := strconv.FormatInt(run.ID, 10)
			// The allocation's jobs outlive their agents by design: end
			// them before the server and agents go.
			defer func() {
				_, _ = b.c.Stop(context.WithoutCancel(ctx), ref, false)
				_, _ = b.c.Logs(context.WithoutCancel(ctx), ref, client.LogOptions{Follow: true, Job: -1}, func(api.LogEntry) {})
			}()
			deadline := time.Now().Add(60 * time.Second)
			for {
				cur, err := b.c.Run(ctx, ref)
				if err == nil && cur.Status == api.StatusRunning {
					break
				}
				if err == nil && cur.Status.Finished() || time.Now().After(deadline) {
					return fmt.Errorf("bench: the allocation did not start (%v)", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			var took []time.Duration
			for i := range rounds + 1 {
				start := time.Now()
				if _, err := benchStep(ctx, b.c, ref, api.StepRequest{Argv: []string{"true"}}); err != nil {
					return err
				}
				if i > 0 { // the first warms up
					took = append(took, time.Since(start))
				}
			}
			slices.Sort(took)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "steps: `true` on 2 nodes, %d steps one after another: median %s, worst %s\n", rounds, ms(took[len(took)/2]), ms(took[len(took)-1]))
			start := time.Now()
			n, err := benchStep(ctx, b.c, ref, api.StepRequest{Argv: []string{"head", "-c", strconv.Itoa(megabytes << 20), "/dev/zero"}, Nodes: []int{1}})
			if err != nil {
				return err
			}
			if n != int64(megabytes)<<20 {
				return fmt.Errorf("bench: the step's output came back as %d bytes, want %d", n, int64(megabytes)<<20)
			}
			d := time.Since(start)
			fmt.Fprintf(out, "steps: %d MiB of a remote task's output through the relay in %s: %.0f MiB/s\n", megabytes, ms(d), float64(megabytes)/d.Seconds())
			return nil
		},
	}
	cmd.Flags().IntVar(&rounds, "rounds", 20, "trivial steps to time")
	cmd.Flags().IntVar(&megabytes, "megabytes", 256, "MiB of output for the rate")
	return cmd
}

// benchStep runs a step as srun does and returns how many bytes of
// output came back; a failed task is an error.
func benchStep(ctx context.Context, c *client.Client, ref string, req api.StepRequest) (int64, error) {
	created, err := c.CreateStep(ctx, ref, req)
	if err != nil {
		return 0, err
	}
	from, errFrom := map[int]int64{}, map[int]int64{}
	var total int64
	for {
		st, err := c.StepStatus(ctx, ref, created.ID, from, errFrom, false)
		if err != nil {
			return total, err
		}
		all := true
		for _, ro := range st.Ranks {
			total += int64(len(ro.Data))
			from[ro.Rank], errFrom[ro.Rank] = ro.Next, ro.ErrNext
			if ro.Exited && ro.Code != 0 {
				return total, fmt.Errorf("bench: step %d: rank %d exited %d: %s", created.ID, ro.Rank, ro.Code, ro.Err)
			}
			all = all && ro.Exited
		}
		if all {
			_, _ = c.StepStatus(ctx, ref, created.ID, from, errFrom, false) // what was read
			return total, nil
		}
		if len(st.Ranks) == 0 {
			return total, errors.New("bench: a step with no nodes")
		}
	}
}
