package cli

import (
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
	"github.com/google/go-cmp/cmp"
)

// Drained, draining, down and unhealthy nodes as sinfo shows them (they
// showed idle), sorted as sinfo sorts (by state, highest first), and
// sinfo -R's rows: the nodes down, drained or failing,
// each once whatever its partitions, with the reason, who gave it and
// when.
func TestSinfoNodeStates(t *testing.T) {
	since := convtest.At("01:00:00")
	nodes := []api.Node{
		{NodeInfo: api.NodeInfo{Name: "n1", CPUs: 2, Memory: 20000 << 20}, Status: "drained (bad DIMM)",
			Drain: &api.NodeDrain{Reason: "bad DIMM", By: "alice", Since: since}},
		{NodeInfo: api.NodeInfo{Name: "n2", Fleet: "gpu", CPUs: 2, Memory: 20000 << 20}, Status: "draining (reboot)", Jobs: 1, AllocCPUs: 1,
			Drain: &api.NodeDrain{Reason: "reboot", By: "root", Since: since}},
		{NodeInfo: api.NodeInfo{Name: "n3", CPUs: 2, Memory: 20000 << 20}, Status: "down (psu)",
			Drain: &api.NodeDrain{Reason: "psu", By: "root", Since: since, Down: true}},
		{NodeInfo: api.NodeInfo{Name: "n4", CPUs: 2, Memory: 20000 << 20}, Status: "idle (failure)",
			Health: &api.NodeHealth{Status: api.HealthFailure, Reason: "ECC errors", CheckedAt: since}},
		{NodeInfo: api.NodeInfo{Name: "n5", CPUs: 2, Memory: 20000 << 20}, Status: "offline", LastSeen: since},
		{NodeInfo: api.NodeInfo{Name: "n6", Fleet: "gpu", CPUs: 2, Memory: 20000 << 20}, Status: "busy", Jobs: 1, AllocCPUs: 1},
		{NodeInfo: api.NodeInfo{Name: "n7", CPUs: 2, Memory: 20000 << 20}, Status: "busy", Jobs: 1, AllocCPUs: 2},
		{NodeInfo: api.NodeInfo{Name: "n8", CPUs: 2, Memory: 20000 << 20}, Status: "idle (warning)",
			Health: &api.NodeHealth{Status: api.HealthWarning, Reason: "hot", CheckedAt: since}},
	}
	pol := &api.PolicyInfo{DownPartitions: []string{"gpu"}}
	parts, sn := slurmconv.Nodes(nodes, convtest.At("01:00:00"), pol)
	got, _ := slurm.FormatSinfo(parts, sn, slurm.SinfoOptions{})
	want := `PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
berth*       up   infinite      1  down* n5
berth*       up   infinite      1   drng n2
berth*       up   infinite      2  drain n[1,4]
berth*       up   infinite      1    mix n6
berth*       up   infinite      1  alloc n7
berth*       up   infinite      1   idle n8
berth*       up   infinite      1   down n3
gpu        down   infinite      1   drng n2
gpu        down   infinite      1    mix n6
`
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("sinfo (-want +got):\n%s", d)
	}
	reasons := filterNodes(sn, nil, []string{"down", "fail", "drain"}, false, false)
	got, _ = slurm.FormatSinfo(reasonPartition(parts, reasons), reasons,
		slurm.SinfoOptions{LongFormat: "reason:20 ,user:9 ,timestamp:19 ,nodelist:0"})
	want = `REASON               USER      TIMESTAMP           NODELIST
Not responding       berth     2026-11-22T01:00:00 n5
reboot               root      2026-11-22T01:00:00 n2
bad DIMM             alice     2026-11-22T01:00:00 n1
ECC errors           berth     2026-11-22T01:00:00 n4
psu                  root      2026-11-22T01:00:00 n3
`
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("sinfo -R (-want +got):\n%s", d)
	}
	show := slurm.ShowNodes(sn[:1], true)
	for _, w := range []string{" State=IDLE+DRAIN ", " Reason=bad DIMM [alice@2026-11-22T01:00:00]"} {
		if !strings.Contains(show, w) {
			t.Errorf("scontrol -o show node n1 lacks %q:\n%s", w, show)
		}
	}
}
