package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/berth-hq/berth/internal/sched"
)

// refSchedule is a naive scheduler for the simulator's one-pool machine,
// written from the textbook definitions of the three policies, independent of
// sched's code. Tests replay the same workloads through it and through sched
// and compare every start time.
//
//   - FCFS starts pending jobs in order while the first one fits.
//   - EASY does the same, then gives the first job that does not fit a
//     reservation at the shadow time (the earliest expected end after which
//     enough processors are free), and starts any later job that fits now
//     and either ends by the shadow time or uses only the processors the
//     reserved job leaves spare at the shadow time.
//   - Conservative gives every pending job, in order, the earliest slot
//     where it fits for its whole estimate beside the running jobs and the
//     slots given before it; those whose slot is now start.
func refSchedule(s sched.Snapshot, now time.Time) sched.Plan {
	plan := sched.Plan{Reasons: map[int64]string{}}
	free := s.Nodes[0].FreeCPUs
	order := slices.Clone(s.Pending)
	slices.SortStableFunc(order, func(a, b sched.Pending) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.RunID, b.RunID)
	})
	type release struct {
		at   time.Time
		cpus int
	}
	var ends []release
	for _, r := range s.Running {
		ends = append(ends, release{r.End, r.Placements[0].CPUs})
	}
	start := func(p sched.Pending) {
		plan.Starts = append(plan.Starts, sched.Start{RunID: p.RunID, Placements: []sched.Placement{{JobID: p.JobIDs[0], Node: s.Nodes[0].Name, CPUs: p.Request.CPUs}}})
		free -= p.Request.CPUs
		ends = append(ends, release{now.Add(p.Limit), p.Request.CPUs})
	}
	switch s.Policy {
	case sched.FCFS, sched.EASY:
		i := 0
		for ; i < len(order) && order[i].Request.CPUs <= free; i++ {
			start(order[i])
		}
		if i == len(order) || s.Policy == sched.FCFS {
			return plan
		}
		head := order[i].Request.CPUs
		slices.SortStableFunc(ends, func(a, b release) int { return a.at.Compare(b.at) })
		avail, shadow := free, time.Time{}
		for k, e := range ends {
			avail += e.cpus
			if avail >= head {
				shadow = e.at
				// What else ends at the shadow time is spare then too.
				for _, f := range ends[k+1:] {
					if !f.at.Equal(shadow) {
						break
					}
					avail += f.cpus
				}
				break
			}
		}
		extra := avail - head
		for _, p := range order[i+1:] {
			c := p.Request.CPUs
			if c > free {
				continue
			}
			if e := now.Add(p.Limit); !e.After(shadow) {
				start(p)
			} else if c <= extra {
				start(p)
				extra -= c
			}
		}
	case sched.Conservative:
		// prof: free processors from each time on, times ascending.
		type step struct {
			at   time.Time
			free int
		}
		prof := []step{{now, free}}
		split := func(t time.Time) int {
			i, found := slices.BinarySearchFunc(prof, t, func(s step, t time.Time) int { return s.at.Compare(t) })
			if !found {
				prof = slices.Insert(prof, i, step{t, prof[i-1].free})
			}
			return i
		}
		for _, e := range ends {
			for i := split(e.at); i < len(prof); i++ {
				prof[i].free += e.cpus
			}
		}
		for _, p := range order {
			c := p.Request.CPUs
			// Earliest k such that every step in [prof[k].at, +limit) has c free.
			k := 0
			for k < len(prof) {
				until := prof[k].at.Add(p.Limit)
				ok := true
				for m := k; m < len(prof) && prof[m].at.Before(until); m++ {
					if prof[m].free < c {
						ok, k = false, m+1
						break
					}
				}
				if ok {
					break
				}
			}
			from := prof[k].at
			a, b := split(from), split(from.Add(p.Limit))
			for m := a; m < b; m++ {
				prof[m].free -= c
			}
			if from.Equal(now) {
				plan.Starts = append(plan.Starts, sched.Start{RunID: p.RunID, Placements: []sched.Placement{{JobID: p.JobIDs[0], Node: s.Nodes[0].Name, CPUs: c}}})
			}
		}
	}
	return plan
}
