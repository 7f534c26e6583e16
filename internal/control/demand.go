package control

import (
	"cmp"
	"slices"

	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/sched"
)

// Demand is a waiting run that the last pass could not place for want of
// nodes (reason Resources, ReqNodeNotAvail or ProvisioningNodes): what an
// autoscaler may create nodes for (issue 17).
type Demand struct {
	ID     int64
	Reason string
	Nodes  int           // jobs (nodes) of one request; 0 with Groups
	Req    sched.Request // its request, fleets resolved
	Groups []sched.Group // a heterogeneous run's components
}

// Demands are the waiting runs held back by resources only, by ID. A run
// held for another cause (a dependency, a begin time, a user hold, a
// partition) is not demand.
func (s *Cluster) Demands() []Demand {
	var out []Demand
	for id, rs := range s.pending {
		switch rs.rec.Reason {
		case sched.ReasonResources, sched.ReasonNoNode, ReasonProvisioning:
		default:
			continue
		}
		if rs.hold != "" || rs.req == nil {
			continue
		}
		out = append(out, Demand{ID: id, Reason: rs.rec.Reason, Nodes: max(len(rs.jobs), int(rs.unmade.n), 1), Req: *rs.req, Groups: slices.Clone(rs.r().groups)})
	}
	slices.SortFunc(out, func(a, b Demand) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ReasonProvisioning is the pending reason of a run whose nodes a backend
// fleet is creating (lifecycle.ReasonProvisioningNodes).
const ReasonProvisioning = string(lifecycle.ReasonProvisioningNodes)

// mayGrow tells whether a backend fleet the run may use can create nodes
// for it: then no node holding it now is not "no capacity" (the
// autoscaler's offers decide; issue 17).
func (s *Cluster) mayGrow(rs *runState) bool {
	rules := s.rules.Load()
	if rules == nil || rs.req == nil {
		return false
	}
	if len(rs.req.Fleets) == 0 {
		for _, f := range rules.Fleets {
			if f.Backend != nil {
				return true
			}
		}
		for name := range s.growing {
			if s.growsFor(name, rs.project) { // owners.go
				return true
			}
		}
		return false
	}
	for _, name := range rs.req.Fleets {
		if f, ok := rules.Fleets[name]; ok && f.Backend != nil || s.growsFor(name, rs.project) {
			return true
		}
	}
	return false
}
