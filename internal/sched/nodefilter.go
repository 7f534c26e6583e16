package sched

import (
	"slices"
	"strings"
)

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
	return r.missingFeature(n) == ""
}

// missingFeature is the first feature the request asks for that node n
// lacks ("" none). A feature written "a|b" (Slurm's OR) is met by either.
func (r Request) missingFeature(n *Node) string {
	for _, f := range r.Features {
		if !slices.ContainsFunc(strings.Split(f, "|"), func(alt string) bool { return slices.Contains(n.Features, alt) }) {
			return f
		}
	}
	return ""
}

// MountsFeature is what a node whose agent can give a job without a
// container a mount namespace of its own has (internal/agent/mountns.go),
// and what a run asks for when it needs one (instance volumes or
// resources.shm_size without an image).
const MountsFeature = "berth:mounts"

// VolumeFeature starts the feature of a node that has a network volume
// attached ("volume:PROJECT/NAME:PATH"); a run that mounts it asks for it
// (volumes.go in the server).
const VolumeFeature = "volume:"

// EngineFeature starts the feature of a node whose container engine has
// that ID ("engine:ID"); a container run that mounts a network volume of
// the Docker provider asks for the engine that holds the volume.
const EngineFeature = "engine:"

// featureWhy says why node n lacks feature f, for the plan.
func featureWhy(f string) string {
	switch {
	case f == MountsFeature:
		return "cannot mount volumes or /dev/shm for a run without an image (the agent is not root, or has no CAP_SYS_ADMIN)"
	case strings.HasPrefix(f, VolumeFeature):
		var names []string
		for _, alt := range strings.Split(f, "|") {
			v, _, _ := strings.Cut(strings.TrimPrefix(alt, VolumeFeature), ":")
			names = append(names, v)
		}
		return "volume " + strings.Join(names, " or ") + " is not attached to this node (a backend attaches a network volume to the nodes it creates for the run; other nodes get one only for a run with `image:`, on the Docker engine that holds it)"
	case strings.HasPrefix(f, EngineFeature):
		return "its container engine is not the one that holds the run's network volume (a Docker volume mounts only on its own engine)"
	}
	return "lacks feature " + f
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

// SegmentFeature starts the feature that puts a node in a network segment
// ("segment:10.0.0.0/24"): the nodes of an SSH fleet with `placement:
// cluster` carry it (the fleet's network, or its name), and an
// administrator may give it to any node (berth agent --features). A
// multi-node run's jobs go to nodes of one segment; a node without one is
// in the segment "" of all such nodes.
const SegmentFeature = "segment:"

// segment is the node's network segment ("" none).
func (n *Node) segment() string {
	for _, f := range n.Features {
		if s, ok := strings.CutPrefix(f, SegmentFeature); ok {
			return s
		}
	}
	return ""
}

// anySegment reports whether any node is in a network segment.
func anySegment(profiles []*profile) bool {
	for _, p := range profiles {
		if p.node.segment() != "" {
			return true
		}
	}
	return false
}

// oneSegment keeps, of the candidates (in placement order), those of the
// first segment with at least want of them; nil when no segment has enough.
func oneSegment(picks []pick, want int) []pick {
	count := map[string]int{}
	for _, c := range picks {
		count[c.p.node.segment()]++
	}
	for _, c := range picks {
		seg := c.p.node.segment()
		if count[seg] < want {
			continue
		}
		out := make([]pick, 0, count[seg])
		for _, d := range picks {
			if d.p.node.segment() == seg {
				out = append(out, d)
			}
		}
		return out
	}
	return nil
}
