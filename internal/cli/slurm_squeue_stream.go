package cli

import (
	"fmt"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

// squeueJobs are the jobs a squeue listing shows, filtered (f, and the
// nodes of -w when given), read as the server streams the runs: each run
// becomes its Slurm record as it arrives and is then dropped, so the
// client holds the rows it prints, not every run with its configuration.
//
// Two things a record shows depend on runs that may arrive after it: how
// many of an array's tasks run (its throttle, %N) and the state of the
// jobs a dependency names. Records that need them are corrected once the
// listing has ended: array rows from counts, rows with dependencies (few)
// by converting their run again.
func squeueJobs(e *slurmEnv, sel runSelection, f slurm.JobFilter, nodelist []string) ([]slurm.Job, time.Time, error) {
	c, err := e.newClient()
	if err != nil {
		return nil, time.Time{}, slurmFail(1, fmt.Sprintf("squeue: error: Unable to contact slurm controller (connect failure): %v", err))
	}
	fail := func(err error) error { return slurmFail(1, fmt.Sprintf("squeue: error: %v", err)) }
	nodes, err := c.Nodes(e.ctx)
	if err != nil {
		return nil, time.Time{}, fail(err)
	}
	v := slurmconv.NewView(nil, nodes, e.now())
	if pol, err := c.Policy(e.ctx); err == nil {
		v.Policy = pol
	}
	if prios, err := c.PrioritiesOf(e.ctx, nil); err == nil {
		v.Prio = make(map[int64]int64, len(prios))
		for _, p := range prios {
			v.Prio[p.RunID] = p.Priority
		}
	}
	v.Active = map[int64]int{}

	type arrayFix struct {
		row, n int   // the rows the run gave
		array  int64 // the array whose throttle applies
		folded bool  // the array's own record, not a task
		held   bool
	}
	type depFix struct {
		row, n int
		run    api.Run
	}
	var (
		out     []slurm.Job
		arrays  []arrayFix
		deps    []depFix
		seen    = map[int64]bool{}
		pending = map[int64]bool{} // ids referenced and not seen yet
	)
	take := func(r *api.Run) error {
		if seen[r.ID] {
			return nil
		}
		cur, _ := slurmconv.SplitAttempts(r)
		*r = cur
		seen[r.ID] = true
		delete(pending, r.ID)
		// What other records read of this run: whether it ended or
		// started (dependencies) and its throttle (an array's tasks).
		if r.Array != nil || r.Status.Finished() || r.StartedAt != nil {
			v.ByID[r.ID] = &api.Run{ID: r.ID, Status: r.Status, StartedAt: r.StartedAt, Array: r.Array}
		}
		if r.ArrayID != 0 && !r.Status.Finished() && r.Status != api.StatusSubmitted {
			v.Active[r.ArrayID]++
		}
		if sel.refs {
			for _, id := range referenced([]api.Run{*r}) {
				if !seen[id] {
					pending[id] = true
				}
			}
		}
		if !v.InMemory(r) {
			return nil
		}
		rows := slurm.FilterJobs([]slurm.Job{v.Job(r)}, f)
		if len(nodelist) > 0 {
			rows = onNodes(rows, nodelist)
		}
		if len(rows) == 0 {
			return nil
		}
		at := len(out)
		out = append(out, rows...)
		switch {
		case r.Spec != nil && (len(r.Spec.DependsOn) > 0 || r.Spec.Singleton):
			deps = append(deps, depFix{row: at, n: len(rows), run: *r})
		case r.Array != nil && !r.Status.Finished():
			arrays = append(arrays, arrayFix{row: at, n: len(rows), array: r.ID, folded: true, held: r.Reason == slurm.ReasonJobHeldUser})
		case r.ArrayID != 0 && r.ArrayIndex != nil:
			arrays = append(arrays, arrayFix{row: at, n: len(rows), array: r.ArrayID, held: r.Reason == slurm.ReasonJobHeldUser})
		}
		return nil
	}
	o := client.ListOptions{All: sel.all, Jobs: true, Spec: true, Lean: true, IDs: sel.ids, Since: sel.since, Until: sel.until}
	if err := c.EachRun(e.ctx, o, take); err != nil {
		return nil, time.Time{}, fail(err)
	}
	if len(pending) > 0 {
		more := make([]int64, 0, len(pending))
		for id := range pending {
			more = append(more, id)
		}
		if err := c.EachRun(e.ctx, client.ListOptions{All: true, Jobs: true, Spec: true, Lean: true, IDs: more}, take); err != nil {
			return nil, time.Time{}, fail(err)
		}
	}
	// Every run has been counted: the throttles now see all the tasks
	// that run (the record made on arrival counted those before it).
	for _, x := range arrays {
		throttle := 0
		if a := v.ByID[x.array]; a != nil && a.Array != nil {
			throttle = a.Array.Throttle
		}
		for i := x.row; i < x.row+x.n; i++ {
			j := &out[i]
			if !x.folded {
				j.ArrayThrottle = throttle
			}
			if throttle > 0 && v.Active[x.array] >= throttle && !x.held && (x.folded || j.State.Pending()) {
				j.Reason = slurm.ReasonJobArrayTaskLimit
			}
		}
	}
	for _, x := range deps {
		j := v.Job(&x.run)
		for i := x.row; i < x.row+x.n; i++ {
			part := out[i].Partition
			out[i] = j
			out[i].Partition = part
		}
	}
	return out, v.Now, nil
}
