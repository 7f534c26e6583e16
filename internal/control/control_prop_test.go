package control

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/control/transcript"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/sched"
)

// Safety rules of the control plane over random lives, fed to the cluster
// by Step alone (the transcripts' driver, virtual clock): an acknowledged
// run is in a batch before its submission is answered, and never leaves
// the durable records; a final run never becomes active again (a requeue
// takes a run that has not ended); a run a user stopped never gets another
// attempt; a job never runs on two nodes at once, and no node gives out
// more CPUs than it has (Check, after every input); and every incremental
// pass starts, preempts and reserves what a full pass over the same state
// does. 40 seeds of 300 steps (2 under the race detector: the cluster is
// single-threaded, and the race detector only slows it tenfold);
// BERTH_PROPERTY_SEEDS runs more. internal/server's TestControlProperties
// walks the same way on a real server over SQLite, fewer steps, to check
// what reaches the store.
func TestControlProperties(t *testing.T) {
	seeds := uint64(40)
	if raceEnabled || testing.Short() {
		seeds = 2
	}
	if n, err := strconv.ParseUint(os.Getenv("BERTH_PROPERTY_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	incremental, passes := 0, 0
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			i, p := controlWalk(t, seed, 300)
			incremental += i
			passes += p
		})
	}
	t.Logf("%d passes, %d incremental", passes, incremental)
	if incremental == 0 {
		t.Error("no pass was incremental: incremental ≡ full was not checked")
	}
}

// controlWalk takes steps random commands from a fresh cluster and checks
// the rules after each; it returns how many passes were incremental, of
// how many.
func controlWalk(t *testing.T, seed uint64, steps int) (incremental, passes int) {
	rng := rand.New(rand.NewPCG(seed, 11))
	e := newTranscriptEnv("testdata")
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		e.do(t, fmt.Sprintf("node %s cpus=%d", n, 2+rng.IntN(3)))
	}
	w := &transcript.Walk{Nodes: nodes}
	final := map[string]lifecycle.Status{}
	userStopped := map[string]int{} // run -> its attempt when a user stopped it
	for step := range steps {
		cmd := w.Next(rng, e.placedJobs, e.activeRuns, func(n string) bool { _, up := e.epochs[n]; return up })
		if cmd == "" {
			continue
		}
		at := fmt.Sprintf("seed %d step %d %q", seed, step, cmd)
		before := e.attempts()
		var out string
		if cmd == "schedule" {
			e.commits = nil
			e.step(TickInput{})
			inc := e.checkedPass(t, at)
			passes++
			if inc {
				incremental++
			}
			out = e.describe() + e.sent()
		} else {
			out = e.do(t, cmd)
		}
		if name, ok := strings.CutPrefix(cmd, "stop "); ok {
			name = strings.TrimSuffix(name, " abort")
			if _, done := final[name]; !done {
				userStopped[name] = before[name]
			}
		}
		e.checkInvariants(t, at+"\n"+out, w.Acked, final, userStopped)
	}
	return incremental, passes
}

// checkedPass is a scheduling pass (pass) that, when the Cycle prepared an
// incremental one, checks its plan against a full pass (sched.Schedule)
// over the Cycle's whole state: the same starts, preemptions and
// reservations. It reports whether the pass was incremental.
func (e *transcriptEnv) checkedPass(t *testing.T, at string) bool {
	r, _ := e.step(PassInput{})
	p, _ := r.(*Pass)
	if p == nil {
		return false
	}
	full, _ := p.round.Full()
	var want sched.Plan
	if !full {
		want = sched.Schedule(e.c.cycle.Snapshot(e.now), e.now)
	}
	plan := p.Schedule()
	if !full {
		if d := cmp.Diff(want.Starts, plan.Starts); d != "" {
			t.Fatalf("%s: an incremental pass's starts differ from a full pass's (-full +incremental):\n%s", at, d)
		}
		if d := cmp.Diff(want.Preemptions, plan.Preemptions); d != "" {
			t.Fatalf("%s: an incremental pass's preemptions differ from a full pass's (-full +incremental):\n%s", at, d)
		}
		if d := cmp.Diff(want.Reserved, plan.Reserved); d != "" {
			t.Fatalf("%s: an incremental pass's reservations differ from a full pass's (-full +incremental):\n%s", at, d)
		}
	}
	e.step(PlanInput{Pass: p, Plan: plan, Reasons: e.c.NewReasons(plan)})
	e.c.ForgetReasons(p, plan)
	return !full
}

// placedJobs are the placed jobs as "NODE RUN.NUM" (transcript.Walk).
func (e *transcriptEnv) placedJobs() []string {
	var placed []string
	for _, id := range e.c.RunIDs() {
		_, jobs, _ := e.c.ActiveRun(id)
		for _, j := range jobs {
			if st := lifecycle.Status(j.Status); st.Placed() {
				placed = append(placed, fmt.Sprintf("%s %s.%d", j.Node, e.names[id], j.Num))
			}
		}
	}
	return placed
}

// activeRuns are the runs in memory, by name, sorted.
func (e *transcriptEnv) activeRuns() []string {
	var out []string
	for _, id := range e.c.RunIDs() {
		out = append(out, e.names[id])
	}
	slices.Sort(out)
	return out
}

// attempts is each active run's current attempt.
func (e *transcriptEnv) attempts() map[string]int {
	out := map[string]int{}
	for _, id := range e.c.RunIDs() {
		if _, jobs, _ := e.c.ActiveRun(id); len(jobs) > 0 {
			out[e.names[id]] = jobs[0].Attempt
		}
	}
	return out
}

func (e *transcriptEnv) checkInvariants(t *testing.T, at string, acked []string, final map[string]lifecycle.Status, userStopped map[string]int) {
	t.Helper()
	for _, name := range acked {
		id, ok := e.runs[name]
		if !ok {
			continue // refused at submission: not acknowledged
		}
		r, ok := e.durable.runs[id]
		if !ok {
			t.Fatalf("%s: acknowledged run %s is in no batch", at, name)
		}
		st := lifecycle.Status(r.Status)
		if was, ended := final[name]; ended && !st.Finished() {
			t.Fatalf("%s: run %s was %s and is active again (%s)", at, name, was, st)
		}
		if _, inMemory := e.c.ActiveRunRecord(id); st.Finished() == inMemory {
			t.Fatalf("%s: run %s is %s in its records, and in memory: %v", at, name, st, inMemory)
		}
		if st.Finished() {
			final[name] = st
		}
		if a, stopped := userStopped[name]; stopped {
			for _, j := range e.durable.jobs {
				if j.RunID == id && j.Attempt > a {
					t.Fatalf("%s: run %s got attempt %d after a user stopped attempt %d", at, name, j.Attempt, a)
				}
			}
		}
	}
	if err := e.c.Check(); err != nil {
		t.Fatalf("%s: %v", at, err)
	}
}
