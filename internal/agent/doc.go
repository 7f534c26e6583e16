// Package agent is Berth's compute plane: `berth agent` on every host. It
// detects the host's CPUs, memory and GPUs, registers them with the server,
// keeps one stream open for assignments, runs each job under its own
// supervisor (the shim, see shim.go) in a cgroup of its own (limits.go,
// package cgroup) and ships the job's events and output back. It keeps its state in its data directory, so a restarted agent finds
// its running jobs again. It also samples its running jobs' use (metrics.go)
// and checks its node's health (health.go) for the server.
package agent
