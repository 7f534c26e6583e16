package cli

import (
	"os"
	"testing"
)

// TestMain registers the Slurm commands, as cmd/berth does, so that the
// tests' Main has them.
func TestMain(m *testing.M) {
	Register(SlurmCommands)
	os.Exit(m.Run())
}
