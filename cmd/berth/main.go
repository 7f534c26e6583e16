// Command berth is Berth's one binary: server, agent and client. Named as a
// Slurm command through a symlink (sbatch, squeue…) it acts as that command.
package main

import (
	"os"

	"github.com/berth-hq/berth/internal/cli"
)

func main() {
	os.Exit(cli.Main(cli.Argv(os.Args), os.Stdin, os.Stdout, os.Stderr))
}
