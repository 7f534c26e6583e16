package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newUICmd prints a one-time link that signs its caller into the
// dashboard: on the server's host, with no token, through the agent's
// socket as their Unix user.
func newUICmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ui",
		Short: "Print a one-time link that signs you into the web dashboard",
		Long: `Print a link to the dashboard that signs you in as yourself: good once, for a minute. With no
token configured, on a host with a Berth agent, you are your Unix user (the agent's socket), so
the dashboard needs no token pasted. The sign-in lasts 12 hours.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			code, err := c.SignInCode(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Open this link to sign in to the dashboard (once, until %s):\n  %s\n",
				code.ExpiresAt.Local().Format("15:04:05"), code.URL)
			return nil
		},
	}
}
