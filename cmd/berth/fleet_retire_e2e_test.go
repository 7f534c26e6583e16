//go:build linux

package main_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// A backend fleet removed from the policy file (issue 17): after the
// reload its node is drained, the job running there finishes (a policy
// file has no --force), then the instance is terminated, its record gone
// saying why, and the node leaves the node list, as `berth fleet delete`
// does.
func TestCloudFleetRemovedFromPolicy(t *testing.T) {
	c, s, p := cloudClusterWith(t, `fleets:
  old:
    backend: {backends: [docker], nodes: 1..2, idle_duration: 1h}
`)
	ctx := context.Background()
	nodeOf := func() (api.Node, bool) {
		var nodes []api.Node
		if err := getJSON(s, "/nodes", &nodes); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Fleet == "old" {
				return n, true
			}
		}
		return api.Node{}, false
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if n, ok := nodeOf(); ok && strings.HasPrefix(n.Status, "idle") {
			break
		}
		if time.Now().After(deadline) {
			c.dumpLogs()
			t.Fatal("the fleet's minimum node never came up")
		}
	}
	task := c.writeConfig("long.berth.yml", `type: task
name: long
fleets: [old]
shell: sh
commands:
  - sleep 4
  - echo finished
`)
	if r := c.berth("", "apply", "-y", "-d", "-f", task); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitRun("long", 2*time.Minute, "running", func(r *api.Run) bool { return r.Status == api.StatusRunning || r.Status.Finished() })

	// The policy file without the fleet, put in force.
	path := filepath.Join(c.home, "policy.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "fleets:")
	if i < 0 {
		t.Fatalf("no fleets in the policy file:\n%s", b)
	}
	if err := os.WriteFile(path, b[:i], 0o600); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/api/v1/policy/reload", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %v %v", resp, err)
	}
	resp.Body.Close()

	// Drained at once; the job goes on to its end.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if n, ok := nodeOf(); ok && n.Drain != nil && strings.Contains(n.Drain.Reason, "removed from the policy file") {
			break
		}
		if time.Now().After(deadline) {
			n, _ := nodeOf()
			c.dumpLogs()
			t.Fatalf("the removed fleet's node was not drained: %+v", n)
		}
	}
	if ins, err := p.List(ctx); err != nil || len(ins) != 1 {
		t.Fatalf("the instance went before its job ended: %+v, %v", ins, err)
	}
	if r := c.waitFinished("long", 2*time.Minute); r.Status != api.StatusDone {
		t.Fatalf("the job on the removed fleet's node: %s (%s), want done", r.Status, r.Reason)
	}
	c.waitLog("long", "finished", 30*time.Second)

	// Then the instance is terminated and the node forgotten.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		ins, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, listed := nodeOf()
		if len(ins) == 0 && !listed {
			break
		}
		if time.Now().After(deadline) {
			c.dumpLogs()
			t.Fatalf("after the job: instances %+v, node listed %v", ins, listed)
		}
	}
	_, recs, states := instancesAndRecords(t, ctx, p, s)
	if len(recs) != 1 || states["gone"] != 1 || !strings.Contains(recs[0].Detail, "removed from the policy file") {
		t.Fatalf("records: %+v, want one gone, removed from the policy file", recs)
	}
}
