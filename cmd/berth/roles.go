//go:build !slim

package main

import (
	"github.com/berth-hq/berth/internal/cli"
	"github.com/berth-hq/berth/internal/roles"
)

// The roles (server, agent, shim, ssh-host); the Slurm commands' lean
// build (-tags slim) has none.
func init() { cli.Register(roles.Register) }
