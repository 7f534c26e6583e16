package control

import "maps"

// Fleets that projects own (issue 17): a fleet made by `berth apply -f` of a
// `type: fleet` file (SSH or backend) belongs to the project that applied
// it, and its nodes serve that project's runs only, as dstack's fleets do.
// The policy file's fleets, and nodes of fleets nothing stores, serve
// every project. The server owns the fleets table and tells the cluster
// which project owns which fleet (FleetOwnersInput) at start and after
// each apply or delete; the scheduler sees it as sched.Node.Project.

// FleetOwnersInput: the fleets projects own now, fleet name → project
// name. It replaces the previous map.
// Growing are the stored fleets that are backend fleets (their nodes come
// and go with demand: mayGrow).
type FleetOwnersInput struct {
	Owners  map[string]string
	Growing map[string]bool
}

func (FleetOwnersInput) isInput() {}

// onFleetOwners puts the owners in force: every node of a fleet whose
// owner changed is seen anew by the scheduler, and the waiting runs are
// weighed again (a node they could not use may now serve them).
func (s *Cluster) onFleetOwners(in FleetOwnersInput) {
	s.growing = maps.Clone(in.Growing)
	if maps.Equal(s.owners, in.Owners) {
		return
	}
	s.owners = maps.Clone(in.Owners)
	for _, ns := range s.nodes {
		s.syncNode(ns)
	}
	for id, rs := range s.pending {
		s.fresh[id] = rs
	}
	s.freed = true
}

// growsFor tells whether stored fleet name is a backend fleet that may
// create nodes for a run of project.
func (s *Cluster) growsFor(name, project string) bool {
	if !s.growing[name] {
		return false
	}
	owner := s.owners[name]
	return owner == "" || owner == project
}

// ownerOf is the project whose runs only node ns serves ("" every one).
func (s *Cluster) ownerOf(ns *nodeState) string {
	return s.owners[ns.info.Fleet]
}
