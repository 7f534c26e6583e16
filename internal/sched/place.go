package sched

import (
	"slices"
	"strings"
	"time"
)

type pick struct {
	p    *profile
	req  Request // what the job takes there (whole blocks, whole node)
	gpus []int
	// span, when set, are the segments the interval covers, as the search
	// that found it walked them: from segs[i] up to segs[j] (the first at
	// or after its end), so taking it needs no search.
	span   bool
	si, sj int
}

// placeAt finds distinct nodes for every job of pd over [at, at+limit): the
// first that fit, or on a switch tree those under the fewest switches.
func placeAt(profiles []*profile, at time.Time, pd *Pending, topo *Topology) ([]pick, bool) {
	return placeInto(nil, profiles, at, pd, topo)
}

// placeInto is placeAt, its picks appended to buf[:0].
func placeInto(buf []pick, profiles []*profile, at time.Time, pd *Pending, topo *Topology) ([]pick, bool) {
	if len(pd.Groups) > 0 {
		return placeGroups(profiles, at, pd)
	}
	want := max(pd.Nodes, 1)
	to := end(at, pd.Limit)
	picks := buf[:0]
	now := len(profiles) > 0 && at.Equal(profiles[0].segs[0].at)
	segmented := want > 1 && anySegment(profiles)
	collect := (topo != nil || segmented) && want > 1
	exclusive := pd.Request.Exclusive
	for _, p := range profiles {
		r := pd.Request
		if exclusive || p.node.Blocks > 1 {
			eff, ok := pd.Request.on(p.node, pd.Nodes)
			if !ok {
				continue
			}
			r = &eff
		}
		// Starting now needs the first segment to hold it: the cheap test
		// that rejects most nodes of a busy cluster.
		if now && (p.segs[0].cpus < r.CPUs || p.segs[0].mem < r.Memory || len(p.segs[0].gpus) < r.GPU.Count) {
			continue
		}
		if g, ok := p.fits(at, to, *r); ok {
			picks = append(picks, pick{p: p, req: *r, gpus: g})
			if len(picks) == want && !collect {
				return picks, true
			}
		}
	}
	if collect && len(picks) >= want {
		if segmented {
			if picks = oneSegment(picks, want); picks == nil {
				return nil, false
			}
		}
		if topo == nil {
			return picks[:want], true
		}
		return topo.choose(picks, want), true
	}
	return nil, false
}

// placeGroups places a heterogeneous run: each group's jobs on nodes no
// other job of the run uses, first fit, every group or none.
func placeGroups(profiles []*profile, at time.Time, pd *Pending) ([]pick, bool) {
	to := end(at, pd.Limit)
	used := map[*profile]bool{}
	var picks []pick
	for _, g := range pd.Groups {
		n := 0
		for _, p := range profiles {
			if n == max(g.Nodes, 1) {
				break
			}
			if used[p] {
				continue
			}
			r, ok := g.Request.on(p.node, pd.Nodes)
			if !ok {
				continue
			}
			if gpus, ok := p.fits(at, to, r); ok {
				picks = append(picks, pick{p: p, req: r, gpus: gpus})
				used[p] = true
				n++
			}
		}
		if n < max(g.Nodes, 1) {
			return nil, false
		}
	}
	return picks, true
}

// fitsGroups tells whether every group of a heterogeneous run could ever
// find its nodes (each group alone: a necessary condition).
func fitsGroups(nodes []Node, groups []Group) bool {
	for _, g := range groups {
		if !Fits(nodes, g.Request, g.Nodes, false) {
			return false
		}
	}
	return true
}

// earliest is the first time at which every job of pd fits: a profile only
// changes at its segments' starts, so those are the only candidates.
func earliest(profiles []*profile, now time.Time, pd *Pending, topo *Topology) (time.Time, []pick, bool) {
	return earliestInto(nil, profiles, now, pd, topo)
}

