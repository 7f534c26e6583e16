// Package server is Berth's control plane: the HTTP API under /api/v1, the
// leader's in-memory state, the scheduler loop that feeds internal/sched and
// applies its plans, and the gateway that streams assignments to agents and
// takes their reports.
//
// Every mutation follows one path (see commit.go): under the state lock it is
// applied in memory and queued, in lock order, to the committer, which writes
// queued batches to the store in one transaction (group commit) and only then
// runs their effects — answering the caller, pushing assignments to agents,
// waking log followers. Nothing outside the process sees a change before it is
// durable, and effects happen in the order the changes were made.
package server
