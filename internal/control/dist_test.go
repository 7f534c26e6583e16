package control

import (
	"testing"

	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/google/go-cmp/cmp"
)

func TestMasterPort(t *testing.T) {
	seen := map[int]bool{}
	for id := int64(1); id <= masterPortSpan; id++ {
		p := MasterPort(id)
		if p < masterPortBase || p >= masterPortBase+masterPortSpan || p >= 32768 {
			t.Fatalf("MasterPort(%d) = %d, outside [%d, %d)", id, p, masterPortBase, masterPortBase+masterPortSpan)
		}
		if seen[p] {
			t.Fatalf("MasterPort(%d) = %d, already given to an earlier run of the span", id, p)
		}
		seen[p] = true
	}
	if MasterPort(7) != MasterPort(7+masterPortSpan) {
		t.Errorf("masterPort is not a function of the ID modulo the span")
	}
}

// TestOrderPlacements: nodes in Slurm's hostlist order within each group;
// job IDs stay with their positions.
func TestOrderPlacements(t *testing.T) {
	pl := func(nodes ...string) []sched.Placement {
		var out []sched.Placement
		for i, n := range nodes {
			out = append(out, sched.Placement{JobID: int64(i + 1), Node: n, CPUs: len(n)})
		}
		return out
	}
	tests := map[string]struct {
		task *spec.Task
		in   []string
		want []string
	}{
		"numeric":       {task: &spec.Task{}, in: []string{"n10", "n2", "n1"}, want: []string{"n1", "n2", "n10"}},
		"prefixes":      {task: &spec.Task{}, in: []string{"gpu-b", "gpu-a", "cpu1"}, want: []string{"cpu1", "gpu-a", "gpu-b"}},
		"padded":        {task: &spec.Task{}, in: []string{"node010", "node009"}, want: []string{"node009", "node010"}},
		"within groups": {task: &spec.Task{Groups: []spec.Group{{Nodes: 2}, {Nodes: 3}}}, in: []string{"b2", "b1", "a9", "a3", "a10"}, want: []string{"b1", "b2", "a3", "a9", "a10"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ps := pl(tc.in...)
			orderPlacements(tc.task, ps)
			if diff := cmp.Diff(pl(tc.want...), ps); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
