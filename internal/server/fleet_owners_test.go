package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// A fleet a project applied serves that project's runs only (dstack's
// fleets, issue 17): another project's run never lands on its nodes, waits
// while they are all there is, and its plan says why; the owner's runs
// run there, named by `fleets:` or not. A node of no stored fleet serves
// everyone. After a restart the owners are known again.
func TestFleetServesItsProjectOnly(t *testing.T) {
	dir := t.TempDir()
	h := newHarnessAt(t, dir, "127.0.0.1:0")
	ctx := context.Background()
	for _, p := range []string{"ml", "web"} {
		if _, err := h.c.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ml, err := h.st.ProjectByName(ctx, "ml")
	if err != nil {
		t.Fatal(err)
	}
	// The fleets table's row is what `berth apply -f` of a fleet leaves.
	sp, _ := json.Marshal(fleetSpec(t, "type: fleet\nname: mlf\nproject: ml\nssh_config:\n  user: u\n  identity_file: k\n  hosts: [10.0.0.2]\n"))
	if err := h.st.PutFleet(ctx, &store.Fleet{Name: "mlf", ProjectID: ml.ID, Spec: string(sp), Status: api.FleetActive, Hosts: `{"hosts":[]}`}); err != nil {
		t.Fatal(err)
	}
	h.srv.syncFleetOwners(ctx)
	startAgent(t, h, agentOpts{name: "m1", cpus: 1, fleet: "mlf"})

	web := submit(t, h, "type: task\nproject: web\ncommands: [\"echo $BERTH_NODE_NAME\"]\n")
	waitFor(t, "the web run to wait for a node", func() bool {
		r, err := h.c.Run(ctx, fmt.Sprint(web.ID))
		return err == nil && r.Status == api.StatusSubmitted && r.Reason == api.ReasonNoNode
	})
	plan, err := h.c.Plan(ctx, api.SubmitRequest{Spec: task(t, "type: task\nproject: web\nfleets: [mlf]\ncommands: [\"true\"]\n")})
	if err != nil {
		t.Fatal(err)
	}
	if plan.FitsNow || len(plan.Rows) != 1 || plan.Rows[0].Fits != "never" || plan.Rows[0].Why != "serves project ml's runs only" {
		t.Errorf("web's plan on ml's fleet: %+v", plan)
	}
	for _, yaml := range []string{"type: task\nproject: ml\ncommands: [\"echo $BERTH_NODE_NAME\"]\n",
		"type: task\nproject: ml\nfleets: [mlf]\ncommands: [\"echo $BERTH_NODE_NAME\"]\n"} {
		r := submit(t, h, yaml)
		if out, end := follow(t, h, r.ID); out != "m1\n" || end.Status != api.StatusDone {
			t.Errorf("ml's run ran on %q (%s), want m1", out, end.Status)
		}
	}
	if r, err := h.c.Run(ctx, fmt.Sprint(web.ID)); err != nil || r.Status != api.StatusSubmitted {
		t.Fatalf("the web run left the queue while only ml's node was there: %+v, %v", r, err)
	}

	// A node of no stored fleet serves every project: the web run goes there.
	startAgent(t, h, agentOpts{name: "o1", cpus: 1})
	if out, end := follow(t, h, web.ID); out != "o1\n" || end.Status != api.StatusDone {
		t.Errorf("web's run ran on %q (%s), want o1", out, end.Status)
	}

	// A restarted server knows the owners again (Run tells the cluster
	// before its scheduler starts).
	h.close()
	h = newHarnessAt(t, dir, "127.0.0.1:0")
	owner := map[string]string{}
	waitFor(t, "the owners after a restart", func() bool {
		h.srv.mu.Lock()
		_, _, nodes, _ := h.srv.Cluster.Plan(task(t, "type: task\ncommands: [\"true\"]\n"), "web")
		h.srv.unlock()
		for _, n := range nodes {
			owner[n.Name] = n.Project
		}
		return owner["m1"] == "ml" && owner["o1"] == ""
	})
}

// The autoscaler grows a project's backend fleet for that project's runs
// only, and the policy file's for every project's; `fleets:` narrows both.
func TestBackendFleetGrowsForItsProject(t *testing.T) {
	owned := &policy.BackendFleet{Project: "ml", Max: 2}
	shared := &policy.BackendFleet{Max: 2}
	demand := func(project string, fleets ...string) control.Demand {
		return control.Demand{ID: 1, Nodes: 1, Req: sched.Request{CPUs: 1, Project: project, Fleets: fleets}}
	}
	tests := map[string]struct {
		name string
		bf   *policy.BackendFleet
		d    control.Demand
		want bool
	}{
		"owner's run":                 {"mlf", owned, demand("ml"), true},
		"owner's run naming it":       {"mlf", owned, demand("ml", "mlf"), true},
		"owner's run naming another":  {"mlf", owned, demand("ml", "gpu"), false},
		"another project's run":       {"mlf", owned, demand("web"), false},
		"another project naming it":   {"mlf", owned, demand("web", "mlf"), false},
		"policy fleet, any project":   {"cloud", shared, demand("web"), true},
		"policy fleet, named another": {"cloud", shared, demand("web", "mlf"), false},
		"heterogeneous run":           {"cloud", shared, control.Demand{ID: 2, Groups: []sched.Group{{Nodes: 1}}}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := growsFor(tc.name, tc.bf, tc.d); got != tc.want {
				t.Errorf("growsFor(%s, %+v) = %v, want %v", tc.name, tc.d.Req, got, tc.want)
			}
		})
	}
}
