//go:build !slim

package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Drain nodes and resume them (berth fleet lists them); make their agents' credentials",
	}
	var reason string
	drain := &cobra.Command{
		Use:   "drain NODE...",
		Short: "Stop giving nodes new jobs; the jobs running there go on (Slurm: scontrol update state=drain)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, name := range args {
				n, err := c.Drain(cmd.Context(), name, reason)
				if err != nil {
					return fmt.Errorf("drain %s: %w", name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Node %s: %s\n", n.Name, n.Status)
			}
			return nil
		},
	}
	drain.Flags().StringVar(&reason, "reason", "", "why, shown by berth fleet")
	resume := &cobra.Command{
		Use:   "resume NODE...",
		Short: "Give drained nodes jobs again (a node failing its health check stays out until a check passes)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, name := range args {
				n, err := c.Resume(cmd.Context(), name)
				if err != nil {
					return fmt.Errorf("resume %s: %w", name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Node %s: %s\n", n.Name, n.Status)
			}
			return nil
		},
	}
	cmd.AddCommand(drain, resume, nodeDeleteCmd(), nodeTokenCmd())
	return cmd
}
