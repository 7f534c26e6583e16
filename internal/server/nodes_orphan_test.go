package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/store"
)

// A node its fleet drained to remove it (an SSH host taken out of the
// file, or its fleet deleted), whose removal was waiting when the server
// restarted, is removed by the sweep at start; an offline node drained by
// its fleet while still one of its hosts, and one an administrator
// drained, stay listed.
func TestFleetRemovedNodeGoesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	h := newHarnessAt(t, dir, "127.0.0.1:0")
	ctx := context.Background()
	// lab's record still lists lab-1 (being removed); lab-0 was removed.
	rec := fleetRecord{Hosts: []*fleetHost{{FleetHost: api.FleetHost{Host: "u@b:22", Node: "lab-1", State: api.HostRemoving}}}}
	hj, _ := json.Marshal(rec)
	sp, _ := json.Marshal(fleetSpec(t, "type: fleet\nname: lab\nssh_config:\n  user: u\n  identity_file: k\n  hosts: [b]\n"))
	main, err := h.st.ProjectByName(ctx, DefaultProject)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.st.PutFleet(ctx, &store.Fleet{Name: "lab", ProjectID: main.ID, Spec: string(sp), Status: api.FleetActive, Hosts: string(hj)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"lab-0", "lab-1", "kept"} {
		stop := startAgent(t, h, agentOpts{name: n, cpus: 1, fleet: "lab"})
		by, why := fleetDrainer, "fleet lab: host removed"
		if n == "kept" {
			by, why = "admin", "maintenance"
		}
		if _, err := h.srv.do(control.DrainInput{Node: n, Drain: &api.DrainRequest{Reason: why}, By: by}); err != nil {
			t.Fatal(err)
		}
		stop()
	}
	// The server restarts: its memory of what to remove is gone. (lab is
	// stored active, so that no job resumes lab-1's uninstall.)
	h.close()
	h = newHarnessAt(t, dir, "127.0.0.1:0")
	listed := func() map[string]bool {
		ns, err := h.c.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, n := range ns {
			out[n.Name] = true
		}
		return out
	}
	waitFor(t, "lab-0 to leave the node list", func() bool { return !listed()["lab-0"] })
	time.Sleep(200 * time.Millisecond)
	if got := listed(); !got["lab-1"] || !got["kept"] {
		t.Errorf("nodes after the sweep: %v, want lab-1 (still lab's host) and kept (an admin's drain)", got)
	}
}
