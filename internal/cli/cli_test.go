package cli

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sim"
	"github.com/berth-hq/berth/internal/store"
)

func TestPrefixer(t *testing.T) {
	var out, errw bytes.Buffer
	p := newPrefixer(&out, &errw, 2)
	p.write(api.LogEntry{JobNum: 0, Stream: "stdout", Data: []byte("a\nb")})
	p.write(api.LogEntry{JobNum: 1, Stream: "stdout", Data: []byte("x\n")})
	p.write(api.LogEntry{JobNum: 0, Stream: "stdout", Data: []byte("c\n")})
	p.write(api.LogEntry{JobNum: 1, Stream: "stderr", Data: []byte("oops")})
	p.flush()
	if want := "node-0 | a\nnode-1 | x\nnode-0 | bc\n"; out.String() != want {
		t.Errorf("stdout = %q, want %q", out.String(), want)
	}
	if want := "node-1 | oops\n"; errw.String() != want {
		t.Errorf("stderr = %q, want %q", errw.String(), want)
	}
	out.Reset()
	single := newPrefixer(&out, &errw, 1)
	single.write(api.LogEntry{Stream: "stdout", Data: []byte("raw, no newline")})
	single.flush()
	if out.String() != "raw, no newline" {
		t.Errorf("a single job's output must pass through untouched: %q", out.String())
	}
	// Twelve jobs: ranks padded to two digits; unfinished lines end in rank
	// order.
	out.Reset()
	twelve := newPrefixer(&out, &out, 12)
	twelve.write(api.LogEntry{JobNum: 11, Stream: "stdout", Data: []byte("eleven\nlast")})
	twelve.write(api.LogEntry{JobNum: 3, Stream: "stdout", Data: []byte("three\nmore")})
	twelve.write(api.LogEntry{JobNum: 3, Stream: "stderr", Data: []byte("err")})
	twelve.flush()
	if want := "node-11 | eleven\nnode-3  | three\nnode-3  | more\nnode-3  | err\nnode-11 | last\n"; out.String() != want {
		t.Errorf("twelve jobs:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestRunExit(t *testing.T) {
	code := func(v int) *int { return &v }
	tests := map[string]struct {
		run  api.Run
		want int
	}{
		"done":                 {api.Run{Status: api.StatusDone, ExitCode: code(0)}, 0},
		"failed with its code": {api.Run{Status: api.StatusFailed, ExitCode: code(3)}, 3},
		"terminated by signal": {api.Run{Status: api.StatusTerminated, ExitCode: code(143)}, 143},
		"lost, no code":        {api.Run{Status: api.StatusFailed, ExitCode: code(-1)}, 1},
		"stopped before start": {api.Run{Status: api.StatusTerminated}, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := runExit(&bytes.Buffer{}, &tc.run)
			got := 0
			var ee *ExitError
			if errors.As(err, &ee) {
				got = ee.Code
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if got != tc.want {
				t.Errorf("exit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAgo(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	tests := map[time.Duration]string{
		3 * time.Second:  "now",
		42 * time.Second: "42 secs ago",
		time.Minute:      "1 min ago",
		5 * time.Minute:  "5 mins ago",
		3 * time.Hour:    "3 hours ago",
	}
	for d, want := range tests {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestPrintPlan(t *testing.T) {
	var b bytes.Buffer
	printPlan(&b, "x.yml", &api.Plan{Name: "train", Resources: "2xCPU", Nodes: 1, Rows: []api.PlanRow{
		{Node: "n1", Resources: "0/2 CPU, 1GB/2GB", Fits: "later", Why: "not enough free CPUs"},
	}, Unsupported: []string{"volumes", "schedule"}})
	for _, want := range []string{" Run            train\n", "n1", "later (not enough free CPUs)", "No node can start it now",
		"Not supported yet (parsed and stored, no effect): volumes, schedule"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}

func TestConfirm(t *testing.T) {
	for in, want := range map[string]bool{"y\n": true, "yes\n": true, "n\n": false, "": false, "Y": true} {
		if got := confirm(strings.NewReader(in), &bytes.Buffer{}, "? "); got != want {
			t.Errorf("confirm(%q) = %v", in, got)
		}
	}
}

// --history reads finished runs as jobs: submit offsets from the first, run
// time, CPUs over the nodes of the last attempt, max_duration as estimate.
func TestHistoryJobs(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "berth.db")
	st, err := store.OpenSQLite(ctx, path, store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := st.EnsureProject(ctx, "main")
	uid, _ := st.EnsureUser(ctx, "alice", false)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	b := &store.Batch{
		Nodes: []*store.Node{{Name: "a", Info: []byte(`{"name":"a","cpus":8}`)}, {Name: "b", Info: []byte(`{"name":"b","cpus":4}`)}},
		Runs: []*store.Run{
			{ID: 1, ProjectID: pid, UserID: uid, Name: "x", Status: "done", Spec: []byte(`{"type":"task","max_duration":600}`),
				SubmittedAt: sec(10), StartedAt: sec(12), FinishedAt: sec(72)},
			{ID: 2, ProjectID: pid, UserID: uid, Name: "y", Status: "failed", Spec: []byte(`{"type":"task"}`),
				SubmittedAt: sec(30), StartedAt: sec(40), FinishedAt: sec(45)},
			{ID: 3, ProjectID: pid, UserID: uid, Name: "never", Status: "terminated", Spec: []byte(`{}`), SubmittedAt: sec(5), FinishedAt: sec(6)},
			{ID: 4, ProjectID: pid, UserID: uid, Name: "running", Status: "running", Spec: []byte(`{}`), SubmittedAt: sec(50), StartedAt: sec(51)},
		},
		Jobs: []*store.Job{
			{ID: 10, RunID: 1, Num: 0, Status: "done", Alloc: []byte(`{"cpus":2}`), SubmittedAt: sec(10)},
			{ID: 11, RunID: 1, Num: 1, Status: "done", Alloc: []byte(`{"cpus":2}`), SubmittedAt: sec(10)},
			{ID: 20, RunID: 2, Num: 0, Status: "failed", Alloc: []byte(`{"cpus":3}`), SubmittedAt: sec(30)},
		},
	}
	if err := st.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	st.Close()
	jobs, procs, err := historyJobs(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	want := []sim.Job{
		{ID: 2, User: "alice", Submit: 20 * time.Second, Run: 5 * time.Second, Procs: 3, Estimate: 5 * time.Second},
		{ID: 1, User: "alice", Submit: 0, Run: 60 * time.Second, Procs: 4, Estimate: 600 * time.Second},
	}
	if diff := cmp.Diff(want, jobs); diff != "" || procs != 12 {
		t.Errorf("jobs (-want +got):\n%s\nprocs %d, want 12", diff, procs)
	}
	if _, _, err := historyJobs(ctx, filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Error("a missing database was accepted")
	}
}

func TestExpandTaskRange(t *testing.T) {
	got, err := expandTaskRange("sweep_[3-5,9]")
	if err != nil || strings.Join(got, " ") != "sweep_3 sweep_4 sweep_5 sweep_9" {
		t.Errorf("got %v %v", got, err)
	}
	if got, _ := expandTaskRange("42_7"); len(got) != 1 || got[0] != "42_7" {
		t.Errorf("a single task: %v", got)
	}
	if _, err := expandTaskRange("x_[5-1]"); err == nil {
		t.Error("a backwards range was accepted")
	}
}
