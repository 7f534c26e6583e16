//go:build !slim

package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// lean is set in the lean build (lean.go): the Slurm commands alone.
const lean = false

// addFullCmds adds Berth's own commands: the roles (server, agent, shim),
// the client's native commands, the benchmarks and the simulator.
func addFullCmds(root *cobra.Command) {
	root.AddCommand(newServerCmd(), newProjectCmd(), newAgentCmd(), newShimCmd(), newApplyCmd(), newPsCmd(), newLogsCmd(),
		newStopCmd(), newFleetCmd(), newBenchCmd(), newSimCmd(), newSprioCmd(), newMetricsCmd(), newNodeCmd(), newStepHostCmd(),
		newUserCmd(), newTokenCmd(), newLoginCmd(), newAdminCmd(), newSecretCmd(), newUsageCmd())
	root.AddCommand(newAttachCmd(), newSSHProxyCmd(), newSSHHostCmd()) // attach.go, sshhost.go
	root.AddCommand(newOfferCmd())                                     // offer.go (issue 17)
	root.AddCommand(newVolumeCmd())                                    // volume.go (issue 17)
	root.AddCommand(newUICmd())                                        // ui.go: a one-time dashboard sign-in
	root.AddCommand(newSSHKeyCmd())
}

func leanServes([]string) bool { return true }

func execFull([]string, io.Writer) int { return 0 }
