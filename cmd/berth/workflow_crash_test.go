//go:build linux

package main_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// TestArrayAndChainSurviveCrashes kills the server (and its in-process
// agent) with SIGKILL three times while an array of 30 tasks (throttled to
// 3) and a dependency chain run: after the restarts every task and every
// link must end done exactly once, each with exactly its one line of
// output, the chain in order, and the array's own run done.
func TestArrayAndChainSurviveCrashes(t *testing.T) {
	seed := crashSeed(t)
	t.Logf("seed %d (replay with BERTH_E2E_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	c := newCluster(t)
	srv := c.startServer("--agent-name", "wf-node", "--cpus", "8")
	c.waitNodes(30*time.Second, "wf-node")
	array := c.writeConfig("arr.yml", "type: task\nname: arr\narray: 1-30%3\ncommands:\n  - sleep 0.$((RANDOM % 3))\n  - echo task ${{ array.index }}\n")
	if r := c.berth("", "apply", "-y", "--detach", "-f", array); r.code != 0 {
		t.Fatalf("apply arr: %s", r)
	}
	for i := range 5 {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf("depends_on: [{afterok: link-%d}]\n", i-1)
		}
		f := c.writeConfig(fmt.Sprintf("link-%d.yml", i), fmt.Sprintf("type: task\nname: link-%d\n%scommands: [\"sleep 0.3; echo link %d\"]\n", i, dep, i))
		if r := c.berth("", "apply", "-y", "--detach", "-f", f); r.code != 0 {
			t.Fatalf("apply link-%d: %s", i, r)
		}
	}
	for range 3 {
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		srv.kill9()
		srv.start()
	}
	c.waitRun("arr", 90*time.Second, "done", func(r *api.Run) bool { return r.Status.Finished() })
	c.waitRun("link-4", 90*time.Second, "ended", func(r *api.Run) bool { return r.Status.Finished() })
	runs := c.mustRuns()
	seen := map[string]int{}
	for _, r := range runs {
		seen[r.Name]++
	}
	if r := findRun(runs, "arr"); r.Status != api.StatusDone {
		t.Errorf("the array ended %s (%s)", r.Status, r.Reason)
	}
	var prevEnd time.Time
	for i := range 5 {
		name := fmt.Sprintf("link-%d", i)
		r := findRun(runs, name)
		out, _ := c.berthCombined("logs", name)
		if r.Status != api.StatusDone || out != fmt.Sprintf("link %d\n", i) || seen[name] != 1 {
			t.Errorf("%s: %s (%s), %d runs, log %q", name, r.Status, r.Reason, seen[name], out)
		}
		if r.StartedAt != nil && r.StartedAt.Before(prevEnd) {
			t.Errorf("%s started %v before the link before it ended %v", name, r.StartedAt, prevEnd)
		}
		if r.FinishedAt != nil {
			prevEnd = *r.FinishedAt
		}
	}
	var bad []string
	for i := 1; i <= 30; i++ {
		name := fmt.Sprintf("arr_%d", i)
		r := findRun(runs, name)
		if r == nil {
			bad = append(bad, name+": missing")
			continue
		}
		out, _ := c.berthCombined("logs", name)
		if r.Status != api.StatusDone || out != fmt.Sprintf("task %d\n", i) || seen[name] != 1 {
			bad = append(bad, fmt.Sprintf("%s: %s (%s), %d runs, log %q", name, r.Status, r.Reason, seen[name], out))
		}
	}
	if len(bad) > 0 {
		t.Errorf("array tasks after three crashes:\n%s", strings.Join(bad, "\n"))
	}
}
