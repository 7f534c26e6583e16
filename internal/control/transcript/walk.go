package transcript

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Walk chooses the commands of a property test's random walk (both
// drivers' TestControlProperties): submissions named r1, r2… (Acked, in
// order), scheduling passes, agent reports on placed jobs, user stops,
// aborts and requeues, a node going away and connecting again, time
// passing, node checks.
type Walk struct {
	Nodes []string
	Acked []string
}

// Next is the walk's next command, "" for none this step. placed lists
// the placed jobs as "NODE RUN.NUM", active the active runs by name, and
// up tells whether a node's stream is open; "connect N" opens it again.
func (w *Walk) Next(rng *rand.Rand, placed func() []string, active func() []string, up func(node string) bool) string {
	switch k := rng.IntN(20); {
	case k < 4:
		name := fmt.Sprintf("r%d", len(w.Acked)+1)
		cmd := fmt.Sprintf("submit %s cpus=%d nodes=%d", name, 1+rng.IntN(3), 1+rng.IntN(2))
		if rng.IntN(3) == 0 {
			cmd += " retry=error,interruption"
		}
		if rng.IntN(4) == 0 {
			cmd += " limit=5m"
		}
		if rng.IntN(5) == 0 {
			cmd += fmt.Sprintf(" priority=%d", rng.IntN(100))
		}
		w.Acked = append(w.Acked, name)
		return cmd
	case k < 7:
		return "schedule"
	case k < 13:
		return AgentReport(rng, placed())
	case k < 15:
		runs := active()
		if len(runs) == 0 {
			return ""
		}
		r := runs[rng.IntN(len(runs))]
		return []string{"stop " + r, "stop " + r + " abort", "requeue " + r}[rng.IntN(3)]
	case k < 16:
		n := w.Nodes[rng.IntN(len(w.Nodes))]
		if up(n) {
			return "away " + n
		}
		return "connect " + n
	case k < 18:
		return fmt.Sprintf("tick %ds", 1+rng.IntN(40))
	}
	return "check-nodes"
}

// AgentReport is an agent's report on a random one of the placed jobs
// ("NODE RUN.NUM"): started, or exited in one of the ways a shim ends a
// job; "" when none is placed.
func AgentReport(rng *rand.Rand, placed []string) string {
	if len(placed) == 0 {
		return ""
	}
	slices.Sort(placed)
	node, job, _ := strings.Cut(placed[rng.IntN(len(placed))], " ")
	switch rng.IntN(6) {
	case 0, 1:
		return "agent " + node + " started " + job
	case 2:
		return "agent " + node + " exited " + job + " code=0"
	case 3:
		return "agent " + node + " exited " + job + " code=1"
	case 4:
		return "agent " + node + " exited " + job + " code=143 reason=stopped"
	}
	return "agent " + node + " exited " + job + " code=137 reason=" + []string{"aborted", "max_duration", "lost_by_agent", "start_failed"}[rng.IntN(4)]
}
