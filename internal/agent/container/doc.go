// Package container runs one job in a container through the Docker Engine
// API: it finds out whether an engine is reachable (for the node's report),
// pulls the job's image when it is missing, creates the container with the
// job's allocation as its limits (memory, CPUs, GPUs as device requests),
// its volumes, ports and network mode, streams its output demultiplexed from
// any byte offset, waits for its exit (and whether the kernel killed it for
// memory), stops it with a grace period, and removes it.
//
// Every container carries Berth's labels and a unique name, so that several
// agents on one host never touch each other's containers and a restarted
// supervisor finds its job's container again (see Engine.Get and
// Engine.Find). The package knows nothing of jobs' files or of the server:
// the shim (internal/agent/shim_container.go) drives it.
package container