// earliestInto is earliest, its picks appended to buf[:0] where it can.
func earliestInto(buf []pick, profiles []*profile, now time.Time, pd *Pending, topo *Topology) (time.Time, []pick, bool) {
	if len(profiles) == 1 && len(pd.Groups) == 0 && pd.Nodes <= 1 && pd.Request.GPU.Count == 0 &&
		!pd.Request.Exclusive && profiles[0].node.Blocks <= 1 {
		at, i, j, ok := earliestOnOne(profiles[0], now, pd)
		if !ok {
			return time.Time{}, nil, false
		}
		return at, append(buf[:0], pick{p: profiles[0], req: *pd.Request, span: true, si: i, sj: j}), true
	}
	if len(pd.Groups) == 0 && pd.Nodes <= 1 {
		return earliestOneJob(profiles, now, pd)
	}
	var times []time.Time
	if len(profiles) == 1 {
		times = profiles[0].changes() // sorted and distinct already
	} else {
		for _, p := range profiles {
			times = append(times, p.changes()...)
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		times = slices.CompactFunc(times, func(a, b time.Time) bool { return a.Equal(b) })
	}
	for _, t := range times {
		if t.Before(now) {
			continue
		}
		if picks, ok := placeAt(profiles, t, pd, topo); ok {
			return t, picks, true
		}
	}
	return time.Time{}, nil, false
}

// earliestOnOne is earliest for one job of CPUs and memory on one node (a
// pool, as the simulator models a machine), in one walk: where the
// interval from one start fails on a segment, so does every interval
// starting up to that segment, which therefore is skipped. Under
// conservative backfill every waiting run asks, and each reservation
// lengthens the profile: asked start by start, a long queue costs the
// square of its length at every pass.
// It also returns the segments the interval covers (see pick.span).
func earliestOnOne(p *profile, now time.Time, pd *Pending) (time.Time, int, int, bool) {
	r := pd.Request
	if !r.inFleet(p.node) {
		return time.Time{}, 0, 0, false
	}
	for i := 0; i < len(p.segs); {
		from := p.segs[i].at
		if from.Before(now) {
			i++
			continue
		}
		to := end(from, pd.Limit)
		bad, j := -1, i
		for ; j < len(p.segs); j++ {
			s := &p.segs[j]
			if !to.IsZero() && !s.at.Before(to) {
				break
			}
			if s.cpus < r.CPUs || s.mem < r.Memory {
				bad = j
				break
			}
		}
		if bad < 0 {
			return from, i, j, true
		}
		i = bad + 1
	}
	return time.Time{}, 0, 0, false
}

// earliestOneJob is earliest for a run of one job: if the job fits on a
// node from some time on, it fits there from the start of the segment that
// time falls in too (the interval from there covers fewer segments), so
// each node's earliest fit is at one of its own changes, and the run's is
// the soonest of those; the node is then the first that fits at that time,
// as placeAt picks it. Asking every node at every change of any node
// instead costs the product of the two on a large cluster, for each of the
// pass's reservations.
func earliestOneJob(profiles []*profile, now time.Time, pd *Pending) (time.Time, []pick, bool) {
	var best time.Time
	found := false
	for _, p := range profiles {
		r := *pd.Request
		if r.Exclusive || p.node.Blocks > 1 {
			eff, ok := r.on(p.node, pd.Nodes)
			if !ok {
				continue
			}
			r = eff
		}
		if !r.inFleet(p.node) {
			continue
		}
		for i := range p.segs {
			at := p.segs[i].at
			if at.Before(now) {
				continue
			}
			if found && !at.Before(best) {
				break // no sooner than the best so far
			}
			if _, ok := p.fits(at, end(at, pd.Limit), r); ok {
				best, found = at, true
				break
			}
		}
	}
	if !found {
		return time.Time{}, nil, false
	}
	picks, ok := placeAt(profiles, best, pd, nil)
	return best, picks, ok
}

// on is what one job of r takes on n, and whether n could ever hold it. An
// exclusive job takes the whole node; on a node split in blocks a job takes
// whole blocks — as many as its largest need — and a run spanning several
// nodes takes every block (dstack: distributed runs do not share nodes).
func (r Request) on(n *Node, nodes int) (Request, bool) {
	split := n.Blocks > 1
	if !r.Exclusive && !split {
		return r, true
	}
	if r.CPUs > n.CPUs || r.Memory > n.Memory || r.GPU.Count > len(n.GPUs) {
		return r, false
	}
	whole := r.Exclusive || nodes > 1
	k := n.Blocks
	if !whole {
		k = max(1, blocksFor(r.CPUs, n.CPUs, n.Blocks), blocksFor(int(r.Memory/(1<<20)), int(n.Memory/(1<<20)), n.Blocks),
			blocksFor(r.GPU.Count, len(n.GPUs), n.Blocks))
		whole = k >= n.Blocks
	}
	out := r
	if whole {
		out.CPUs, out.Memory, out.GPU.Count = n.CPUs, n.Memory, len(n.GPUs)
	} else {
		b := Bytes(n.Blocks)
		out.CPUs, out.Memory, out.GPU.Count = k*(n.CPUs/n.Blocks), Bytes(k)*(n.Memory/b), k*(len(n.GPUs)/n.Blocks)
	}
	if r.GPU.Count == 0 {
		out.GPU = GPURequest{Count: out.GPU.Count} // GPUs that come with the blocks: any
	}
	return out, true
}

// blocksFor is how many of blocks equal shares of total hold need; more
// than blocks when a share is empty but something is needed.
func blocksFor(need, total, blocks int) int {
	if need <= 0 {
		return 0
	}
	per := total / blocks
	if per <= 0 {
		return blocks + 1
	}
	return (need + per - 1) / per
}

// Fits reports whether count distinct nodes could hold a job of r: now (free
// resources) or ever (total resources, offline nodes included).
func Fits(nodes []Node, r Request, count int, now bool) bool {
	want, n := max(count, 1), 0
	// A multi-node run stays within one network segment when any node is
	// in one (placeInto): so many nodes must fit in a single segment.
	var perSegment map[string]int
	if want > 1 && slices.ContainsFunc(nodes, func(n Node) bool { return n.segment() != "" }) {
		perSegment = map[string]int{}
	}
	for i := range nodes {
		if !fitsOn(&nodes[i], r, now) {
			continue
		}
		if perSegment != nil {
			seg := nodes[i].segment()
			if perSegment[seg]++; perSegment[seg] == want {
				return true
			}
			continue
		}
		if n++; n == want {
			return true
		}
	}
	return false
}

// FitsNode reports whether one node holds a job of r now, and if not, whether
// it ever could; why says what is short.
func FitsNode(n *Node, r Request) (now, ever bool, why string) {
	if !fitsOn(n, r, false) {
		return false, false, shortOf(n, r, false)
	}
	if !fitsOn(n, r, true) {
		return false, true, shortOf(n, r, true)
	}
	return true, true, ""
}

func shortOf(n *Node, r Request, now bool) string {
	if r.Containers && !n.Containers {
		return "no container engine"
	}
	if f := r.missingFeature(n); f != "" {
		return featureWhy(f) // nodefilter.go
	}
	if n.Project != "" && n.Project != r.Project {
		return "serves project " + n.Project + "'s runs only"
	}
	if !r.inFleet(n) {
		return "not in fleet " + strings.Join(r.Fleets, " or ")
	}
	if eff, ok := r.on(n, 1); ok {
		r = eff
	}
	cpus, mem, gpus := n.CPUs, n.Memory, len(n.GPUs)
	if now {
		if !n.Online {
			return "node offline"
		}
		cpus, mem, gpus = n.FreeCPUs, n.FreeMemory, len(n.FreeGPUs)
	}
	var why []string
	if r.CPUs > cpus {
		why = append(why, "CPUs")
	}
	if r.Memory > mem {
		why = append(why, "memory")
	}
	if r.GPU.Count > gpus {
		why = append(why, "GPUs")
	} else if r.GPU.Count > 0 && matchingGPUs(n, r.GPU, now) < r.GPU.Count {
		// Enough GPUs, but not enough of the model asked for: said only
		// then, not whenever something else (CPUs) is short.
		why = append(why, "matching GPUs")
	}
	if len(why) == 0 {
		return ""
	}
	adj := "not enough "
	if now {
		adj = "not enough free "
	}
	return adj + strings.Join(why, ", ")
}

// fitsOn tells whether a job of r fits on n: in its free resources (now) or
// in its total ones. It allocates nothing: it runs for every node of every
// pending run.
func fitsOn(n *Node, r Request, now bool) bool {
	if !r.inFleet(n) {
		return false
	}
	if r.Exclusive || n.Blocks > 1 {
		var ok bool
		if r, ok = r.on(n, 1); !ok {
			return false
		}
	}
	cpus, mem := n.CPUs, n.Memory
	if now {
		if !n.Online {
			return false
		}
		cpus, mem = n.FreeCPUs, n.FreeMemory
	}
	if r.CPUs > cpus || r.Memory > mem {
		return false
	}
	if r.GPU.Count == 0 {
		return true
	}
	count := 0
	for _, g := range n.GPUs {
		if (!now || slices.Contains(n.FreeGPUs, g.Index)) && r.GPU.matches(g) {
			if count++; count == r.GPU.Count {
				return true
			}
		}
	}
	return false
}

// matchingGPUs counts n's GPUs (its free ones: now) that r accepts.
func matchingGPUs(n *Node, r GPURequest, now bool) int {
	count := 0
	for _, g := range n.GPUs {
		if (!now || slices.Contains(n.FreeGPUs, g.Index)) && r.matches(g) {
			count++
		}
	}
	return count
}

func gpuByIndex(gs []GPU, idx int) (GPU, bool) {
	for _, g := range gs {
		if g.Index == idx {
			return g, true
		}
	}
	return GPU{}, false
}

func (r GPURequest) matches(g GPU) bool {
	if r.Vendor != "" && !strings.EqualFold(r.Vendor, g.Vendor) {
		return false
	}
	if g.Memory < r.MinMemory || (r.MaxMemory > 0 && g.Memory > r.MaxMemory) {
		return false
	}
	if len(r.Names) == 0 {
		return true
	}
	for _, name := range r.Names {
		if modelMatches(name, g.Name) {
			return true
		}
	}
	return false
}

// modelMatches compares a requested model name ("A100") with a device name
// as drivers report it ("NVIDIA A100-SXM4-80GB"): the request must appear as
// a whole word of the device name, ignoring case.
func modelMatches(want, have string) bool {
	if strings.EqualFold(want, have) {
		return true
	}
	for len(have) > 0 {
		i := strings.IndexAny(have, " -_")
		word := have
		if i >= 0 {
			word, have = have[:i], have[i+1:]
		} else {
			have = ""
		}
		if strings.EqualFold(word, want) {
			return true
		}
	}
	return false
}

func without(have, take []int) []int {
	out := have[:0:0]
	for _, h := range have {
		keep := true
		for _, t := range take {
			if h == t {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, h)
		}
	}
	return out
}
