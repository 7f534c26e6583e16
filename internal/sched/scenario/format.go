package scenario

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/sched"
)

// Format prints a plan of a scenario's snapshot, one line per decision:
// starts in the order the pass made them, then preemptions, then every
// waiting run in the scenario's order with its reason, estimated start and
// what it waits for.
func Format(s sched.Snapshot, plan sched.Plan, now time.Time) string {
	var b strings.Builder
	for _, st := range plan.Starts {
		fmt.Fprintf(&b, "start %d", st.RunID)
		for _, p := range st.Placements {
			fmt.Fprintf(&b, " %s(cpus=%d mem=%s", p.Node, p.CPUs, size(p.Memory))
			if len(p.GPUs) > 0 {
				fmt.Fprintf(&b, " gpus=%s", join(p.GPUs))
			}
			b.WriteString(")")
		}
		b.WriteString("\n")
	}
	for _, p := range plan.Preemptions {
		fmt.Fprintf(&b, "preempt %d for %d %s\n", p.Victim, p.By, p.Mode)
	}
	for _, p := range s.Pending {
		reason, ok := plan.Reasons[p.RunID]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "wait %d %s", p.RunID, reason)
		if at, ok := plan.Estimates[p.RunID]; ok {
			fmt.Fprintf(&b, " at=+%s", at.Sub(now))
		}
		if by := plan.BlockedBy[p.RunID]; len(by) > 0 {
			ids := make([]int, len(by))
			for i, id := range by {
				ids[i] = int(id)
			}
			fmt.Fprintf(&b, " behind=%s", join(ids))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func join(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, "+")
}

func size(m sched.Bytes) string {
	for _, u := range []struct {
		s string
		n sched.Bytes
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if m >= u.n && m%u.n == 0 {
			return strconv.FormatInt(int64(m/u.n), 10) + u.s
		}
	}
	return strconv.FormatInt(int64(m), 10)
}
