package server

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// cluster is the control plane's state: runs, jobs, nodes, arrays,
// schedules, the dependency index, usage and pending reasons. It is
// single-threaded (Server.mu guards it) and does no I/O: what a change
// must make durable, and what to do once it is, it emits as data (emit),
// and the server persists and performs it (takeLocked, commit.go).
type cluster struct {
	cfg Config
	log *slog.Logger
	// rules are the policy in force. A reload swaps them while holding mu
	// (with what is derived from them: active, the pending runs' fleets),
	// so code under mu sees one policy throughout; code outside mu loads
	// whichever is current.
	rules atomic.Pointer[policy.Policy]

	runs    map[int64]*runState // active runs
	jobs    map[int64]*jobState // active jobs
	pending map[int64]*runState // runs waiting to be placed
	// fresh are the pending runs no pass has seen yet; freed says resources
	// were released or added since the last full pass. Until something is
	// freed, a run that did not fit still does not, so a pass need only try
	// the fresh runs (see scheduleOnce). Every change to a waiting run that
	// the scheduler sees must put it in fresh: that also drops its kept
	// view (pass.go) and any start of it in a plan computed meanwhile
	// (plan_apply.go).
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
	// reserved are the runs the last pass gave reservations, in order.
	reserved []int64
	// applied is what the passes applied of the waiting runs' reasons
	// (pass.go); only the pass in progress uses it.
	applied map[int64]reasonEntry
	// waiting keeps the waiting runs' views between passes (pass.go);
	// only the pass in progress uses it.
	waiting waitingIndex
	// usage is each user's past CPU-seconds, decayed to usageAt (fairshare).
	usage   sched.Usage
	usageAt time.Time
	nodes   map[string]*nodeState
	// active counts the active runs under each limit key, for the policy's
	// submit limits.
	active map[sched.LimitKey]int
	// waiters are, per run (or array) ID, the pending runs whose
	// dependencies name it; ended caches the outcomes of final runs they
	// may ask about (see deps.go).
	waiters map[int64][]int64
	ended   map[int64]outcome
	// arrays are the active arrays (their own run records), by ID;
	// schedules the active schedules.
	arrays    map[int64]*runState
	schedules map[int64]*runState
	// doneArrays keep the task IDs of ended arrays that dependencies may
	// still ask about (aftercorr, ID_INDEX), bounded like ended.
	doneArrays map[int64]*arrayState
	nextRun    int64
	nextJob    int64

	// out is what the changes made since the server last took it must
	// make durable, in order, and do once they are (emit).
	out []commitReq
	// finished are the runs that ended since the server last took out:
	// their steps end with them (the server's step relay, steps.go).
	finished []runEnd
	// wakeNow asks for another pass at once, not once out is durable.
	wakeNow bool
}

// emit records that b must be made durable, and the effects performed
// once it is, after everything emitted before.
func (s *cluster) emit(b *store.Batch, after ...effect) {
	s.out = append(s.out, commitReq{b: b, after: after})
}

// runEnd is a run that ended, and when.
type runEnd struct {
	run int64
	at  time.Time
}
