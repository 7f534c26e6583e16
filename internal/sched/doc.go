// Package sched decides which pending runs start where. It is pure: a
// Snapshot and the current time go in, a Plan comes out; no I/O, no clock, no
// goroutines, no randomness, so the server, the simulator and the tests all
// drive the very same code and every decision can be replayed.
//
// A pass orders the pending runs (multifactor priority: age, fairshare, size,
// QOS, tier, own priority, expansion factor, and under the Berth policy
// aging), starts each that fits now in the nodes' profiles, and gives the
// others a reason, and the first ones a reservation, by policy (FCFS, EASY,
// conservative or Berth backfill). It places first fit on CPUs, memory and
// GPUs (count, vendor, model names, per-GPU memory), all jobs of a
// multi-node run together or none, heterogeneous runs group by group, on a
// switch tree when there is one, within per-user, project, QOS and array
// limits, and preempts lower QOS where allowed.
//
// A Cycle keeps what lies between passes — the nodes, the queue, the
// running runs, fairshare usage and its decay, array throttles, the last
// pass's reservations — fed with changes, and decides each pass with
// Schedule, full or incremental (only what changed since), an incremental
// pass deciding what a full one would; the server's control plane and the
// simulator each keep one. README.md has the pipeline, the vocabulary and
// how to drive a Cycle.
package sched
