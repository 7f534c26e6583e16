package control

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// An array and a schedule are their records (issue 12, migration 00037):
// no batch the cluster emits writes a run row of theirs; every record it
// writes carries its head (what lists it: name, status, configuration,
// times), and a cluster restored from what the batches stored — the task
// runs, the fired runs and the records — holds the same array, with the
// stopped schedule gone.
func TestArrayAndScheduleAreTheirRecords(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	var batches []*store.Batch
	step := func(in Input) any {
		t.Helper()
		r, err := s.Step(s.now, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Take().Commits {
			batches = append(batches, c.Batch)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	submit := func(yaml string) int64 {
		t.Helper()
		tk, err := spec.Parse("test.yml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(tk)
		return step(SubmitInput{UserID: 1, User: "admin", ProjectID: 1, Project: "main", Task: tk, Body: body}).(store.Run).ID
	}
	pass := func() {
		p := step(PassInput{}).(*Pass)
		plan := p.Schedule()
		step(PlanInput{Pass: p, Plan: plan, Reasons: s.NewReasons(plan)})
		s.ForgetReasons(p, plan)
	}
	arr := submit("type: task\nname: arr\ncommands: [\"true\"]\nresources: {cpu: 1}\narray: \"0-5%2\"\n")
	sch := submit("type: task\nname: nightly\ncommands: [\"true\"]\nresources: {cpu: 1}\nschedule: {cron: [\"*/5 * * * *\"]}\n")
	pass()
	s.now = s.now.Add(5 * time.Minute)
	step(TickInput{}) // the schedule fires
	pass()
	step(StopInput{ID: sch})

	// What the store holds after these batches (a row written with no
	// configuration keeps the stored one).
	runs, jobs := map[int64]*store.Run{}, map[int64]*store.Job{}
	arrays, schedules := map[int64]*store.Array{}, map[int64]*store.Schedule{}
	for _, b := range batches {
		for _, r := range b.Runs {
			if r.ID == arr || r.ID == sch {
				t.Fatalf("a batch writes a run row of %s %d: %+v", map[bool]string{true: "array", false: "schedule"}[r.ID == arr], r.ID, r)
			}
			c := *r
			if len(c.Spec) == 0 && runs[r.ID] != nil {
				c.Spec = runs[r.ID].Spec
			}
			runs[r.ID] = &c
		}
		for _, j := range b.Jobs {
			jobs[j.ID] = j
		}
		for _, a := range b.Arrays {
			if a.Name != "arr" || a.Status == "" || len(a.Spec) == 0 || a.SubmittedAt.IsZero() {
				t.Errorf("array record without its head: %+v", a)
			}
			arrays[a.ID] = a
		}
		for _, c := range b.Schedules {
			if c.Name != "nightly" || c.Status == "" || len(c.Spec) == 0 || c.SubmittedAt.IsZero() {
				t.Errorf("schedule record without its head: %+v", c)
			}
			schedules[c.ID] = c
		}
	}
	if c := schedules[sch]; c == nil || c.Active || c.Status != string(api.StatusTerminated) || c.Runs != 1 || runs[c.LastRun] == nil || runs[c.LastRun].Name != "nightly" {
		t.Fatalf("the stopped schedule's record: %+v", c)
	}
	if a := arrays[arr]; a == nil || !a.Active || a.Next != 4 { // two placed, two waiting (the throttle)
		t.Fatalf("the array's record: %+v", a)
	}
	act := &store.Active{MaxRunID: max(arr, sch)}
	l := &Loaded{Active: act, Users: map[int64]string{1: "admin"}, Projects: map[int64]string{1: "main"},
		Tasks: map[int64][]*store.Run{}, Ended: map[int64]*store.Run{}}
	for _, r := range runs {
		act.MaxRunID = max(act.MaxRunID, r.ID)
		if r.ArrayID == arr {
			l.Tasks[arr] = append(l.Tasks[arr], r)
		}
		if !api.Status(r.Status).Finished() {
			act.Runs = append(act.Runs, r)
		}
	}
	for _, j := range jobs {
		act.MaxJobID = max(act.MaxJobID, j.ID)
		if !api.Status(j.Status).Finished() {
			act.Jobs = append(act.Jobs, j)
		}
	}
	for _, a := range arrays {
		if a.Active {
			act.Arrays = append(act.Arrays, a)
		}
	}
	for _, c := range schedules {
		if c.Active {
			act.Schedules = append(act.Schedules, c)
		}
	}
	s2 := New(Config{StopGrace: time.Second})
	if err := s2.Restore(l, s.now); err != nil {
		t.Fatal(err)
	}
	if err := s2.Check(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.runs[sch]; ok {
		t.Errorf("the stopped schedule is back after the restart")
	}
	a1, a2 := s.arrays[arr], s2.arrays[arr]
	if a2 == nil {
		t.Fatalf("the array is not restored")
	}
	if diff := cmp.Diff(a1.rec, a2.rec, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the array's progress after the restart (-before +after):\n%s", diff)
	}
	h1, h2 := headOf(&s.runs[arr].rec), headOf(&s2.runs[arr].rec)
	if diff := cmp.Diff(h1, h2, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("what lists the array after the restart (-before +after):\n%s", diff)
	}
}
