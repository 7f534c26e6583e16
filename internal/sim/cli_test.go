package sim_test

// `berth sim` end to end through the command line (internal/cli), kept here
// with the package it drives.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-hq/berth/internal/cli"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/sim"
)

const trace = "testdata/KTH-SP2-first2000.swf.gz"

func berth(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = cli.Main(args, strings.NewReader(""), &out, &errw)
	return code, out.String(), errw.String()
}

func TestSimCommandJSON(t *testing.T) {
	code, out, errw := berth(t, "sim", "--trace", trace, "--policy", "conservative", "--max-jobs", "500", "--procs", "128", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw)
	}
	var objs []map[string]any
	if err := json.Unmarshal([]byte(out), &objs); err != nil {
		t.Fatalf("not a JSON array of objects: %v\n%s", err, out)
	}
	if len(objs) != 1 {
		t.Fatalf("%d objects, want 1 (one per policy)", len(objs))
	}
	var keys []string
	for k := range objs[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"avg_bounded_slowdown", "avg_wait", "dropped", "dropped_reasons", "jobs", "makespan", "max_wait", "p95_wait", "p99_wait", "policy", "utilization", "wall_seconds"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}

	// The same figures as the package's, on the same first 500 jobs.
	var got []sim.Report
	json.Unmarshal([]byte(out), &got)
	tr, err := sim.OpenSWF(trace)
	if err != nil {
		t.Fatal(err)
	}
	jobs, drops := sim.Keep(tr.Jobs, 128)
	res, err := sim.Run(jobs[:500], sim.Config{Procs: 128, Policy: mustPolicy(t, "conservative")})
	if err != nil {
		t.Fatal(err)
	}
	wantReport := sim.NewReport("conservative", res.Metrics(), drops, 0)
	if diff := cmp.Diff([]sim.Report{wantReport}, got, cmpopts.IgnoreFields(sim.Report{}, "WallSeconds")); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if got[0].WallSeconds <= 0 {
		t.Errorf("wall_seconds = %v, want the replay's real run time", got[0].WallSeconds)
	}
}

func TestSimCommandTable(t *testing.T) {
	code, out, errw := berth(t, "sim", "--trace", trace, "--max-jobs", "300")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 {
		t.Fatalf("want a summary, a header, 4 policies and a note; got:\n%s", out)
	}
	if !strings.HasPrefix(lines[0], "KTH-SP2-first2000.swf.gz: 300 jobs on 100 processors; none dropped") {
		t.Errorf("summary line %q", lines[0])
	}
	for i, p := range sim.Policies {
		if f := strings.Fields(lines[2+i]); len(f) == 0 || f[0] != p {
			t.Errorf("row %d = %q, want policy %s", i, lines[2+i], p)
		}
	}
	// berth orders by its multifactor priority and backfills shortest
	// first: the same jobs as easy, a lower average bounded slowdown.
	easy, berthRow := strings.Fields(lines[3]), strings.Fields(lines[5])
	if easy[1] != berthRow[1] {
		t.Errorf("berth and easy differ in jobs:\n%s\n%s", lines[3], lines[5])
	}
	// The column by its header, not its position: columns get added. The
	// header's cells are two spaces apart at least, and a row's hold none.
	col := slices.Index(regexp.MustCompile(` {2,}`).Split(strings.TrimSpace(lines[1]), -1), "avg bsld")
	if col < 0 {
		t.Fatalf("no avg bsld column in %q", lines[1])
	}
	eb, _ := strconv.ParseFloat(easy[col], 64)
	bb, _ := strconv.ParseFloat(berthRow[col], 64)
	if bb <= 0 || bb >= eb {
		t.Errorf("berth's bounded slowdown %v, easy's %v: want berth lower", bb, eb)
	}
}

func TestSimCommandErrors(t *testing.T) {
	dir := t.TempDir()
	headless := filepath.Join(dir, "headless.swf")
	os.WriteFile(headless, []byte("1 0 -1 10 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"), 0o644)
	bad := filepath.Join(dir, "bad.swf")
	os.WriteFile(bad, []byte("; MaxProcs: 4\n1 0 -1 10 1\n"), 0o644)
	tests := map[string]struct {
		args []string
		want string
	}{
		"no trace":        {[]string{"sim"}, "--trace FILE is required"},
		"unknown policy":  {[]string{"sim", "--trace", trace, "--policy", "sjf"}, `unknown policy "sjf"`},
		"no machine size": {[]string{"sim", "--trace", headless}, "no MaxProcs or MaxNodes header line: pass --procs N"},
		"malformed line":  {[]string{"sim", "--trace", bad}, bad + ":2: 5 fields, want 18"},
		"missing file":    {[]string{"sim", "--trace", filepath.Join(dir, "none.swf")}, "no such file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errw := berth(t, tc.args...)
			if code == 0 || !strings.Contains(errw, tc.want) {
				t.Errorf("exit %d, stderr %q; want an error saying %q", code, errw, tc.want)
			}
		})
	}
	t.Run("--procs makes a headless trace replayable", func(t *testing.T) {
		if code, out, errw := berth(t, "sim", "--trace", headless, "--procs", "2", "--policy", "fcfs"); code != 0 || !strings.Contains(out, "1 jobs on 2 processors") {
			t.Errorf("exit %d: %s%s", code, out, errw)
		}
	})
}

func mustPolicy(t *testing.T, name string) sched.Policy {
	t.Helper()
	pol, err := sim.PolicyByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// `berth sim --workload` prints, per policy, the package's report of the
// workload's replay.
func TestSimCommandWorkload(t *testing.T) {
	const path = "testdata/workload.json"
	code, out, errw := berth(t, "sim", "--workload", path, "--policy", "berth", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw)
	}
	var got []sim.WorkloadReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sim.ParseWorkload(data)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.ReplayWorkload(w, sched.Berth)
	if err != nil {
		t.Fatal(err)
	}
	want := []sim.WorkloadReport{res.Report("berth")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// The sample exercises what a trace cannot: a preemption, a failure
	// for good, a cancelled dependency, retries.
	if r := got[0]; r.Preempted == 0 || r.Failed == 0 || r.Cancelled == 0 || r.Attempts <= r.Runs {
		t.Errorf("the sample workload no longer exercises preemption, failures and retries: %+v", r)
	}
	code, out, _ = berth(t, "sim", "--workload", path)
	if code != 0 || !strings.Contains(out, "preempted") || strings.Count(out, "\n") != 6 {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}
