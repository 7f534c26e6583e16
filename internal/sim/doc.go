// Package sim replays a workload through the scheduler on a virtual clock.
//
// Its one job: turn a list of jobs (submit time, run time, processors,
// estimate) into the start time of each, by driving a sched.Cycle — the
// scheduling state between passes, whose passes are the very same
// sched.Schedule that the server calls — on a discrete-event clock, and
// measure the outcome with the conventions of the parallel job scheduling
// literature (wait, bounded slowdown, utilization, makespan), so the figures
// compare with other simulators.
//
// The input is a []Job, independent of where it came from: ParseSWF reads a
// Standard Workload Format trace from the Parallel Workloads Archive, and
// Berth's own run history can be turned into the same Jobs later.
//
// The machine is one pool of P processors, seen by sched as a single node
// without memory or GPUs. Jobs arrive at their submit time; at each distinct
// event time every completion and arrival of that instant is applied first,
// then the policy runs once and its starts are applied at that instant. The
// scheduler plans with each job's estimate; the job then runs exactly its run
// time. Nothing in the package reads the real clock or a random source: the
// same jobs and policy always give the same figures.
package sim
