package sched

import (
	"slices"
	"time"
)

// A profile is one node's free resources from now on: a list of segments,
// each lasting until the next one starts (the last for ever). Running runs
// give their resources back at their expected end; reservations and starts
// take resources for their time limit. Backfill is then one question — does
// the run fit in the profile over [start, start+limit)? — asked of starts now
// and of reservations alike, so a backfilled run can never delay a
// reservation.
type profile struct {
	node *Node
	segs []segment // segs[0].at is the pass's now
	ends []release // what running runs give back, before releaseAll
	// holders are the runs holding or reserving resources on the node in
	// this pass, sorted, each once: a reservation's blockers.
	holders []int64
}

// release is resources given back at a time.
type release struct {
	at   time.Time
	cpus int
	mem  Bytes
	gpus []int
}

type segment struct {
	at   time.Time
	cpus int
	mem  Bytes
	gpus []int // free device indices, ascending
}

func newProfile(n *Node, now time.Time) *profile {
	p := &profile{}
	p.reset(n, now)
	return p
}

// reset makes p n's profile at now, reusing p's lists.
func (p *profile) reset(n *Node, now time.Time) {
	var free []int
	if len(n.FreeGPUs) > 0 {
		free = slices.Clone(n.FreeGPUs)
		slices.Sort(free)
	}
	p.node = n
	p.segs = append(p.segs[:0], segment{at: now, cpus: n.FreeCPUs, mem: n.FreeMemory, gpus: free})
	p.ends = p.ends[:0]
	p.holders = p.holders[:0]
}

// split makes t the start of a segment (t after segs[0].at) and returns its index.
func (p *profile) split(t time.Time) int {
	i, found := slices.BinarySearchFunc(p.segs, t, func(s segment, t time.Time) int { return s.at.Compare(t) })
	if found {
		return i
	}
	prev := p.segs[i-1]
	p.segs = slices.Insert(p.segs, i, segment{at: t, cpus: prev.cpus, mem: prev.mem, gpus: slices.Clone(prev.gpus)})
	return i
}

// release gives resources back from t on.
func (p *profile) release(t time.Time, cpus int, mem Bytes, gpus []int) {
	for i := p.split(t); i < len(p.segs); i++ {
		s := &p.segs[i]
		s.cpus += cpus
		s.mem += mem
		s.gpus = union(s.gpus, gpus)
	}
}

// releaseAll builds the profile from the running runs' ends, all at once:
// the same segments as a release per run, without inserting each end into
// the list and adding it to every later segment (a node of a busy pool holds
// dozens of runs, and every pass builds its profile anew). Every end comes
// after now (Schedule moves overdue ones just past it), and segments may
// share GPU lists: nothing changes one in place.
func (p *profile) releaseAll() {
	if len(p.ends) == 0 {
		return
	}
	// Ends at one time add up to one segment whatever their order. A
	// Cycle gives its running runs in the order they end: no sort then.
	byAt := func(a, b release) int { return a.at.Compare(b.at) }
	if !slices.IsSortedFunc(p.ends, byAt) {
		slices.SortFunc(p.ends, byAt)
	}
	cur := p.segs[0]
	for i, r := range p.ends {
		cur.cpus += r.cpus
		cur.mem += r.mem
		cur.gpus = union(cur.gpus, r.gpus)
		if i+1 < len(p.ends) && p.ends[i+1].at.Equal(r.at) {
			continue // one segment per distinct time
		}
		cur.at = r.at
		p.segs = append(p.segs, cur)
	}
	p.ends = p.ends[:0]
}

// take holds resources over [from, to); a zero to means for ever.
func (p *profile) take(from, to time.Time, cpus int, mem Bytes, gpus []int) {
	i := p.split(from)
	end := len(p.segs)
	if !to.IsZero() {
		end = p.split(to)
	}
	for ; i < end; i++ {
		s := &p.segs[i]
		s.cpus -= cpus
		s.mem -= mem
		s.gpus = without(s.gpus, gpus)
	}
}

// takeSpan is take over [segs[i].at, to), the segments up to j (the first
// starting at or after to, or all) as a walk found them: no search.
func (p *profile) takeSpan(i, j int, to time.Time, cpus int, mem Bytes, gpus []int) {
	end := len(p.segs)
	if !to.IsZero() {
		if j == len(p.segs) || !p.segs[j].at.Equal(to) {
			prev := p.segs[j-1]
			p.segs = slices.Insert(p.segs, j, segment{at: to, cpus: prev.cpus, mem: prev.mem, gpus: slices.Clone(prev.gpus)})
		}
		end = j
	}
	for ; i < end; i++ {
		s := &p.segs[i]
		s.cpus -= cpus
		s.mem -= mem
		s.gpus = without(s.gpus, gpus)
	}
}

// fits tells whether r fits over [from, to) (zero to: for ever) and which
// GPUs it would take: those free in every segment of the interval.
func (p *profile) fits(from, to time.Time, r Request) ([]int, bool) {
	if !r.inFleet(p.node) {
		return nil, false
	}
	var common []int
	first := true
	// The segment holding from is the last that starts at or before it:
	// found by halving, as reservations ask at every later change of a
	// long profile.
	start, found := slices.BinarySearchFunc(p.segs, from, func(s segment, t time.Time) int { return s.at.Compare(t) })
	if !found && start > 0 {
		start--
	}
	for i := start; i < len(p.segs); i++ {
		s := &p.segs[i]
		if !to.IsZero() && !s.at.Before(to) {
			break
		}
		if s.cpus < r.CPUs || s.mem < r.Memory {
			return nil, false
		}
		if r.GPU.Count > 0 {
			if first {
				common = slices.Clone(s.gpus)
			} else {
				common = intersect(common, s.gpus)
			}
		}
		first = false
	}
	if r.GPU.Count == 0 {
		return nil, true
	}
	var take []int
	for _, idx := range common {
		if g, ok := gpuByIndex(p.node.GPUs, idx); ok && r.GPU.matches(g) {
			take = append(take, idx)
			if len(take) == r.GPU.Count {
				return take, true
			}
		}
	}
	return nil, false
}

// changes lists the times at which the profile changes, from now on.
func (p *profile) changes() []time.Time {
	out := make([]time.Time, len(p.segs))
	for i, s := range p.segs {
		out[i] = s.at
	}
	return out
}

func end(from time.Time, limit time.Duration) time.Time {
	if limit <= 0 {
		return time.Time{}
	}
	return from.Add(limit)
}

func union(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

func intersect(a, b []int) []int {
	out := a[:0:0]
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
