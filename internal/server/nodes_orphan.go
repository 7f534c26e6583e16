package server

import (
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// A host removed from its SSH fleet (or whose fleet was deleted) is
// drained by the fleet, uninstalled, and its node removed; a node that
// still had jobs (--force) is removed when they end, by the sweep, from a
// list kept in memory (cloud.forget). A server restarted in between lost
// that list, and the node stayed listed offline for ever (issue 17). The
// drain is durable, though: the sweep (every 10 s and at start) also
// removes every offline node that the fleet drained (By fleetDrainer) and
// that is neither a host of a stored fleet that is not removed nor a live
// instance's node (a backend fleet's nodes being retired are the
// instances' business).

// orphanFleetNodes are the nodes to remove as said above, with why.
func orphanFleetNodes(nodes []api.Node, fleets []*store.Fleet, liveInstance map[string]bool) map[string]string {
	hosted := map[string]bool{}
	for _, f := range fleets {
		rec, _, err := readRecord(f)
		if err != nil {
			// Unreadable: keep every node that may be its own.
			return nil
		}
		for _, h := range rec.Hosts {
			if h.State != api.HostRemoved {
				hosted[h.Node] = true
			}
		}
	}
	out := map[string]string{}
	for _, n := range nodes {
		if n.Drain == nil || n.Drain.By != fleetDrainer || !strings.HasPrefix(n.Status, "offline") || hosted[n.Name] || liveInstance[n.Name] {
			continue
		}
		out[n.Name] = "its fleet removed it (" + n.Drain.Reason + ")"
	}
	return out
}
