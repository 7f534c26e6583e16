package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/sched"
)

const good = `
default_qos: normal
qos:
  normal: {}
  high:
    priority: 100
    preempt: [low]
    preempt_mode: cancel
    user_limits: {jobs: 2, wall: 4h, submit: 10}
  low:
    limits: {cpu: 64, memory: 256GB, gpu_types: {A100: 4}}
projects:
  ml:
    shares: 3
    limits: {jobs: 20, gpu: 8}
    users:
      ann: {shares: 2}
  infra: {shares: 1}
users:
  eve:
    limits: {submit: 5, wall: 1d}
fleets:
  gpu: {partitions: [batch, a100], tier: 2, blocks: 4, max_wall: 2d}
  cpu: {partitions: [batch]}
topology:
  - {switch: s1, nodes: ["n[1-2]"]}
  - {switch: s2, nodes: [n3]}
  - {switch: top, switches: ["s[1-2]"]}
`

func TestParse(t *testing.T) {
	p, err := Parse("berth.yml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	wantQOS := map[string]sched.QOS{"normal": {}, "high": {Priority: 100, Preempt: []string{"low"}, Mode: sched.Cancel}, "low": {}}
	if diff := cmp.Diff(wantQOS, p.QOS); diff != "" {
		t.Errorf("QOS (-want +got):\n%s", diff)
	}
	wantLimits := map[sched.LimitKey]sched.Limits{
		{Scope: sched.ScopeQOSUser, Name: "high"}: {Jobs: 2, Wall: 4 * time.Hour},
		{Scope: sched.ScopeQOS, Name: "low"}:      {TRES: sched.TRES{CPUs: 64, Memory: 256 << 30, GPUTypes: map[string]int{"a100": 4}}},
		{Scope: sched.ScopeProject, Name: "ml"}:   {Jobs: 20, TRES: sched.TRES{GPUs: 8}},
		{Scope: sched.ScopeUser, Name: "eve"}:     {Wall: 24 * time.Hour},
	}
	if diff := cmp.Diff(wantLimits, p.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	wantSubmit := map[sched.LimitKey]int{{Scope: sched.ScopeQOSUser, Name: "high"}: 10, {Scope: sched.ScopeUser, Name: "eve"}: 5}
	if diff := cmp.Diff(wantSubmit, p.Submit); diff != "" {
		t.Errorf("submit (-want +got):\n%s", diff)
	}
	wantShares := &sched.Shares{Projects: map[string]int{"ml": 3, "infra": 1}, Users: map[string]map[string]int{"ml": {"ann": 2}}}
	if diff := cmp.Diff(wantShares, p.Shares); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
	if got := p.ResolveFleets([]string{"batch"}); !cmp.Equal(got, []string{"cpu", "gpu"}) {
		t.Errorf("batch resolves to %v", got)
	}
	if got := p.ResolveFleets([]string{"a100", "adhoc"}); !cmp.Equal(got, []string{"adhoc", "gpu"}) {
		t.Errorf("a100, adhoc resolve to %v", got)
	}
	if p.Tier([]string{"cpu", "gpu"}) != 2 || p.Fleets["gpu"].Blocks != 4 || p.Fleets["gpu"].MaxWall != 48*time.Hour {
		t.Errorf("fleets: %+v", p.Fleets)
	}
	if p.Topology.Leaf("n3") != "s2" || p.Topology.Leaf("n2") != "s1" {
		t.Errorf("n3 under %q", p.Topology.Leaf("n3"))
	}
	if q, err := p.QOSOf(""); q != "normal" || err != nil {
		t.Errorf("default QOS %q %v", q, err)
	}
	if _, err := p.QOSOf("gold"); err == nil || !strings.Contains(err.Error(), "high, low, normal") {
		t.Errorf("unknown QOS: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]struct{ text, want string }{
		"unknown field":   {"qos:\n  high:\n    priorty: 3\n", `p.yml:3:5`},
		"bad mode":        {"qos:\n  normal: {}\n  high:\n    preempt_mode: pause\n", `p.yml:4:19: qos.high.preempt_mode: want requeue or cancel, got "pause"`},
		"unknown preempt": {"qos:\n  normal:\n    preempt: [gold]\n", `p.yml:3:15: qos.normal.preempt[0]: unknown QOS "gold" (defined: normal)`},
		"no default":      {"qos:\n  a: {}\n  b: {}\n", `qos: several QOS and none is the default`},
		"bad memory":      {"projects:\n  ml:\n    limits: {memory: lots}\n", `p.yml:3:22: projects.ml.limits.memory:`},
		"bad wall":        {"users:\n  eve:\n    limits:\n      wall: soon\n", `p.yml:4:13: users.eve.limits.wall: want a duration such as 30m, 4h or 2d, got "soon"`},
		"negative":        {"users:\n  eve:\n    limits: {jobs: -1}\n", `users.eve.limits.jobs: must be 0 (no limit) or more, got -1`},
		"topology cycle":  {"topology:\n  - {switch: a, switches: [b]}\n  - {switch: b, switches: [a]}\n", `topology: switches form a cycle`},
		"duplicate key":   {"qos:\n  a: {}\n  a: {}\n", `p.yml:3:3`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("p.yml", []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if p, err := Parse("p.yml", nil); err != nil || len(p.QOS) != 0 {
		t.Errorf("empty file: %v %+v", err, p)
	}
}
