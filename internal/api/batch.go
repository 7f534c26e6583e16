package api

// BatchScript says how an agent runs the first job of a batch job that
// sbatch submitted, as slurmd does: the job's Commands[0] is the script,
// written to a file named slurm_script and run by its "#!" interpreter
// (/bin/sh without one) with Args, its standard input, output and error
// opened on the files named here. The server expands the names at
// placement (slurm.ExpandFilename: %j, %A, %a, %x, %u, %N, %n, %t, %%); the
// shim opens them as the job's user.
type BatchScript struct {
	Args   []string `json:"args,omitempty"`
	Input  string   `json:"input"`           // "/dev/null" when none
	Output string   `json:"output"`          // absolute
	Error  string   `json:"error,omitempty"` // "": with the output
	Append bool     `json:"append,omitempty"`
	// Links is the directory of the Slurm-named links to berth: a login
	// shell's profile (#!/bin/bash -l) resets PATH, and the job puts it
	// back after ("": leave PATH alone).
	Links string `json:"links,omitempty"`
}
