//go:build !slim

package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// berth node delete (issue 17) and the agent's --blocks.

func nodeDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NODE...",
		Short: "Remove nodes from the node list (admin): refused while jobs run there or its agent is connected",
		Long: `Remove nodes from the node list for good. The runs that ran there keep the node's name
(berth ps, sacct). Refused while jobs are placed on the node, or while its agent is connected:
stop the agent first. A node whose agent registers again later is a new node.
Nodes of SSH hosts removed from their fleet and of terminated instances are removed by the server.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := c.DeleteNode(cmd.Context(), name); err != nil {
					return fmt.Errorf("delete %s: %w", name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Node %s deleted\n", name)
			}
			return nil
		},
	}
}
