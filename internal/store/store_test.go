package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func ts(sec int) time.Time { return time.Unix(1_700_000_000+int64(sec), 0).UTC() }

func intp(v int) *int { return &v }

func TestApplyAndLoadActive(t *testing.T) { forEachStore(t, testApplyAndLoadActive) }

func testApplyAndLoadActive(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, err := s.EnsureProject(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	uid, err := s.EnsureUser(ctx, "admin", true)
	if err != nil {
		t.Fatal(err)
	}
	active := &Run{ID: 1, ProjectID: pid, UserID: uid, Name: "a", Status: "submitted", Spec: []byte(`{"type":"task"}`), SubmittedAt: ts(1), EstimatedStart: ts(9)}
	final := &Run{ID: 2, ProjectID: pid, UserID: uid, Name: "b", Status: "failed", Reason: "exited_with_error", ExitCode: intp(3),
		Spec: []byte(`{}`), SubmittedAt: ts(1), StartedAt: ts(2), FinishedAt: ts(3)}
	jobA := &Job{ID: 10, RunID: 1, Status: "running", Node: "n1", Alloc: []byte(`{"cpus":1}`), SubmittedAt: ts(1), StartedAt: ts(2), LogSize: 42}
	jobB := &Job{ID: 11, RunID: 2, Status: "failed", ExitCode: intp(3), Node: "n1", Alloc: []byte(`{}`), SubmittedAt: ts(1), FinishedAt: ts(3)}
	node := &Node{Name: "n1", Info: []byte(`{"name":"n1"}`), RegisteredAt: ts(0), LastSeen: ts(5)}
	b := &Batch{Runs: []*Run{active, final}, Jobs: []*Job{jobA, jobB}, Nodes: []*Node{node}}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Upserts are idempotent: the same batch again changes nothing.
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open() // what is committed survives closing the store

	a, err := s.LoadActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &Active{Runs: []*Run{active}, Jobs: []*Job{jobA}, Nodes: []*Node{node}, MaxRunID: 2, MaxJobID: 11}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("LoadActive (-want +got):\n%s", diff)
	}
	got, err := s.GetRun(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(final, got); diff != "" {
		t.Errorf("GetRun (-want +got):\n%s", diff)
	}
	all, err := s.ListRuns(ctx, RunFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != 2 || all[1].ID != 1 {
		t.Errorf("ListRuns(all) = %v, want runs 2, 1 (newest first)", all)
	}
	act, err := s.ListRuns(ctx, RunFilter{ProjectID: pid})
	if err != nil {
		t.Fatal(err)
	}
	if len(act) != 1 || act[0].ID != 1 {
		t.Errorf("ListRuns(active) = %v, want run 1", act)
	}
}

func TestGetRunMissing(t *testing.T) { forEachStore(t, testGetRunMissing) }

func testGetRunMissing(t *testing.T, open func() Store) {
	s := open()
	if _, err := s.GetRun(context.Background(), 99); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun(99) = %v, want ErrNotFound", err)
	}
	if _, err := s.FindRun(context.Background(), 1, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindRun = %v, want ErrNotFound", err)
	}
}

func TestFindRunNewest(t *testing.T) { forEachStore(t, testFindRunNewest) }

func testFindRunNewest(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "u", false)
	var b Batch
	for id := int64(1); id <= 3; id++ {
		b.Runs = append(b.Runs, &Run{ID: id, ProjectID: pid, UserID: uid, Name: "same", Status: "done", Spec: []byte(`{}`), SubmittedAt: ts(int(id))})
	}
	if err := s.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	r, err := s.FindRun(ctx, pid, "same")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != 3 {
		t.Errorf("FindRun picked run %d, want the newest, 3", r.ID)
	}
}

func TestFindActiveRun(t *testing.T) { forEachStore(t, testFindActiveRun) }

// A name's active run is found before newer finished ones, and a schedule
// before the runs it fired; a name with none active is not found.
func testFindActiveRun(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "u", false)
	var b Batch
	add := func(id int64, name, status string) {
		b.Runs = append(b.Runs, &Run{ID: id, ProjectID: pid, UserID: uid, Name: name, Status: status, Spec: []byte(`{}`), SubmittedAt: ts(int(id))})
	}
	add(1, "train", "running")
	add(2, "train", "done")
	add(3, "nightly", "scheduled")
	add(4, "nightly", "running")
	add(5, "old", "done")
	if err := s.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"train": 1, "nightly": 3} {
		r, err := s.FindActiveRun(ctx, pid, name)
		if err != nil || r.ID != want {
			t.Errorf("FindActiveRun(%s) = %v, %v; want run %d", name, r, err, want)
		}
	}
	if _, err := s.FindActiveRun(ctx, pid, "old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a finished name: %v, want ErrNotFound", err)
	}
}

