//go:build linux

package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

const crashLines = 200

// countingTask prints "line 1".."line N" with small sleeps; with mixed, the
// even lines go to stderr.
func countingTask(name string, n int, mixed bool) string {
	echo := `echo "line $i"`
	if mixed {
		echo = `if [ $((i % 2)) -eq 0 ]; then echo "line $i" >&2; else echo "line $i"; fi`
	}
	return fmt.Sprintf("type: task\nname: %s\ncommands:\n  - |\n    for i in $(seq 1 %d); do %s; sleep 0.01; done\n", name, n, echo)
}

var submittedRE = regexp.MustCompile(`^Submitted run (\S+) \(ID (\d+)\)\n$`)

// crashSeed is BERTH_E2E_SEED when set (to replay a failure), else random.
func crashSeed(t *testing.T) uint64 {
	if v := os.Getenv("BERTH_E2E_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("BERTH_E2E_SEED: %v", err)
		}
		return s
	}
	return rand.Uint64()
}

// TestCrashSafety kills the server (and its in-process agent) with SIGKILL
// while runs write output, and once right after a submission was
// acknowledged; after the restarts every acknowledged run must exist, end
// done, and have exactly its output: nothing lost, nothing twice.
func TestCrashSafety(t *testing.T) {
	seed := crashSeed(t)
	t.Logf("seed %d (replay with BERTH_E2E_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pause := func() time.Duration { return time.Duration(100+rng.IntN(601)) * time.Millisecond }

	c := newCluster(t)
	srv := c.startServer("--agent-name", "crash-node", "--cpus", "16")
	c.waitNodes(30*time.Second, "crash-node")

	type sub struct {
		name string
		id   int64
	}
	var acked []sub
	mixed := map[string]bool{}
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("crash-%d", i)
		mixed[name] = i == 3
		file := c.writeConfig(name+".yml", countingTask(name, crashLines, mixed[name]))
		r := c.berth("", "apply", "-y", "--detach", "-f", file)
		m := submittedRE.FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil || m[1] != name {
			t.Fatalf("apply %s: %s", name, r)
		}
		id, _ := strconv.ParseInt(m[2], 10, 64)
		acked = append(acked, sub{name, id})
	}

	d := pause()
	time.Sleep(d)
	t.Logf("kill 1: %v after the last submission", d)
	srv.restart()

	// A submission acknowledged just before the crash must survive it.
	name := "crash-late"
	task, err := spec.Parse(name+".yml", []byte(countingTask(name, crashLines, false)))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(srv.url, srv.token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	run, err := cl.Submit(ctx, api.SubmitRequest{Spec: task, Source: name + ".yml"})
	cancel()
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	srv.kill9()
	t.Logf("kill 2: right after %s (ID %d) was acknowledged", run.Name, run.ID)
	acked = append(acked, sub{run.Name, run.ID})
	srv.start()

	for k := 3; k <= 4; k++ {
		d := pause()
		time.Sleep(d)
		t.Logf("kill %d: %v after the previous start", k, d)
		srv.restart()
	}

	// Every run ends done.
	deadline := time.Now().Add(60 * time.Second)
	var runs []api.Run
	for {
		runs, err = c.runs()
		if err == nil {
			finished := 0
			for _, r := range runs {
				if r.Status.Finished() {
					finished++
				}
			}
			if finished == len(runs) && len(runs) >= len(acked) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs not all finished after 60s: %v; last ps: %+v", err, summary(runs))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Every acknowledged submission exists, once, and nothing else does.
	if len(runs) != len(acked) {
		t.Errorf("%d runs stored, %d submissions acknowledged: %v", len(runs), len(acked), summary(runs))
	}
	byID := map[int64]api.Run{}
	for _, r := range runs {
		if _, dup := byID[r.ID]; dup {
			t.Errorf("run ID %d listed twice", r.ID)
		}
		byID[r.ID] = r
	}
	for _, s := range acked {
		r, ok := byID[s.id]
		if !ok {
			t.Errorf("acknowledged run %s (ID %d) is gone after the restarts", s.name, s.id)
			continue
		}
		if r.Name != s.name {
			t.Errorf("run ID %d is named %s, was acknowledged as %s", s.id, r.Name, s.name)
		}
		if r.Status != api.StatusDone || r.ExitCode == nil || *r.ExitCode != 0 || r.Reason != api.ReasonDone {
			t.Errorf("run %s: status %s, reason %q, exit code %s; want done, %s, 0", s.name, r.Status, r.Reason, codeText(r.ExitCode), api.ReasonDone)
		}
		if len(r.Jobs) != 1 {
			t.Errorf("run %s has %d jobs, want 1", s.name, len(r.Jobs))
		}
	}

	// Every run's log is exactly its output.
	cl = client.New(srv.url, srv.token)
	for _, s := range acked {
		if !mixed[s.name] {
			out, code := c.berthCombined("logs", s.name)
			if code != 0 {
				t.Errorf("berth logs %s: exit %d: %s", s.name, code, out)
			} else if diff := diffLines(out, crashLines); diff != "" {
				t.Errorf("berth logs %s: %s", s.name, diff)
			}
			continue
		}
		checkMixedLog(t, c, cl, s.name, crashLines)
	}

	// No supervisor outlives its job.
	if left := waitNone(c.shimsOf, 10*time.Second); len(left) > 0 {
		t.Errorf("shims still running after every run finished: %v", left)
	}
	if left := waitNone(c.jobProcs, 10*time.Second); len(left) > 0 {
		t.Errorf("job processes still running after every run finished: %v", left)
	}
}

func summary(runs []api.Run) []string {
	var s []string
	for _, r := range runs {
		x := fmt.Sprintf("%s(ID %d) %s", r.Name, r.ID, r.Status)
		if r.Reason != "" {
			x += " " + r.Reason
		}
		if r.ExitCode != nil {
			x += " exit " + strconv.Itoa(*r.ExitCode)
		}
		for _, j := range r.Jobs {
			x += fmt.Sprintf(" [job %d %s %s log %d]", j.ID, j.Status, j.Reason, j.LogSize)
		}
		s = append(s, x)
	}
	return s
}

// checkMixedLog checks the log of a run whose odd lines went to stdout and
// even lines to stderr, 10ms apart.
//
// When the shim keeps the streams apart, it reads the two pipes concurrently,
// so their interleaving is only as good as its goroutines' timing: then each
// stream must be exact and the two together must hold every line once. When
// the shim merges them into one pipe, everything is on stdout in order. In
// both cases the server must give the frames in the order of the job's log
// file (their offsets).
func checkMixedLog(t *testing.T, c *cluster, cl *client.Client, name string, n int) {
	t.Helper()
	r := c.berth("", "logs", name)
	if r.code != 0 {
		t.Errorf("berth logs %s: %s", name, r)
		return
	}
	if r.stderr == "" {
		t.Logf("berth logs %s: no stderr: the shim merges the streams", name)
		if diff := diffLines(r.stdout, n); diff != "" {
			t.Errorf("berth logs %s (streams merged): %s", name, diff)
		}
	} else {
		var odd, even strings.Builder
		for i := 1; i <= n; i++ {
			if i%2 == 0 {
				fmt.Fprintf(&even, "line %d\n", i)
			} else {
				fmt.Fprintf(&odd, "line %d\n", i)
			}
		}
		if r.stdout != odd.String() {
			t.Errorf("berth logs %s: stdout is not the odd lines in order:\n%s", name, r.stdout)
		}
		if r.stderr != even.String() {
			t.Errorf("berth logs %s: stderr is not the even lines in order:\n%s", name, r.stderr)
		}
	}
	out, code := c.berthCombined("logs", name)
	if code != 0 {
		t.Errorf("berth logs %s: exit %d: %s", name, code, out)
		return
	}
	lines := strings.SplitAfter(out, "\n")
	sort.Slice(lines, func(i, k int) bool { return lineNum(lines[i]) < lineNum(lines[k]) })
	if diff := diffLines(strings.Join(lines, ""), n); diff != "" {
		t.Errorf("berth logs %s, stdout and stderr together: %s", name, diff)
	} else if d := diffLines(out, n); d != "" {
		t.Logf("berth logs %s: the two streams interleave differently from how they were written (%s)", name, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var entries []api.LogEntry
	if _, err := cl.Logs(ctx, name, client.LogOptions{Job: -1}, func(e api.LogEntry) { entries = append(entries, e) }); err != nil {
		t.Errorf("logs of %s through the API: %v", name, err)
		return
	}
	for i := 1; i < len(entries); i++ {
		a, b := entries[i-1], entries[i]
		if b.Offset <= a.Offset {
			t.Errorf("logs of %s: entry at offset %d (%s %q, %s) comes after offset %d (%s %q, %s): not in log file order",
				name, b.Offset, b.Stream, b.Data, b.Time.Format(time.RFC3339Nano), a.Offset, a.Stream, a.Data, a.Time.Format(time.RFC3339Nano))
		}
	}
}

// lineNum is N of "line N\n"; 0 for anything else.
func lineNum(s string) int {
	var k int
	if _, err := fmt.Sscanf(s, "line %d", &k); err != nil {
		return 0
	}
	return k
}
