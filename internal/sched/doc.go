// Package sched decides which pending runs start where. It is pure: a
// Snapshot and the current time go in, a Plan comes out; no I/O, no clock, no
// goroutines, no randomness, so the server, the simulator and the tests all
// drive the very same code and every decision can be replayed.
//
// This first version places by priority then submit time, first fit on CPUs,
// memory and GPUs (count, vendor, model names, per-GPU memory), all jobs of a
// multi-node run together or none. Backfill, fairshare, limits, preemption and
// topology arrive behind the same Schedule function.
package sched
