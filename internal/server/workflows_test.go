package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/store"
)

// finished waits for a run to end and returns it.
func finished(t *testing.T, h *harness, ref string) *api.Run {
	t.Helper()
	var r *api.Run
	waitFor(t, "run "+ref+" to end", func() bool {
		var err error
		r, err = h.c.Run(context.Background(), ref)
		return err == nil && r.Status.Finished()
	})
	return r
}

func TestDependencyChain(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 4})
	prev := submit(t, h, "type: task\nname: step-0\ncommands: [\"true\"]\n")
	ids := []int64{prev.ID}
	for i := 1; i < 10; i++ {
		r := submit(t, h, fmt.Sprintf("type: task\nname: step-%d\ncommands: [\"true\"]\ndepends_on: [{afterok: step-%d}]\n", i, i-1))
		ids = append(ids, r.ID)
	}
	var last *api.Run
	for i, id := range ids {
		r := finished(t, h, fmt.Sprint(id))
		if r.Status != api.StatusDone {
			t.Fatalf("step-%d ended %s (%s)", i, r.Status, r.Reason)
		}
		if last != nil && r.StartedAt.Before(*last.FinishedAt) {
			t.Errorf("step-%d started %v, before step-%d ended %v", i, r.StartedAt, i-1, last.FinishedAt)
		}
		last = r
	}
	// The stored spec names the run it waits for by ID.
	r, _ := h.c.Run(context.Background(), fmt.Sprint(ids[1]))
	if d := r.Spec.DependsOn; len(d) != 1 || d[0].Runs[0] != fmt.Sprint(ids[0]) || d[0].IDs[0] != ids[0] {
		t.Errorf("resolved dependency %+v, want run %d", d, ids[0])
	}
}

func TestDependencyErrors(t *testing.T) {
	h := newHarness(t, t.TempDir())
	plain := submit(t, h, "type: task\nname: plain\ncommands: [\"true\"]\n")
	for name, yaml := range map[string]string{
		"unknown name":       "depends_on: [{afterok: nowhere}]",
		"unknown ID":         "depends_on: [{afterany: 999}]",
		"aftercorr no array": "array: 1-2\ndepends_on: [{aftercorr: plain}]",
	} {
		_, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"+yaml+"\n")})
		if err == nil || !strings.Contains(err.Error(), "depends_on[0]") {
			t.Errorf("%s: %v, want an error naming depends_on[0]", name, err)
		}
	}
	if runs, _ := h.st.ListRuns(context.Background(), store.RunFilter{All: true}); len(runs) != 1 || runs[0].ID != plain.ID {
		t.Errorf("%d runs stored after refused submissions, want only the first", len(runs))
	}
}

func TestArray(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 8})
	a := submit(t, h, `type: task
name: sweep
array: 1-5%2
commands:
  - echo "task ${{ array.index }} of $SLURM_ARRAY_TASK_COUNT in $SLURM_ARRAY_JOB_ID min $SLURM_ARRAY_TASK_MIN max $SLURM_ARRAY_TASK_MAX $BERTH_ARRAY_INDEX"
  - sleep 0.2
`)
	end := finished(t, h, fmt.Sprint(a.ID))
	if end.Status != api.StatusDone || end.Array == nil || end.Array.Count != 5 || end.Array.Throttle != 2 {
		t.Fatalf("array ended %s with %+v", end.Status, end.Array)
	}
	var tasks []*api.Run
	for i := 1; i <= 5; i++ {
		r, err := h.c.Run(context.Background(), fmt.Sprintf("%d_%d", a.ID, i))
		if err != nil {
			t.Fatalf("task %d_%d: %v", a.ID, i, err)
		}
		if r.Name != fmt.Sprintf("sweep_%d", i) || r.Status != api.StatusDone || r.ArrayID != a.ID {
			t.Errorf("task %d: %s %s array %d", i, r.Name, r.Status, r.ArrayID)
		}
		out, _ := follow(t, h, r.ID)
		if want := fmt.Sprintf("task %d of 5 in %d min 1 max 5 %d\n", i, a.ID, i); out != want {
			t.Errorf("task %d output %q, want %q", i, out, want)
		}
		tasks = append(tasks, r)
	}
	// The throttle: never more than two at once.
	for _, x := range tasks {
		n := 0
		for _, y := range tasks {
			if !y.StartedAt.After(*x.StartedAt) && y.FinishedAt.After(*x.StartedAt) {
				n++
			}
		}
		if n > 2 {
			t.Errorf("%d tasks ran at once at %v, throttle 2", n, x.StartedAt)
		}
	}
}

func TestLargeArrayIsLazy(t *testing.T) {
	h := newHarness(t, t.TempDir())
	a := submit(t, h, "type: task\nname: big\narray: 0-99999\ncommands: [\"true\"]\n")
	waitFor(t, "the first tasks to exist", func() bool {
		_, err := h.c.Run(context.Background(), "big_0")
		return err == nil
	})
	runs, err := h.st.ListRuns(context.Background(), store.RunFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) > control.ArrayWindow+1 {
		t.Errorf("%d runs stored for an array of 100,000 with no node: want the array and at most %d tasks", len(runs), control.ArrayWindow)
	}
	r, _ := h.c.Run(context.Background(), fmt.Sprint(a.ID))
	if r.Array == nil || r.Array.Count != 100000 || r.Array.NWaiting != 100000-control.ArrayWindow {
		t.Errorf("array info %+v", r.Array)
	}
	_, err = h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(t, "type: task\narray: 0-2000000\ncommands: [\"true\"]\n")})
	if err == nil || !strings.Contains(err.Error(), "MaxArraySize") {
		t.Errorf("over the maximum: %v", err)
	}
}

func TestHeterogeneousRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "h1", cpus: 4})
	startAgent(t, h, agentOpts{name: "h2", cpus: 2})
	r := submit(t, h, `type: task
name: het
commands: ["echo worker $SLURM_JOB_COMPONENT_ID/$SLURM_HET_SIZE on $BERTH_CPUS CPUs"]
groups:
  - name: trainer
    resources: {cpu: 3}
    commands: ["echo trainer $BERTH_GROUP $BERTH_GROUP_NAME $SLURM_HET_JOB_ID"]
  - resources: {cpu: 2}
`)
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusDone || len(end.Jobs) != 2 {
		t.Fatalf("het run %s with %d jobs", end.Status, len(end.Jobs))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines)
	want := []string{fmt.Sprintf("trainer 0 trainer %d", r.ID), "worker 1/2 on 2 CPUs"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("output %q, want %q", lines, want)
	}
	if end.Jobs[0].Node == end.Jobs[1].Node || end.Jobs[0].Alloc.CPUs != 3 || end.Jobs[1].Alloc.CPUs != 2 {
		t.Errorf("jobs %+v: want 3 CPUs and 2 CPUs on two nodes", end.Jobs)
	}
}

// A plain run with meta of its own (held) is no array: ID_INDEX names
// nothing, and stopping it is refused rather than reported done.
func TestTaskRefOfPlainRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	r, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Stop(ctx, fmt.Sprintf("%d_3", r.ID), false); err == nil {
		t.Errorf("stopping task 3 of plain run %d succeeded", r.ID)
	}
	if _, err := h.c.Run(ctx, fmt.Sprintf("%d_3", r.ID)); err == nil {
		t.Errorf("task 3 of plain run %d was found", r.ID)
	}
}
