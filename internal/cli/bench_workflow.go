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

// newBenchArrayCmd times the submission of one large array.
func newBenchArrayCmd() *cobra.Command {
	var tasks, rounds int
	cmd := &cobra.Command{
		Use:   "array",
		Short: "Time the submission of an array of N tasks (no agent: nothing runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
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
	cmd.Flags().IntVar(&tasks, "tasks", 100_000, "tasks in the array")
	cmd.Flags().IntVar(&rounds, "rounds", 10, "arrays to submit")
	return cmd
}
