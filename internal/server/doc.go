// Package server is Berth's control plane: the HTTP API under /api/v1, the
// leader's in-memory state, the scheduler loop that feeds internal/sched and
// applies its plans, and the gateway that streams assignments to agents and
// takes their reports.
//
// Every mutation follows one path (see commit.go): under the state lock it is
// applied in memory and queued, in lock order, to the committer, which writes
// queued batches to the store in one transaction (group commit) and only then
// performs their effects (data, see effect) — pushing assignments and stops to
// agents, waking log followers and the scheduler — and answers the callers.
// Nothing outside the process sees a change before it is durable, and effects
// happen in the order the changes were made. What a run and its jobs become
// after an event is decided by internal/lifecycle (applied in lifecycle.go).
package server
