package control

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// Cluster is the control plane's state: runs, jobs, nodes, arrays,
// schedules, the dependency index, usage and pending reasons. It is
// single-threaded (its owner serialises every call) and does no I/O:
// what a change must make durable, and what to do once it is, it emits
// as data (emit), which its owner takes (Take), persists and performs.
type Cluster struct {
	cfg Config
	log *slog.Logger
	// rules are the policy in force. A reload (RulesInput) swaps them with
	// what is derived from them (active, the pending runs' fleets), so an
	// input sees one policy throughout; Rules, which may be called beside
	// inputs, loads whichever is current.
	rules atomic.Pointer[policy.Policy]
	// owners are the fleets projects own (owners.go).
	owners  map[string]string
	growing map[string]bool

	runs    map[int64]*runState // active runs
	jobs    map[int64]*jobState // active jobs
	pending map[int64]*runState // runs waiting to be placed
	// fresh are the pending runs changed since the last pass: the next
	// pass queues them in the Cycle again (pass.go). Every change to a
	// waiting run that the scheduler sees must put it in fresh: that also
	// drops any start of it in a plan computed meanwhile (plan_apply.go).
	// freed says resources were released or added since the last pass:
	// the scheduler may run at once, and the holds other runs may end are
	// decided again.
	fresh map[int64]*runState
	freed bool
	// reasons are pending runs whose reason or estimated start changed but
	// is not written yet (see flushReasonsLocked); reasonsDue is when they
	// must be.
	reasons    map[int64]*runState
	reasonsDue time.Time
	// holdUntil is the earliest time a run held for a while (a retry's
	// back-off) becomes eligible: a full pass is due then.
	holdUntil time.Time
	// applied is what the passes applied of the waiting runs' reasons
	// (pass.go); only the pass in progress uses it.
	applied map[int64]uint64 // reasonEntry.sum
	// cycle is the scheduler's state between passes (pass.go): nodes,
	// running and waiting runs as it sees them, fairshare usage and its
	// decay, throttles, the last pass's reservations. cycDirty: it was
	// told of a change since the last pass was prepared. maybeHeld are the
	// waiting runs queued in it that a hold may apply to (runState.plain).
	cycle     *sched.Cycle
	cycDirty  bool
	maybeHeld map[int64]*runState
	nodes     map[string]*nodeState
	reqs      requests // the runs' requests, interned
	// nodeNames are the nodes' names, sorted, for the passes (rebuilt
	// when a node comes).
	nodeNames []string
	// active counts the active runs under each limit key, for the policy's
	// submit limits.
	active map[sched.LimitKey]int
	// waiters are, per run (or array) ID, the pending runs whose
	// dependencies name it; ended caches the outcomes of final runs they
	// may ask about (see deps.go).
	waiters map[int64][]int64
	ended   map[int64]Outcome
	// arrays are the active arrays (their own run records), by ID;
	// schedules the active schedules.
	arrays    map[int64]*runState
	schedules map[int64]*runState
	// doneArrays keep the task IDs of ended arrays that dependencies may
	// still ask about (aftercorr, ID_INDEX), bounded like ended.
	doneArrays map[int64]*arrayState
	nextRun    int64
	nextJob    int64
	// keys are the recent submissions' idempotency keys (state.go).
	keys     map[userKey]keyedRun
	keyOrder []userKey // the keys, oldest first
	// runsUpto and jobsUpto are how far IDs are reserved in the store
	// (emit): no ID above them is in a batch before its reservation.
	runsUpto, jobsUpto int64

	// out is what the changes made since the server last took it must
	// make durable, in order, and do once they are (emit).
	out []Commit
	// finished are the runs that ended since the server last took out:
	// their job steps end with them (the server's step relay).
	finished []RunEnd
	// wakeNow asks for another pass at once, not once out is durable.
	wakeNow bool
}

// emit records that b must be made durable, and the effects performed
// once it is, after everything emitted before.
func (s *Cluster) emit(b *store.Batch, after ...Effect) {
	// IDs past the reserved marks are in b, or will be in a later batch:
	// reserve the next block with b, which the store then syncs to disk
	// before anyone hears of them. A lost transaction may lose runs
	// nobody was told of, never give an acknowledged ID to another run.
	if s.nextRun > s.runsUpto {
		s.runsUpto = s.nextRun + idBlock
		b.Reserve.Runs = s.runsUpto
	}
	if s.nextJob > s.jobsUpto {
		s.jobsUpto = s.nextJob + idBlock
		b.Reserve.Jobs = s.jobsUpto
	}
	s.addRecords(b)
	s.out = append(s.out, Commit{Batch: b, Effects: after})
}

// idBlock is how many run (job) IDs one reservation covers: one synced
// transaction per idBlock submissions.
const idBlock = 1000

// RunEnd is a run that ended, and when.
type RunEnd struct {
	Run int64
	At  time.Time
}

// Commit is a batch to make durable and what to do once it is.
type Commit struct {
	Batch   *store.Batch
	Effects []Effect
}

// Ready is what the inputs fed since the last Take emitted.
type Ready struct {
	// Commits, in the order they must become durable.
	Commits []Commit
	// Ended are the runs that ended: their job steps end with them.
	Ended []RunEnd
	// WakeNow asks for another scheduling pass at once, not once the
	// commits are durable.
	WakeNow bool
}

// Take returns what the inputs fed since the last Take emitted, and
// forgets it.
func (s *Cluster) Take() Ready {
	r := Ready{Commits: s.out, Ended: s.finished, WakeNow: s.wakeNow}
	s.out, s.finished, s.wakeNow = nil, nil, false
	return r
}

// Emitted reports whether Take has something to return.
func (s *Cluster) Emitted() bool {
	return len(s.out) > 0 || len(s.finished) > 0 || s.wakeNow
}

// Freed reports whether resources were freed or added since the last full
// pass: the next pass is a full one, and may run at once.
func (s *Cluster) Freed() bool { return s.freed }

// Rules is the policy in force. It may be called without the owner's
// serialisation: a reload swaps the rules whole.
func (s *Cluster) Rules() *policy.Policy { return s.rules.Load() }
