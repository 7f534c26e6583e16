// Package cgroup confines each job to a control group of its own, so that
// the kernel enforces what the scheduler allocated (memory, with swap, and a
// CPU quota), tells when it killed a job for memory (OOM), and lets the
// agent kill every process a job left behind, however it detached itself.
//
// It finds where the agent sits (/proc/self/cgroup, /proc/self/mountinfo)
// and makes the jobs' groups there, never at a fixed path: on cgroup v1 one
// directory per controller (memory, cpu, freezer), on v2 one directory in
// the unified hierarchy (v1 also cpuacct where it is mounted, to measure a
// job's CPU time: Spec.Stats reads what a group has used, for the agent's
// metrics). The groups are written through
// github.com/containerd/cgroups/v3; killing and OOM counting are done here,
// where the library either has no such call or could wait for ever (see
// group.go). A host where groups cannot be made says why (Detect, Probe),
// and the agent reports it instead of pretending to enforce anything.
package cgroup
