// Package lifecycle is the one owner of a run's life: its typed Status, why
// it is there (Reason, with dstack's words and Slurm's codes), what asked it
// to stop (StopCause), and Step, the one decision function that says what a
// run and its jobs are now after an event. It is pure: no I/O, no clock (time
// arrives as an argument), no goroutines, no global state.
//
// The server keeps the mechanics (node resources, the store batch, messages
// to agents) and applies a Decision; the scheduler decides where runs go;
// this package decides what they are. Kueue's workload.Status and Nomad's
// reconciler are the models: one function answers "what state is this in",
// and its answer is a value another part applies.
package lifecycle
