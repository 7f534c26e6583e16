package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// A node split in blocks (berth agent --blocks 2) runs two one-CPU runs
// side by side, a block each, and shows 2/2 blocks busy; a third waits.
// Then `berth node delete`: refused while jobs run there and while its
// agent is connected, done once it is away; the runs keep its name.
func TestNodeBlocksAndDelete(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	stop := startAgent(t, h, agentOpts{name: "b1", cpus: 4, blocks: 2})
	sleep := "type: task\nresources: {cpu: 1, memory: 64MB}\ncommands: [\"sleep 60\"]\n"
	a, b, c := submit(t, h, sleep), submit(t, h, sleep), submit(t, h, sleep)
	waitFor(t, "two runs running on b1's blocks", func() bool {
		n := 0
		for _, id := range []int64{a.ID, b.ID} {
			r, err := h.c.Run(ctx, itoa(id))
			if err == nil && r.Status == api.StatusRunning {
				n++
			}
		}
		return n == 2
	})
	nodes, err := h.c.Nodes(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %+v, %v", nodes, err)
	}
	if n := nodes[0]; n.Blocks != 2 || n.BusyBlocks != 2 || n.AllocCPUs != 4 {
		t.Errorf("node b1: blocks %d, busy %d, alloc CPUs %d; want 2 blocks, both busy, each holding 2 CPUs", n.Blocks, n.BusyBlocks, n.AllocCPUs)
	}
	if r, _ := h.c.Run(ctx, itoa(c.ID)); r == nil || r.Status.Finished() || r.Status == api.StatusRunning {
		t.Errorf("the third run: %+v, want it waiting (no block free)", r)
	}

	conflict := func(what string) {
		t.Helper()
		var apiErr *client.APIError
		err := h.c.DeleteNode(ctx, "b1")
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
			t.Errorf("delete %s: %v, want 409", what, err)
		}
	}
	conflict("while jobs run there")
	for _, r := range []*api.Run{a, b, c} {
		if _, err := h.c.Stop(ctx, itoa(r.ID), true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "b1 idle", func() bool {
		ns, _ := h.c.Nodes(ctx)
		return len(ns) == 1 && ns[0].Jobs == 0
	})
	conflict("while its agent is connected")
	stop()
	waitFor(t, "b1 offline", func() bool {
		ns, _ := h.c.Nodes(ctx)
		return len(ns) == 1 && strings.HasPrefix(ns[0].Status, "offline")
	})
	if err := h.c.DeleteNode(ctx, "b1"); err != nil {
		t.Fatalf("delete b1 once away: %v", err)
	}
	if ns, _ := h.c.Nodes(ctx); len(ns) != 0 {
		t.Errorf("nodes after the delete: %+v", ns)
	}
	var apiErr *client.APIError
	if err := h.c.DeleteNode(ctx, "b1"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("deleting it again: %v, want 404", err)
	}
	r, err := h.c.Run(ctx, itoa(a.ID))
	if err != nil || len(r.Jobs) == 0 || r.Jobs[0].Node != "b1" {
		t.Errorf("run a after its node's removal: %+v, %v; want its job on b1 still", r, err)
	}
}
