package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/control/transcript"
	"github.com/berth-hq/berth/internal/lifecycle"
)

// Safety rules of the control plane over random lives, on the transcripts'
// in-process server (real SQLite, no HTTP, virtual clock): an acknowledged
// run is never dropped from the store; a final run never becomes active
// again; a run a user stopped never gets another attempt; a job never runs
// on two nodes at once, and no node gives out more CPUs than it has.
// internal/control's TestControlProperties checks the same rules (and
// incremental pass ≡ full pass) on the cluster alone, over many more
// lives; this walk is kept short: what it adds is the real committer and
// store.
func TestControlProperties(t *testing.T) {
	// A step is a real commit: 300 steps take about 1 s, 15 s under the
	// race detector, which walks 100. BERTH_PROPERTY_SEEDS runs more seeds.
	seeds, steps := uint64(2), 300
	if raceEnabled || testing.Short() {
		seeds, steps = 1, 100
	}
	if n, err := strconv.ParseUint(os.Getenv("BERTH_PROPERTY_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { controlWalk(t, seed, steps) })
	}
}

func controlWalk(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 11))
	e := newTranscriptEnv(t)
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		e.do(t, fmt.Sprintf("node %s cpus=%d", n, 2+rng.IntN(3)))
	}
	w := &transcript.Walk{Nodes: nodes}
	final := map[string]lifecycle.Status{}
	userStopped := map[string]int{} // run -> its attempt when a user stopped it
	for step := range steps {
		cmd := w.Next(rng, e.placedJobs, e.activeRuns, func(n string) bool { _, up := e.conns[n]; return up })
		if n, ok := strings.CutPrefix(cmd, "connect "); ok {
			e.reconnect(t, n)
			continue
		}
		if cmd == "" {
			continue
		}
		before := e.attempts()
		out := e.do(t, cmd)
		if name, ok := strings.CutPrefix(cmd, "stop "); ok {
			name = strings.TrimSuffix(name, " abort")
			if _, done := final[name]; !done {
				userStopped[name] = before[name]
			}
		}
		e.checkInvariants(t, fmt.Sprintf("seed %d step %d %q\n%s", seed, step, cmd, out), w.Acked, final, userStopped)
	}
}

// reconnect opens a node's stream again after "away".
func (e *transcriptEnv) reconnect(t *testing.T, name string) {
	conn, err := e.srv.connect(name)
	if err != nil {
		t.Fatal(err)
	}
	e.nodes[name], e.conns[name] = true, conn
	e.settle()
	e.sent()
}

// placedJobs are the placed jobs as "NODE RUN.NUM" (transcript.Walk).
func (e *transcriptEnv) placedJobs() []string {
	e.srv.mu.Lock()
	defer e.srv.unlock()
	var placed []string
	for _, id := range e.srv.RunIDs() {
		_, jobs, _ := e.srv.ActiveRun(id)
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
	e.srv.mu.Lock()
	defer e.srv.unlock()
	var out []string
	for _, id := range e.srv.RunIDs() {
		out = append(out, e.names[id])
	}
	slices.Sort(out)
	return out
}

// attempts is each active run's current attempt.
func (e *transcriptEnv) attempts() map[string]int {
	e.srv.mu.Lock()
	defer e.srv.unlock()
	out := map[string]int{}
	for _, id := range e.srv.RunIDs() {
		if _, jobs, _ := e.srv.ActiveRun(id); len(jobs) > 0 {
			out[e.names[id]] = jobs[0].Attempt
		}
	}
	return out
}

func (e *transcriptEnv) checkInvariants(t *testing.T, at string, acked []string, final map[string]lifecycle.Status, userStopped map[string]int) {
	t.Helper()
	ctx := context.Background()
	for _, name := range acked {
		id, ok := e.runs[name]
		if !ok {
			continue // refused at submission: not acknowledged
		}
		r, err := e.st.GetRun(ctx, id)
		if err != nil {
			t.Fatalf("%s: acknowledged run %s is gone from the store: %v", at, name, err)
		}
		st := lifecycle.Status(r.Status)
		if was, ended := final[name]; ended && !st.Finished() {
			t.Fatalf("%s: run %s was %s and is active again (%s)", at, name, was, st)
		}
		if st.Finished() {
			final[name] = st
		}
		if a, stopped := userStopped[name]; stopped {
			jobs, _ := e.st.ListJobs(ctx, id)
			for _, j := range jobs {
				if j.Attempt > a {
					t.Fatalf("%s: run %s got attempt %d after a user stopped attempt %d", at, name, j.Attempt, a)
				}
			}
		}
	}
	e.srv.mu.Lock()
	defer e.srv.unlock()
	if err := e.srv.Check(); err != nil {
		t.Fatalf("%s: %v", at, err)
	}
}
