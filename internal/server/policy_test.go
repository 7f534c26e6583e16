package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/store"
)

func rules(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("policy.yml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runReason waits until the run waits with the given reason.
func waitReason(t *testing.T, h *harness, id int64, reason string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("run %d to wait with %s", id, reason), func() bool {
		r, err := h.c.Run(context.Background(), fmt.Sprint(id))
		return err == nil && r.Status == api.StatusSubmitted && r.Reason == reason
	})
}

func TestQOSAndSubmitLimits(t *testing.T) {
	h := newHarnessWith(t, t.TempDir(), "127.0.0.1:0", rules(t, `
qos:
  normal:
    user_limits: {submit: 2}
  high: {priority: 100}
`))
	var apiErr *client.APIError
	_, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nqos: gold\n")})
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(err.Error(), `unknown QOS "gold" (defined: high, normal`) {
		t.Fatalf("unknown QOS: %v", err)
	}
	// No agent: runs stay pending, and count as submitted.
	a := submit(t, h, "type: task\ncommands: [\"true\"]\n")
	submit(t, h, "type: task\ncommands: [\"true\"]\nqos: normal\n")
	submit(t, h, "type: task\ncommands: [\"true\"]\nqos: high\n") // another QOS: fine
	_, err = h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n")})
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(err.Error(), "QOSMaxSubmitJobPerUserLimit") {
		t.Fatalf("third normal run: %v, want a 400 naming QOSMaxSubmitJobPerUserLimit", err)
	}
	runs, _ := h.st.ListRuns(context.Background(), store.RunFilter{All: true})
	if len(runs) != 3 {
		t.Fatalf("%d runs stored, want 3", len(runs))
	}
	r, _ := h.c.Run(context.Background(), fmt.Sprint(a.ID))
	if r.Spec.QOS != "normal" {
		t.Errorf("run without qos got %q, want the default normal", r.Spec.QOS)
	}
	// Once one ends, another may be submitted.
	if _, err := h.c.Stop(context.Background(), fmt.Sprint(a.ID), false); err != nil {
		t.Fatal(err)
	}
	submit(t, h, "type: task\ncommands: [\"true\"]\n")
}

func TestFleetPolicy(t *testing.T) {
	h := newHarnessWith(t, t.TempDir(), "127.0.0.1:0", rules(t, `
fleets:
  gpu: {partitions: [batch], blocks: 2, max_wall: 1h, tier: 1}
`))
	startAgent(t, h, agentOpts{name: "b1", cpus: 4, fleet: "gpu"})
	// A partition name reaches the fleet; blocks round 1 CPU up to 2.
	r := submit(t, h, "type: task\ncommands: [\"echo $SLURM_CPUS_ON_NODE\"]\nfleets: [batch]\nmax_duration: 10m\n")
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusDone || end.Jobs[0].Alloc.CPUs != 2 {
		t.Errorf("run %s with %d CPUs (output %q), want done with one block of 2", end.Status, end.Jobs[0].Alloc.CPUs, out)
	}
	long := submit(t, h, "type: task\ncommands: [\"true\"]\nfleets: [batch]\nmax_duration: 2h\n")
	waitReason(t, h, long.ID, api.ReasonPartitionTimeLimit)
}

func TestPolicyEndpoint(t *testing.T) {
	h := newHarnessWith(t, t.TempDir(), "127.0.0.1:0", rules(t, `
qos:
  normal: {}
  high: {priority: 100, preempt: [normal], user_limits: {jobs: 2, submit: 5}}
projects:
  ml: {shares: 3, limits: {cpu: 64}}
users:
  eve: {limits: {wall: 2h}}
fleets:
  gpu: {partitions: [batch], tier: 2}
`))
	p, err := h.c.Policy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultQOS != "normal" || len(p.QOS) != 2 || p.QOS[0].Name != "high" || p.QOS[0].UserLimits == nil || p.QOS[0].UserLimits.Jobs != 2 || p.QOS[0].UserLimits.Submit != 5 {
		t.Errorf("qos %+v", p.QOS)
	}
	var ml, eve bool
	for _, a := range p.Associations {
		ml = ml || a.Project == "ml" && a.Shares == 3 && a.Limits != nil && a.Limits.CPUs == 64
		eve = eve || a.User == "eve" && a.Limits != nil && a.Limits.WallSeconds == 7200
	}
	if !ml || !eve || len(p.Fleets) != 1 || p.Fleets[0].Tier != 2 {
		t.Errorf("associations %+v fleets %+v", p.Associations, p.Fleets)
	}
}

func TestPlanShowsAllocation(t *testing.T) {
	h := newHarness(t, t.TempDir())
	p, err := h.c.Plan(context.Background(), api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nresources: {cpu: 2.., memory: 64MB..1GB}\n")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Allocated != "2 CPU, 64MB memory per job" {
		t.Errorf("allocated %q: want the lower bounds, the job's limits", p.Allocated)
	}
}
