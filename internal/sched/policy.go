package sched

import (
	"fmt"
	"time"
)

// Policy is how runs that cannot start now are treated.
type Policy int

const (
	// EASY backfill: the highest-priority run that cannot start gets a
	// reservation; a lower run starts now only if it does not delay it.
	EASY Policy = iota
	// FCFS: no run starts while a higher-priority run waits.
	FCFS
	// Conservative backfill: every run that cannot start gets a
	// reservation; a run starts now only if it delays none of them.
	Conservative
	// Berth is backfill with several reservations in multifactor priority
	// order, with aging: the first BerthReservations runs that cannot start
	// get a reservation, in priority order, and a run's priority grows by
	// BerthAging points for every hour it has waited, without cap. The
	// expansion factor and fairshare let short runs and light users go
	// first, the reservations keep later runs from pushing back the ones
	// ahead, and the aging bounds how long any run can be overtaken: on the
	// archive's traces no run waits longer than under EASY
	// (docs/simulator.md).
	Berth
)

// BerthAging is the priority a run gains per hour waited under Berth: as
// much as the whole fairshare or expansion-factor range (10,000 with the
// default weights) in a little over three hours. Tuned on the archive's
// traces: 1,000 or 2,000 let whole-machine runs of heavy users wait
// longer than under EASY, 5,000 or more give back most of the slowdown
// gained (docs/simulator.md).
const BerthAging = 3000

// BerthReservations is how many waiting runs hold a reservation under
// Berth, the first in priority order. Every one costs a search of the
// profiles (earliest), which on a large cluster is most of a pass; 16 is
// the fewest that keeps every run's wait within EASY's on the archive's
// traces with BerthAging (8 let KTH-SP2's longest wait exceed EASY's by
// 431 s; unbounded, a pass over 1,000 pending runs took seconds).
const BerthReservations = 16

// strategy is what makes one policy differ from another: a few small
// decisions that the pass's stages ask (pipeline.go), instead of tests of
// the policy's name inside the pass.
type strategy struct {
	// order ranks the pending runs.
	order order
	// passBlocked: a run may start now while a higher one waits (backfill).
	// Without it (FCFS) the first run that waits holds every later one.
	passBlocked bool
	// reserve says whether a waiting run takes a reservation.
	reserve reserver
}

// order is how a pass ranks pending runs: by multifactor priority when the
// snapshot has Weights, else by each run's own priority; then older first,
// then lower run ID (priorityOrder).
type order struct {
	// aging is the priority points a run gains per hour waited, added to
	// the weighted factors (0: none).
	aging float64
}

// reserver tells whether a run that waits takes a reservation: first says
// it is the pass's first run to wait, reserved how many runs took one
// before it.
type reserver func(first bool, reserved int) bool

// reserveFirst: only the first run that waits (EASY's, and FCFS's for its
// estimate).
func reserveFirst(first bool, _ int) bool { return first }

// reserveAll: every run that waits (conservative backfill).
func reserveAll(bool, int) bool { return true }

// reserveFirstN: the first run that waits, and any while fewer than n hold
// one.
func reserveFirstN(n int) reserver {
	return func(first bool, reserved int) bool { return first || reserved < n }
}

// strategies are the policies' strategies; a Policy of no known value
// behaves as EASY.
var strategies = map[Policy]strategy{
	EASY:         {passBlocked: true, reserve: reserveFirst},
	FCFS:         {passBlocked: false, reserve: reserveFirst},
	Conservative: {passBlocked: true, reserve: reserveAll},
	Berth:        {order: order{aging: BerthAging}, passBlocked: true, reserve: reserveFirstN(BerthReservations)},
}

func (p Policy) strategy() strategy {
	if st, ok := strategies[p]; ok {
		return st
	}
	return strategies[EASY]
}

// agingPoints is what aging adds to a run that has waited wait, and the
// hours it has waited (0, 0 without aging or before its submission).
func (o order) agingPoints(wait time.Duration) (points, hours float64) {
	if o.aging <= 0 || wait <= 0 {
		return 0, 0
	}
	hours = wait.Hours()
	return o.aging * hours, hours
}

var policyNames = map[Policy]string{EASY: "easy", FCFS: "fcfs", Conservative: "conservative", Berth: "berth"}

func (p Policy) String() string {
	if n, ok := policyNames[p]; ok {
		return n
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy reads a policy's name: easy, fcfs, conservative or berth.
func ParsePolicy(s string) (Policy, error) {
	for p, n := range policyNames {
		if n == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("sched: unknown policy %q (want easy, fcfs, conservative or berth)", s)
}
