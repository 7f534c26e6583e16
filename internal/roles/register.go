package roles

import "github.com/spf13/cobra"

// Register adds the roles' commands to root: berth server, berth agent,
// berth shim and berth ssh-host.
func Register(root *cobra.Command) {
	root.AddCommand(newServerCmd(), newAgentCmd(), newShimCmd(), newSSHHostCmd())
}
