//go:build !slim

package cli

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// newBenchChainCmd times a chain of dependent trivial runs on an idle node:
// the workflows issue's "a chain of ten trivial runs finishes in well under a
// second".
func newBenchChainCmd() *cobra.Command {
	var length, rounds int
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "Time a chain of trivial runs, each afterok the previous, on an idle local agent",
		Long: `Submits LENGTH trivial runs (` + "`true`" + `), each depending (afterok) on the one before, all at once, to a
server with its local agent, and times from the first submission to the end of the last run (the
server's record of it). Repeats ROUNDS times and prints the median and the worst.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			if err := b.waitNodes(ctx, 1); err != nil {
				return err
			}
			var took []time.Duration
			for round := range rounds + 1 {
				start := time.Now()
				var last *api.Run
				for i := range length {
					t := benchTask("true")
					t.Name = fmt.Sprintf("chain-%d-%d", round, i)
					if i > 0 {
						t.DependsOn = []spec.Dependency{{Type: "afterok", Runs: []string{fmt.Sprintf("chain-%d-%d", round, i-1)}}}
					}
					if last, err = b.c.Submit(ctx, api.SubmitRequest{Spec: t}); err != nil {
						return err
					}
				}
				end, err := b.c.Logs(ctx, fmt.Sprint(last.ID), client.LogOptions{Follow: true, Job: -1}, func(api.LogEntry) {})
				if err != nil {
					return err
				}
				if end.Status != api.StatusDone || end.FinishedAt == nil {
					return fmt.Errorf("bench: the chain's last run ended %s (%s)", end.Status, end.Reason)
				}
				if round > 0 { // the first round warms up
					took = append(took, end.FinishedAt.Sub(start))
				}
			}
			slices.Sort(took)
			fmt.Fprintf(cmd.OutOrStdout(), "chain: %d runs afterok one another, %d rounds: first submission to last end median %s, worst %s\n",
				length, rounds, ms(took[len(took)/2]), ms(took[len(took)-1]))
			return nil
		},
	}
	cmd.Flags().IntVar(&length, "length", 10, "runs in the chain")
	cmd.Flags().IntVar(&rounds, "rounds", 5, "chains to time")
	return cmd
}

// newBenchArrayCmd times the submission of one large array, or with --run
// one array's run from submission to its last task's end.
func newBenchArrayCmd() *cobra.Command {
	var tasks, rounds int
	var run bool
	cmd := &cobra.Command{
		Use:   "array",
		Short: "Time the submission of an array of N tasks (no agent: nothing runs), or with --run its run on one node",
		Long: `Without --run: submits ROUNDS arrays of TASKS tasks to a server with no agent (nothing runs) and
prints the median and the worst submission.

With --run: starts one agent (a separate process), submits one array of TASKS trivial tasks
(` + "`true`" + `, one CPU each; 1,000 unless --tasks is given) and times from the submission to the end
of its last task (the server's record of it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if run {
				if !cmd.Flags().Changed("tasks") {
					tasks = 1000
				}
				return benchArrayRun(cmd, tasks)
			}
			b, err := startBenchServer(ctx, false)
			if err != nil {
				return err
			}
			defer b.stop()
			var took []time.Duration
			for range rounds {
				t := benchTask("true")
				t.Array = fmt.Sprintf("0-%d", tasks-1)
				start := time.Now()
				if _, err := b.c.Submit(ctx, api.SubmitRequest{Spec: t}); err != nil {
					return err
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			fmt.Fprintf(cmd.OutOrStdout(), "array: %d submissions of %d tasks each: median %s, worst %s per submission\n",
				rounds, tasks, ms(took[len(took)/2]), ms(took[len(took)-1]))
			return nil
		},
	}
	cmd.Flags().IntVar(&tasks, "tasks", 100_000, "tasks in the array (with --run: 1,000)")
	cmd.Flags().IntVar(&rounds, "rounds", 10, "arrays to submit (without --run)")
	cmd.Flags().BoolVar(&run, "run", false, "run one array on one node and time it to its last task's end")
	return cmd
}

// benchArrayRun submits one array of trivial tasks to a server with one
// agent, once the agent is up, and times it to the end of its last task.
func benchArrayRun(cmd *cobra.Command, tasks int) error {
	ctx := cmd.Context()
	b, err := startBenchServer(ctx, false)
	if err != nil {
		return err
	}
	defer b.stop()
	if err := b.startAgent("array-node"); err != nil {
		return err
	}
	if err := b.waitNodes(ctx, 1); err != nil {
		return err
	}
	t := benchTask("true")
	t.Array = fmt.Sprintf("0-%d", tasks-1)
	t0 := time.Now()
	arr, err := b.c.Submit(ctx, api.SubmitRequest{Spec: t})
	if err != nil {
		return err
	}
	all, err := b.waitIdle(ctx, t0)
	if err != nil {
		return err
	}
	var last time.Time
	ran, failed := 0, 0
	for _, r := range all {
		if r.ID == arr.ID {
			continue
		}
		ran++
		if r.Status != api.StatusDone {
			failed++
		}
		if r.FinishedAt != nil && r.FinishedAt.After(last) {
			last = *r.FinishedAt
		}
	}
	if failed > 0 || ran != tasks {
		return fmt.Errorf("bench: %d of %d tasks ran, %d did not end done", ran, tasks, failed)
	}
	d := last.Sub(arr.SubmittedAt)
	var taskRuns []api.Run
	for _, r := range all {
		if r.ID != arr.ID {
			taskRuns = append(taskRuns, r)
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "array: %d tasks on one node (%s) in %.2f s (%.0f tasks/s), submission to the last task's end; %s\n",
		tasks, nodeText(ctx, b.c), d.Seconds(), float64(tasks)/d.Seconds(), turnover(ctx, b.c, taskRuns, d))
	return nil
}
