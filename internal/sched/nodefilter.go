package sched

import "slices"

// nodeAllowed is the eligibility of a node by name and features, Slurm's
// --nodelist, --exclude and --constraint: a node the request names (when
// it names any), that it does not exclude, with every feature it asks for.
// inFleet asks it, so that placement, reservations, preemption and the
// "never fits" check all see the same nodes.
func (r Request) nodeAllowed(n *Node) bool {
	if len(r.Nodes) > 0 && !slices.Contains(r.Nodes, n.Name) {
		return false
	}
	if slices.Contains(r.Exclude, n.Name) {
		return false
	}
	for _, f := range r.Features {
		if !slices.Contains(n.Features, f) {
			return false
		}
	}
	return true
}

// narrowsNodes reports whether the request names, excludes or asks
// features of nodes.
func narrowsNodes(r Request) bool {
	return len(r.Nodes) > 0 || len(r.Exclude) > 0 || len(r.Features) > 0
}

// sameNodeFilter reports whether two requests narrow the nodes alike, so
// that one may be judged by a miss of the other (dominates).
func sameNodeFilter(a, b Request) bool {
	return slices.Equal(a.Nodes, b.Nodes) && slices.Equal(a.Exclude, b.Exclude) && slices.Equal(a.Features, b.Features)
}
