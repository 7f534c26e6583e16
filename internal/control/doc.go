// Package control is the control plane's state machine: the cluster's
// runs, jobs, nodes, arrays, schedules, dependency index, fairshare usage
// and pending reasons, changed only by Step(now, input), one input at a
// time. The inputs are a closed set (inputs.go): a submission, a stop, a
// hold or update, an agent's report, a node registering, connecting or
// going away, a health report or drain, time passing, a new policy, and a
// scheduling pass's two halves. Names and IDs arrive resolved in the
// inputs and the time arrives as now: nothing here reads the store, the
// clock or the network.
//
// What an input changed is emitted as data and taken with Take: the
// store batches to make durable, in order, and the effects to perform
// once each is (a message to a node's agent, a wake-up of a run's log
// followers or of the scheduler). Its owner, internal/server, feeds
// inputs under one lock, queues what Take returns for its committer, and
// performs each batch's effects only once the batch is durable (raft's
// Ready and Advance; the obligations are numbered in inputs.go).
//
// A run's life is decided by internal/lifecycle (lifecycle.go applies its
// decisions); which runs start where, by internal/sched (pass.go prepares
// a pass, plan_apply.go applies its plan after re-checking it). Queries
// (queries.go) read the state for the API without changing it, and Check
// verifies the rules that must hold after every input.
package control
