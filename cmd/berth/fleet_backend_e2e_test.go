//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/provider"
)

// A backend fleet from a `type: fleet` file (issue 17): apply shows the
// plan (offers, nodes created now), the server is killed (-9) between
// recording the fleet's first instances and creating them, and after the
// restart the fleet holds exactly its minimum, nothing leaked or doubled;
// a run goes to the fleet; `berth fleet delete` terminates the instances
// and removes their nodes from the node list, while the run keeps its
// node's name.
func TestBackendFleetFromFile(t *testing.T) {
	c, s, p := cloudClusterWith(t, "", "--cloud-pause-after-record", "1h")
	ctx := context.Background()
	fleet := c.writeConfig("fleet.berth.yml", `type: fleet
name: dyn
nodes: 2..3
placement: cluster
blocks: 2
resources:
  cpu: 2..
termination_idle_time: 1h
env:
  - FLEET_COLOUR=blue
`)
	plan := c.berth("", "apply", "--dry-run", "-f", fleet)
	all := plan.stdout + plan.stderr
	for _, want := range []string{"dyn (new, backend)", "min 2, target 2, max 3: holds 0, creates 2 now", "Idle duration  1h0m0s",
		"docker   local   medium", "2xCPU, 512MB", "termination_idle_time: read as idle_duration", "blocks: 2: each node is split"} {
		if plan.code != 0 || !strings.Contains(all, want) {
			t.Errorf("apply --dry-run lacks %q:\n%s", want, plan)
		}
	}
	if r := c.berth("", "apply", "-y", "-d", "-f", fleet); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	// Both instances are recorded; the server waits before creating them: kill it there.
	log := filepath.Join(c.home, "server-1.log")
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(log)
		if strings.Count(string(b), "cloud: pausing between record and create") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never recorded two instances:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.kill9()
	if ins, _ := p.List(ctx); len(ins) != 0 {
		t.Fatalf("instances exist before Create: %+v", ins)
	}
	var args []string
	for i := 0; i < len(s.args); i++ {
		if s.args[i] == "--cloud-pause-after-record" {
			i++
			continue
		}
		args = append(args, s.args[i])
	}
	s.args = args
	s.start()

	// The stored fleet converges: two nodes in service, one instance each.
	var nodes []api.Node
	deadline = time.Now().Add(3 * time.Minute)
	for {
		nodes = nil
		if err := getJSON(s, "/nodes", &nodes); err != nil {
			t.Fatal(err)
		}
		idle := 0
		for _, n := range nodes {
			if n.Fleet == "dyn" && strings.HasPrefix(n.Status, "idle") {
				idle++
			}
		}
		if idle == 2 {
			break
		}
		if time.Now().After(deadline) {
			c.dumpLogs()
			t.Fatalf("the fleet did not reach 2 idle nodes: %+v", nodes)
		}
		time.Sleep(300 * time.Millisecond)
	}
	ins, recs, states := instancesAndRecords(t, ctx, p, s)
	if len(ins) != 2 || states["active"] != 2 || states["gone"] != 2 || len(recs) != 4 {
		t.Fatalf("after the crash: instances %+v, records %+v; want two instances, two active records and the two crashed ones gone", ins, recs)
	}
	for _, n := range nodes {
		if n.Fleet == "dyn" && !slices.Contains(n.Features, "segment:fleet-dyn") {
			t.Errorf("node %s of a placement: cluster fleet lacks its segment: %v", n.Name, n.Features)
		}
		if n.Fleet == "dyn" && n.Blocks != 2 {
			t.Errorf("node %s of a fleet with blocks: 2 has %d blocks", n.Name, n.Blocks)
		}
	}
	out := c.mustBerth("fleet")
	if !strings.Contains(out, "BACKEND FLEET") || !strings.Contains(out, "docker/medium") || !strings.Contains(out, "2..3") || !strings.Contains(out, "0 (blocks 0/2 busy)") {
		t.Errorf("berth fleet does not show the backend fleet's instances:\n%s", out)
	}

	// A run on the fleet; its node's name outlives the node.
	task := c.writeConfig("on-dyn.berth.yml", `type: task
name: on-dyn
fleets: [dyn]
shell: sh
resources: {cpu: 1, memory: 128MB}
commands:
  - echo "colour $FLEET_COLOUR"
`)
	if r := c.berth("", "apply", "-y", "-d", "-f", task); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	run := c.waitFinished("on-dyn", 2*time.Minute)
	if run.Status != api.StatusDone || len(run.Jobs) == 0 || run.Jobs[0].Node == "" {
		t.Fatalf("run on-dyn: %s (%s) %+v", run.Status, run.Reason, run.Jobs)
	}
	ranOn := run.Jobs[0].Node

	// Delete: drained, terminated, the nodes gone from the list.
	if r := c.berth("", "fleet", "delete", "dyn"); r.code != 0 || !strings.Contains(r.stdout, "Fleet dyn deleted") {
		t.Fatalf("fleet delete: %s", r)
	}
	if ins, err := p.List(ctx); err != nil || len(ins) != 0 {
		t.Fatalf("instances after the delete: %+v (%v)", ins, err)
	}
	nodes = nil
	if err := getJSON(s, "/nodes", &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Fleet == "dyn" {
			t.Errorf("node %s of the deleted fleet is still listed (%s)", n.Name, n.Status)
		}
	}
	var fl api.Fleet
	if err := getJSON(s, "/fleets/dyn", &fl); err == nil {
		t.Errorf("fleet dyn still exists: %+v", fl)
	}
	var after api.Run
	if err := getJSON(s, "/runs/on-dyn", &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Jobs) == 0 || after.Jobs[0].Node != ranOn {
		t.Errorf("the run's job lost its node's name: %+v, want %s", after.Jobs, ranOn)
	}
	b, _ := json.Marshal(after.Jobs)
	t.Logf("on-dyn ran on %s: %s", ranOn, b)
	// Its instance records are all gone.
	recs = nil
	if err := getJSON(s, "/instances?all=1", &recs); err != nil {
		t.Fatal(err)
	}
	for _, x := range recs {
		if x.State != string(provider.RecordGone) {
			t.Errorf("instance %s: %s after the fleet's delete", x.Key, x.State)
		}
	}
}
