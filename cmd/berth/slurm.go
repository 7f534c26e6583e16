//go:build !noslurm

package main

import "github.com/berth-hq/berth/internal/cli"

// The Slurm commands (sbatch, squeue, srun…); a build with -tags noslurm
// is Berth without them: the dstack-style product alone.
func init() { cli.Register(cli.SlurmCommands) }
