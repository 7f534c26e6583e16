package server

import (
	"context"
	"errors"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/store"
)

// A backend fleet can go two ways: `berth fleet delete` of a `type: fleet`
// file's fleet (deleteBackendFleet), or its removal from the policy file
// followed by a reload (issue 17). Both end its instances the same way,
// retireInstances: drain every node, wait for the jobs on them (unless
// force), terminate the instances and forget their nodes. A policy file
// has no --force: a removed fleet's nodes finish their jobs first.
//
// The autoscaler finds the instances of fleets that no longer exist at
// each look (orphanFleets) and retires them in the background, one worker
// per fleet. Nothing of this is kept in memory only: the drains and the
// instances' records are durable, so a server restarted half-way finds
// the same orphans and goes on where it stopped.

// retireInstances ends every live instance of fleet, as said above, and
// answers how many there were. Taking the cloud gate exclusively waits out
// every creation under way for the fleet.
func (s *Server) retireInstances(ctx context.Context, fleet string, force bool, why string) (int, error) {
	s.cloud.gate.Lock()
	recs, err := s.store.ListInstances(ctx, false)
	s.cloud.gate.Unlock()
	if err != nil {
		return 0, err
	}
	var mine []*store.Instance
	for _, r := range recs {
		if r.Fleet == fleet {
			mine = append(mine, r)
		}
	}
	for _, r := range mine {
		// A node that never joined has nothing to drain.
		_, _ = s.do(control.DrainInput{Node: r.Node, Drain: &api.DrainRequest{Reason: why}, By: fleetDrainer})
	}
	if !force {
		for _, r := range mine {
			if err := s.waitJobsGone(ctx, r.Node); err != nil {
				return 0, err
			}
		}
	}
	var errs []error
	for _, r := range mine {
		if err := s.terminate(ctx, r, why); err != nil && !errors.Is(err, provider.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		s.forgetNodeOf(ctx, r.Node, why)
	}
	return len(mine), errors.Join(errs...)
}

// orphanFleets are the fleets of live instance records that are neither
// a backend fleet in force (known) nor a stored fleet (a stored fleet
// being deleted has its own worker; one whose configuration no longer
// checks is left alone).
func orphanFleets(recs []*store.Instance, known map[string]bool, stored []*store.Fleet) []string {
	isStored := map[string]bool{}
	for _, f := range stored {
		isStored[f.Name] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		live := r.State == string(provider.RecordCreating) || r.State == string(provider.RecordActive)
		if !live || known[r.Fleet] || isStored[r.Fleet] || seen[r.Fleet] {
			continue
		}
		seen[r.Fleet] = true
		out = append(out, r.Fleet)
	}
	return out
}

// retireOrphans starts a worker for each orphan fleet that has none.
func (s *Server) retireOrphans(ctx context.Context, recs []*store.Instance, known map[string]bool) {
	stored, err := s.store.ListFleets(ctx)
	if err != nil {
		s.log.Warn("cloud: cannot list the stored fleets", "err", err)
		return
	}
	for _, name := range orphanFleets(recs, known, stored) {
		s.cloud.mu.Lock()
		if s.cloud.retiring == nil {
			s.cloud.retiring = map[string]bool{}
		}
		busy := s.cloud.retiring[name]
		s.cloud.retiring[name] = true
		s.cloud.mu.Unlock()
		if busy {
			continue
		}
		s.log.Info("cloud: fleet removed from the policy file: retiring its instances", "fleet", name)
		go func() {
			n, err := s.retireInstances(ctx, name, false, "fleet "+name+" removed from the policy file")
			if err != nil && ctx.Err() == nil {
				s.log.Warn("cloud: retiring a removed fleet", "fleet", name, "err", err)
			} else if err == nil {
				s.log.Info("cloud: removed fleet retired", "fleet", name, "instances", n)
			}
			s.cloud.mu.Lock()
			delete(s.cloud.retiring, name)
			s.cloud.mu.Unlock()
			s.kickCloud()
		}()
	}
}
