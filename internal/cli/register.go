package cli

import "github.com/spf13/cobra"

// registered are the command sets added beside the native commands by
// packages that import this one (the roles: internal/roles), each by one
// Register call in cmd/berth.
var registered []func(root *cobra.Command)

// Register adds a set of commands to every command tree NewRoot builds.
// Call it before Main (from an init function of cmd/berth).
func Register(add func(root *cobra.Command)) { registered = append(registered, add) }
