package sched

import (
	"cmp"
	"slices"
	"time"
)

// Preemption is a running run to stop so that a higher-QOS run can start.
type Preemption struct {
	Victim int64
	By     int64 // the run it makes room for
	Mode   PreemptMode
}

// preemptor finds room for waiting runs whose QOS may preempt others. It
// works on a what-if copy of the pass's node profiles: remove the cheapest
// candidates until the run fits, then put back those it did not need
// (Kueue's approach), and never touches the plan's own profiles.
type preemptor struct {
	s        *Snapshot
	now      time.Time
	profiles map[string]*profile
	onNode   map[string][]*Running // candidates per node
	claimed  map[int64]bool        // victims already chosen (or already ending) for a higher run
}

func newPreemptor(s *Snapshot, now time.Time, profiles []*profile) *preemptor {
	any := false
	for _, q := range s.QOS {
		any = any || len(q.Preempt) > 0
	}
	if !any {
		return nil
	}
	pr := &preemptor{s: s, now: now, profiles: map[string]*profile{}, onNode: map[string][]*Running{}, claimed: map[int64]bool{}}
	for _, p := range profiles {
		pr.profiles[p.node.Name] = p
	}
	for i := range s.Running {
		r := &s.Running[i]
		for _, pl := range r.Placements {
			pr.onNode[pl.Node] = append(pr.onNode[pl.Node], r)
		}
	}
	return pr
}

// cost orders victims: runs already being stopped first (free), then lower
// priority, then less run time lost, then the later submitted (higher ID).
func (pr *preemptor) cost(a, b *Running) int {
	if a.Ending != b.Ending {
		if a.Ending {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
		return c
	}
	if c := b.Start.Compare(a.Start); c != 0 { // later start: less lost
		return c
	}
	return cmp.Compare(b.RunID, a.RunID)
}

// victims returns the runs to stop for pd to start now, or false when no
// set of preemptable runs makes room. Runs already ending count as room
// for the highest waiting preemptor and are claimed by it.
func (pr *preemptor) victims(pd *Pending) ([]*Running, bool) {
	if pr == nil || len(pd.Groups) > 0 {
		return nil, false // heterogeneous runs do not preempt (yet)
	}
	q, ok := pr.s.QOS[pd.QOS]
	if !ok || len(q.Preempt) == 0 {
		return nil, false
	}
	may := func(r *Running) bool {
		return !pr.claimed[r.RunID] && (r.Ending || slices.Contains(q.Preempt, r.QOS))
	}
	type option struct {
		p       *profile
		pk      pick
		victims []*Running
	}
	var options []option
	for _, p := range pr.profiles {
		req, ok := pd.Request.on(p.node, pd.Nodes)
		if !ok || !pd.Request.inFleet(p.node) || !fitsOn(p.node, *pd.Request, false) {
			continue
		}
		var cands []*Running
		for _, r := range pr.onNode[p.node.Name] {
			if may(r) && !slices.Contains(cands, r) {
				cands = append(cands, r)
			}
		}
		slices.SortFunc(cands, pr.cost)
		w := p.clone()
		var chosen []*Running
		to := end(pr.now, pd.Limit)
		gpus, fits := w.fits(pr.now, to, req)
		for _, c := range cands {
			if fits {
				break
			}
			pr.free(w, c, p.node.Name, 1)
			chosen = append(chosen, c)
			gpus, fits = w.fits(pr.now, to, req)
		}
		if !fits {
			continue
		}
		// Put back, costliest first, every victim the run does not need.
		for i := len(chosen) - 1; i >= 0; i-- {
			pr.free(w, chosen[i], p.node.Name, -1)
			if g, ok := w.fits(pr.now, to, req); ok {
				gpus = g
				chosen = slices.Delete(chosen, i, i+1)
			} else {
				pr.free(w, chosen[i], p.node.Name, 1)
			}
		}
		options = append(options, option{p: p, pk: pick{p: p, req: req, gpus: gpus}, victims: chosen})
	}
	want := max(pd.Nodes, 1)
	if len(options) < want {
		return nil, false
	}
	slices.SortFunc(options, func(a, b option) int {
		if c := cmp.Compare(live(a.victims), live(b.victims)); c != 0 {
			return c // fewest runs stopped anew
		}
		if c := cmp.Compare(maxPriority(a.victims), maxPriority(b.victims)); c != 0 {
			return c
		}
		if c := cmp.Compare(lost(a.victims, pr.now), lost(b.victims, pr.now)); c != 0 {
			return c
		}
		return cmp.Compare(a.p.node.Name, b.p.node.Name)
	})
	var out []*Running
	for _, o := range options[:want] {
		for _, v := range o.victims {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	if len(out) == 0 {
		return nil, false // it fits without stopping anyone: not for preemption to decide
	}
	for _, v := range out {
		pr.claimed[v.RunID] = true
	}
	return out, true
}

// free gives back (sign 1) or takes again (-1) what r holds on node, in the
// what-if profile w, from now until r's expected end.
func (pr *preemptor) free(w *profile, r *Running, node string, sign int) {
	for _, pl := range r.Placements {
		if pl.Node != node {
			continue
		}
		if sign > 0 {
			w.release(pr.now, pl.CPUs, pl.Memory, pl.GPUs)
			if !r.End.IsZero() && r.End.After(pr.now) {
				w.take(r.End, time.Time{}, pl.CPUs, pl.Memory, pl.GPUs)
			}
		} else {
			w.take(pr.now, end(pr.now, 0), pl.CPUs, pl.Memory, pl.GPUs)
			if !r.End.IsZero() && r.End.After(pr.now) {
				w.release(r.End, pl.CPUs, pl.Memory, pl.GPUs)
			}
		}
	}
}

func live(vs []*Running) int {
	n := 0
	for _, v := range vs {
		if !v.Ending {
			n++
		}
	}
	return n
}

func maxPriority(vs []*Running) int64 {
	var m int64 = -1 << 63
	for _, v := range vs {
		if !v.Ending {
			m = max(m, v.Priority)
		}
	}
	return m
}

func lost(vs []*Running, now time.Time) time.Duration {
	var d time.Duration
	for _, v := range vs {
		if !v.Ending && !v.Start.IsZero() {
			d += now.Sub(v.Start)
		}
	}
	return d
}

// clone copies a profile so a what-if leaves the original alone.
func (p *profile) clone() *profile {
	c := &profile{node: p.node, segs: make([]segment, len(p.segs))}
	for i, s := range p.segs {
		c.segs[i] = s
		c.segs[i].gpus = slices.Clone(s.gpus)
	}
	return c
}
