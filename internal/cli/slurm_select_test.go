package cli

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
	"github.com/berth-hq/berth/internal/spec"
)

// serverList is the reference of what the server lists for a selection
// (store.RunFilter's meaning), newest first.
func serverList(runs []api.Run, sel runSelection) []api.Run {
	var out []api.Run
	for _, r := range runs {
		switch {
		case !sel.all && r.Status.Finished():
		case sel.ids != nil && !slices.Contains(sel.ids, r.ID) && !slices.Contains(sel.ids, r.ArrayID):
		case !sel.since.IsZero() && r.FinishedAt != nil && r.FinishedAt.Before(sel.since):
		case !sel.until.IsZero() && !r.SubmittedAt.Before(sel.until):
		default:
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b api.Run) int { return int(b.ID - a.ID) })
	return out
}

// fetched is what fetchView would see for sel.
func fetched(runs []api.Run, sel runSelection) []api.Run {
	got := serverList(runs, sel)
	if sel.refs {
		if more := referenced(got); len(more) > 0 {
			got = mergeRuns(got, serverList(runs, runSelection{all: true, ids: more}))
		}
	}
	return got
}

// randomHistory is n runs over the three days before now: waiting,
// running and ended ones, array tasks, dependencies, times with fractions
// of a second.
func randomHistory(rng *rand.Rand, n int, now time.Time) []api.Run {
	var runs []api.Run
	span := 72 * time.Hour
	for id := int64(1); id <= int64(n); id++ {
		b := convtest.ARun(id, "job"+strconv.FormatInt(id, 10))
		sub := now.Add(-time.Duration(rng.Int64N(int64(span))))
		b.Run().SubmittedAt = sub
		start := sub.Add(time.Duration(rng.Int64N(int64(2 * time.Hour))))
		end := start.Add(time.Duration(rng.Int64N(int64(3 * time.Hour))))
		switch k := rng.IntN(6); {
		case k == 0 || start.After(now):
			b.Pending("Priority")
		case k == 1 || end.After(now):
			b.Running("00:00:00")
			b.Run().StartedAt = &start
		default:
			st := []api.Status{api.StatusDone, api.StatusFailed, api.StatusTerminated, api.StatusAborted}[rng.IntN(4)]
			b.Ended(st, "", rng.IntN(3), "00:00:00", "00:00:00")
			b.Run().StartedAt, b.Run().FinishedAt = &start, &end
			if rng.IntN(8) == 0 { // ended before it started
				b.Run().StartedAt = nil
				b.Run().Jobs = nil
			}
		}
		if id > 10 && rng.IntN(5) == 0 {
			b.Task(id-int64(rng.IntN(10)+1), rng.IntN(4))
		}
		if id > 1 && rng.IntN(6) == 0 {
			dep := id - 1 - rng.Int64N(id-1)
			b.Run().Spec.DependsOn = []spec.Dependency{{Type: "afterok", Runs: []string{strconv.FormatInt(dep, 10)}}}
		}
		runs = append(runs, b.Build())
	}
	slices.Reverse(runs)
	return runs
}

// What the server selects for sacct, squeue and scontrol is a superset of
// what they show: their output over it is their output over every run.
func TestSelectionKeepsOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	now := time.Date(2026, 11, 22, 15, 4, 5, 0, time.Local)
	runs := randomHistory(rng, 400, now)
	nodes := convtest.GoldenNodes()
	sacct := func(rs []api.Run, f slurm.AcctFilter) string {
		v := slurmconv.NewView(rs, nodes, now)
		out, err := slurm.FormatSacct(slurm.FilterAcct(v.Acct(), f), slurm.SacctOptions{Parsable2: true, Format: "JobID,State,Submit,Start,End"})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Bounds: none, now, long ago, and on or next to the times of the runs
	// (-S and -E are read to the second).
	bound := func() time.Time {
		r := runs[rng.IntN(len(runs))]
		t := r.SubmittedAt
		switch k := rng.IntN(8); {
		case k == 0:
			return time.Time{}
		case k == 1:
			return now
		case k == 2:
			return now.Add(-100 * time.Hour)
		case k < 5 && r.FinishedAt != nil:
			t = *r.FinishedAt
		case k < 7 && r.StartedAt != nil:
			t = *r.StartedAt
		}
		return t.Truncate(time.Second).Add(time.Duration(rng.IntN(3)-1) * time.Second)
	}
	states := [][]slurm.JobState{nil, {slurm.JobRunning}, {slurm.JobPending}, {slurm.JobCompleted, slurm.JobFailed}, {slurm.JobTimeout, slurm.JobCancelled}}
	shown := 0
	for i := 0; i < 1000; i++ {
		f := slurm.AcctFilter{Now: now, Start: bound(), End: bound(), States: states[rng.IntN(len(states))]}
		if rng.IntN(3) == 0 {
			for range rng.IntN(4) + 1 {
				f.Jobs = append(f.Jobs, slurm.JobSelector{JobID: uint32(rng.IntN(len(runs)) + 1), Task: slurm.NoArrayTask})
			}
		}
		sel := acctSelection(f)
		want, got := sacct(runs, f), sacct(fetched(runs, sel), f)
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("sacct %+v over the selection %+v differs from over every run (-all +selected):\n%s", f, sel, d)
		}
		shown += len(want)
	}
	if shown == 0 {
		t.Fatal("sacct showed nothing: the history does not test the windows")
	}
	for _, at := range []time.Time{now, now.Add(-100 * time.Hour)} {
		show := func(rs []api.Run) string {
			v := slurmconv.NewView(rs, nodes, at)
			return slurm.ShowJobs(slurm.FilterJobs(v.Jobs(), slurm.JobFilter{AllStates: true}), true, at)
		}
		sel := inMemory(at)
		if d := cmp.Diff(show(runs), show(fetched(runs, sel))); d != "" {
			t.Errorf("scontrol show job at %v over the selection differs from over every run (-all +selected):\n%s", at, d)
		}
	}
	// squeue -j and scontrol show job N ask for the jobs they name only.
	named := 0
	for i := 0; i < 60; i++ {
		var f slurm.JobFilter
		for range rng.IntN(3) + 1 {
			s := slurm.JobSelector{JobID: uint32(rng.IntN(len(runs)) + 1), Task: slurm.NoArrayTask}
			if rng.IntN(3) == 0 {
				s.Task = rng.IntN(4)
			}
			f.Jobs = append(f.Jobs, s)
		}
		f.AllStates = rng.IntN(2) == 0
		squeue := func(rs []api.Run) string {
			v := slurmconv.NewView(rs, nodes, now)
			out, _, err := slurm.FormatSqueue(slurm.FilterJobs(v.Jobs(), f), slurm.SqueueOptions{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			known := ""
			for _, s := range f.Jobs {
				known += fmt.Sprint(v.Known(s))
			}
			return known + "\n" + out
		}
		sel := namedJobs(inMemory(now), f.Jobs)
		want, got := squeue(runs), squeue(fetched(runs, sel))
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("squeue -j %v over the named runs differs from over every run (-all +named):\n%s", f.Jobs, d)
		}
		named += strings.Count(want, "\n") - 2
	}
	if named == 0 {
		t.Fatal("squeue -j showed nothing: the history does not test the selection")
	}
}
