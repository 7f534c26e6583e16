//go:build !slim

package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// lean is set in the lean build (lean.go): the Slurm commands alone.
const lean = false

// addFullCmds adds Berth's own commands: the client's native commands, the
// benchmarks and the simulator. The roles (server, agent, shim, ssh-host)
// are internal/roles', which cmd/berth registers.
func addFullCmds(root *cobra.Command) {
	root.AddCommand(newProjectCmd(), newApplyCmd(), newPsCmd(), newLogsCmd(),
		newStopCmd(), newFleetCmd(), newBenchCmd(), newSimCmd(), newSprioCmd(), newMetricsCmd(), newNodeCmd(), newStepHostCmd(),
		newUserCmd(), newTokenCmd(), newLoginCmd(), newAdminCmd(), newSecretCmd(), newUsageCmd())
	root.AddCommand(newAttachCmd(), newSSHProxyCmd()) // attach.go
	root.AddCommand(newOfferCmd())                    // offer.go (issue 17)
	root.AddCommand(newVolumeCmd())                   // volume.go (issue 17)
	root.AddCommand(newUICmd())                       // ui.go: a one-time dashboard sign-in
	root.AddCommand(newSSHKeyCmd())
}

func leanServes([]string) bool { return true }

func execFull([]string, io.Writer) int { return 0 }