func TestLogsDeduplicatedAndOrdered(t *testing.T) { forEachStore(t, testLogsDeduplicatedAndOrdered) }

func testLogsDeduplicatedAndOrdered(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	chunk := func(off int64, data string) *LogChunk {
		return &LogChunk{JobID: 7, Offset: off, Stream: "stdout", Time: ts(int(off)), Data: []byte(data)}
	}
	if err := s.Apply(ctx, &Batch{Logs: []*LogChunk{chunk(20, "b"), chunk(0, "a")}}); err != nil {
		t.Fatal(err)
	}
	// A resent chunk (same offset) is ignored, even with other data.
	if err := s.Apply(ctx, &Batch{Logs: []*LogChunk{chunk(0, "DUP"), chunk(40, "c")}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadLogs(ctx, 7, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, c := range got {
		text += string(c.Data)
	}
	if text != "abc" {
		t.Errorf("logs = %q, want %q", text, "abc")
	}
	got, err = s.ReadLogs(ctx, 7, 21, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Data) != "c" {
		t.Errorf("ReadLogs(from 21, limit 1) = %v, want only %q", got, "c")
	}
}

func TestUsersAndTokens(t *testing.T) { forEachStore(t, testUsersAndTokens) }

func testUsersAndTokens(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	id1, err := s.EnsureUser(ctx, "admin", true)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := s.EnsureUser(ctx, "admin", true)
	if err != nil || id1 != id2 {
		t.Fatalf("EnsureUser twice = %d, %d (%v), want the same ID", id1, id2, err)
	}
	if err := s.AddToken(ctx, id1, "hash1", "cli"); err != nil {
		t.Fatal(err)
	}
	u, err := s.UserByToken(ctx, "hash1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&User{ID: id1, Name: "admin", Admin: true}, u, cmpopts.IgnoreFields(User{}, "CreatedAt")); diff != "" {
		t.Errorf("UserByToken (-want +got):\n%s", diff)
	}
	if _, err := s.UserByToken(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown token: %v, want ErrNotFound", err)
	}
	if n, err := s.UserName(ctx, id1); err != nil || n != "admin" {
		t.Errorf("UserName = %q, %v", n, err)
	}
}

// ListRuns' filters: IDs (with the tasks of arrays among them), users,
// statuses and the window (Since: not final before it; Until: submitted
// before it); ListJobsOf reads the jobs of many runs, in order, across
// its chunks.
func TestListRunsFilters(t *testing.T) { forEachStore(t, testListRunsFilters) }

func testListRunsFilters(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	alice, _ := s.EnsureUser(ctx, "alice", false)
	bob, _ := s.EnsureUser(ctx, "bob", false)
	run := func(id int64, user int64, status string, sub, fin int) *Run {
		r := &Run{ID: id, ProjectID: pid, UserID: user, Name: "r", Status: status, Spec: []byte(`{}`), SubmittedAt: ts(sub), ArrayIndex: -1}
		if fin > 0 {
			r.FinishedAt = ts(fin)
		}
		return r
	}
	array := run(5, bob, "running", 10, 0)
	task := run(6, bob, "done", 10, 40)
	task.ArrayID, task.ArrayIndex = 5, 0
	b := &Batch{Runs: []*Run{
		run(1, alice, "done", 0, 10),   // ended before the window
		run(2, alice, "failed", 5, 20), // ended in it
		run(3, bob, "running", 15, 0),  // active
		run(4, alice, "submitted", 30, 0),
		array, task,
	}}
	n := jobsChunk + 5
	for i := 0; i < n; i++ {
		r := run(int64(100+i), alice, "done", 50, 60)
		b.Runs = append(b.Runs, r)
		b.Jobs = append(b.Jobs, &Job{ID: int64(1000 + 2*i), RunID: r.ID, Num: 1, Status: "done", SubmittedAt: ts(50)},
			&Job{ID: int64(1001 + 2*i), RunID: r.ID, Num: 0, Status: "done", SubmittedAt: ts(50)})
	}
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	ids := func(f RunFilter) []int64 {
		f.ProjectID, f.All = pid, true
		runs, err := s.ListRuns(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range runs {
			if r.ID < 100 {
				out = append(out, r.ID)
			}
		}
		return out
	}
	tests := map[string]struct {
		f    RunFilter
		want []int64
	}{
		"ids and an array's tasks": {RunFilter{IDs: []int64{2, 5, 77}}, []int64{6, 5, 2}},
		"no ids":                   {RunFilter{IDs: []int64{}}, nil},
		"users":                    {RunFilter{Users: []string{"bob"}}, []int64{6, 5, 3}},
		"statuses":                 {RunFilter{Statuses: []string{"running", "submitted"}}, []int64{5, 4, 3}},
		"since":                    {RunFilter{Since: ts(20)}, []int64{6, 5, 4, 3, 2}},
		"until":                    {RunFilter{Until: ts(15)}, []int64{6, 5, 2, 1}},
		"window":                   {RunFilter{Since: ts(11), Until: ts(30)}, []int64{6, 5, 3, 2}},
		"window and ids":           {RunFilter{Since: ts(11), Until: ts(30), IDs: []int64{1, 3}}, []int64{3}},
		"since and ids":            {RunFilter{Since: ts(20), IDs: []int64{1, 2, 4, 5}}, []int64{6, 5, 4, 2}},
		"since, ids and a page":    {RunFilter{Since: ts(20), IDs: []int64{1, 2, 4, 5}, BeforeID: 5, Limit: 1}, []int64{4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ids(tc.f)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	// A window read a page at a time, as the server streams it: the
	// pages, each from the previous one's last ID, make the whole window
	// in id order (waiting and finished runs interleave across pages).
	whole, err := s.ListRuns(ctx, RunFilter{ProjectID: pid, All: true, Since: ts(11)})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 2, 7} {
		var paged []int64
		f := RunFilter{ProjectID: pid, All: true, Since: ts(11), Limit: size}
		for {
			page, err := s.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > size {
				t.Fatalf("page of %d runs, limit %d", len(page), size)
			}
			for _, r := range page {
				paged = append(paged, r.ID)
			}
			if len(page) < size {
				break
			}
			f.BeforeID = page[len(page)-1].ID
		}
		var want []int64
		for _, r := range whole {
			want = append(want, r.ID)
		}
		if len(want) != n+5 {
			t.Fatalf("the window has %d runs, want %d", len(want), n+5)
		}
		if d := cmp.Diff(want, paged); d != "" {
			t.Errorf("pages of %d (-whole +paged):\n%s", size, d)
		}
	}

	var runIDs []int64
	for i := n - 1; i >= 0; i-- {
		runIDs = append(runIDs, int64(100+i), int64(100+i))
	}
	jobs, err := s.ListJobsOf(ctx, runIDs)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2*n {
		t.Fatalf("%d jobs of %d runs, want %d", len(jobs), n, 2*n)
	}
	for i, j := range jobs {
		if want := int64(100 + i/2); j.RunID != want || j.Num != i%2 {
			t.Fatalf("job %d: run %d num %d, want run %d num %d (by run, then number)", i, j.RunID, j.Num, want, i%2)
		}
	}
}

// A brief listing of an array's tasks reads what a restart needs (ID,
// status, start, array and index) and nothing else.
func TestListRunsBrief(t *testing.T) { forEachStore(t, testListRunsBrief) }

func testListRunsBrief(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	pid, _ := s.EnsureProject(ctx, "main")
	uid, _ := s.EnsureUser(ctx, "u", false)
	b := Batch{Runs: []*Run{
		{ID: 1, ProjectID: pid, UserID: uid, Name: "arr", Status: "running", Spec: []byte(`{"array":"0-1"}`), SubmittedAt: ts(1)},
		{ID: 2, ProjectID: pid, UserID: uid, Name: "arr_0", Status: "done", Reason: "done", ExitCode: intp(0), Spec: []byte(`{"x":1}`),
			SubmittedAt: ts(2), StartedAt: ts(3), FinishedAt: ts(4), ArrayID: 1, ArrayIndex: 0, Meta: []byte(`{}`)},
		{ID: 3, ProjectID: pid, UserID: uid, Name: "arr_1", Status: "submitted", Spec: []byte(`{"x":2}`), SubmittedAt: ts(2), ArrayID: 1, ArrayIndex: 1},
	}}
	if err := s.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListRuns(ctx, RunFilter{All: true, ArrayID: 1, Brief: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []*Run{
		{ID: 3, Status: "submitted", ArrayID: 1, ArrayIndex: 1},
		{ID: 2, Status: "done", StartedAt: ts(3), ArrayID: 1, ArrayIndex: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("brief listing (-want +got):\n%s", diff)
	}
}
