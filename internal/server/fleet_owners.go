package server

import (
	"context"

	"github.com/berth-hq/berth/internal/control"
)

// syncFleetOwners tells the cluster which project owns which stored fleet
// (control/owners.go): a `type: fleet` file's nodes, SSH or backend, serve
// the runs of the project that applied it and no other's. The policy
// file's fleets are the administrator's and serve every project, so a
// name the policy file declares is never owned. Called at start, after
// each apply or delete of a fleet, and when the policy changes.
func (s *Server) syncFleetOwners(ctx context.Context) {
	fs, err := s.store.ListFleets(ctx)
	if err != nil {
		s.log.Warn("fleets: cannot list the fleets' projects", "err", err)
		return
	}
	rules := s.Rules()
	owners, growing := map[string]string{}, map[string]bool{}
	names := map[int64]string{}
	for _, f := range fs {
		if _, ok := rules.Fleets[f.Name]; ok {
			continue
		}
		name, ok := names[f.ProjectID]
		if !ok {
			if name, err = s.store.ProjectName(ctx, f.ProjectID); err != nil {
				s.log.Warn("fleets: cannot read a fleet's project", "fleet", f.Name, "err", err)
				continue
			}
			names[f.ProjectID] = name
		}
		owners[f.Name] = name
		if storedBackend(f) != nil {
			growing[f.Name] = true
		}
	}
	if _, err := s.do(control.FleetOwnersInput{Owners: owners, Growing: growing}); err != nil {
		s.log.Warn("fleets: owners not in force", "err", err)
	}
	s.wakeScheduler()
}
