package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Backend fleets from a `type: fleet` file (issue 17): `berth apply -f` of a
// fleet with `nodes:` stores it in the fleets table (as SSH fleets are),
// and the autoscaler (cloud.go) treats it as it treats the policy file's
// backend fleets. The row is all there is to a backend fleet: the
// instances have their own records, created in the crash-safe order of
// provision, so a server killed during an apply finds the fleet stored (or
// not: the apply was not acknowledged) and converges on its size at the
// next autoscale. `berth fleet delete` marks the row deleting, and the
// fleet's worker drains its nodes, waits for their jobs (unless --force),
// terminates its instances and removes the row.

// storedBackend is a stored fleet's configuration when it is a backend
// fleet (nil otherwise).
func storedBackend(f *store.Fleet) *spec.Fleet {
	var sp spec.Fleet
	if err := json.Unmarshal([]byte(f.Spec), &sp); err != nil || sp.Nodes == nil || sp.IsSSH() {
		return nil
	}
	return &sp
}

// backendFleets are the fleets the autoscaler keeps: the policy file's
// and the stored ones not being deleted. A stored fleet whose
// configuration no longer checks against the policy (its provider was
// removed) is left alone, with a warning.
func (s *Server) backendFleets(ctx context.Context) map[string]*policy.BackendFleet {
	rules := s.Rules()
	out := map[string]*policy.BackendFleet{}
	for name, f := range rules.Fleets {
		if f.Backend != nil {
			out[name] = f.Backend
		}
	}
	fs, err := s.store.ListFleets(ctx)
	if err != nil {
		s.log.Warn("cloud: cannot list the stored fleets", "err", err)
		return out
	}
	for _, f := range fs {
		sp := storedBackend(f)
		if sp == nil || f.Status == api.FleetDeleting {
			continue
		}
		if _, ok := out[f.Name]; ok {
			continue // the policy file's wins (apply refuses the name)
		}
		bf, err := rules.BackendFleetOf(sp)
		if err != nil {
			s.log.Warn("cloud: stored fleet left alone", "fleet", f.Name, "err", err)
			continue
		}
		if bf.Project, err = s.store.ProjectName(ctx, f.ProjectID); err != nil {
			s.log.Warn("cloud: stored fleet left alone: no project", "fleet", f.Name, "err", err)
			continue
		}
		out[f.Name] = bf
	}
	return out
}

// fleetDeleting reports whether name is a stored fleet being deleted (its
// nodes are not to be created any more).
func (s *Server) fleetDeleting(ctx context.Context, name string) bool {
	f, err := s.store.GetFleet(ctx, name)
	return err == nil && f.Status == api.FleetDeleting
}

// backendNotes are what a backend fleet file sets that Berth reads
// otherwise or not at all, for the plan.
func backendNotes(f *spec.Fleet) []string {
	var out []string
	if f.IdleDuration == nil && f.TerminationIdleTime != nil {
		out = append(out, "termination_idle_time: read as idle_duration (dstack's older name for it)")
	}
	if f.IdleDuration != nil && f.TerminationIdleTime != nil {
		out = append(out, "termination_idle_time: ignored, idle_duration is set")
	}
	ignored := func(set bool, field, why string) {
		if set {
			out = append(out, field+": ignored ("+why+")")
		}
	}
	ignored(f.Reservation != "", "reservation", "no backend here takes reservations")
	ignored(f.Retry != nil, "retry", "a failed creation is tried again after 1 s, 2 s, 4 s… (at most 5 minutes)")
	ignored(f.TerminationPolicy != "", "termination_policy", "idle nodes above min are terminated after idle_duration")
	ignored(len(f.Tags) > 0, "tags", "the Docker provider labels its containers itself")
	if b := blocksFlag(f.Blocks); b != "" {
		out = append(out, "blocks: "+b+": each node is split into equal blocks of its CPUs, memory and GPUs; a run takes whole blocks")
	}
	return out
}

// applyBackendFleet is applyFleet for a fleet with `nodes:`: check it
// against the providers, answer the plan, or store it.
func (s *Server) applyBackendFleet(ctx context.Context, u *store.User, req *api.FleetApplyRequest) (any, int, error) {
	f := req.Spec
	if f.Name == "" {
		return nil, 0, fmt.Errorf("%w: name: required for a fleet (it names the fleet's nodes: NAME-xxxxxxxx)", ErrInvalid)
	}
	if u == nil {
		return nil, 0, fmt.Errorf("%w: fleets are managed by users", ErrForbidden)
	}
	pid, pname, err := s.projectFor(ctx, u, f.Project)
	if err != nil {
		return nil, 0, err
	}
	if !s.mayAdmin(u, pid) {
		return nil, 0, fmt.Errorf("%w: managing project %s's fleets takes its admin role", ErrForbidden, pname)
	}
	rules := s.Rules()
	if pf, ok := rules.Fleets[f.Name]; ok && pf.Backend != nil {
		return nil, 0, fmt.Errorf("%w: fleet %s is a backend fleet of the policy file; change it there, or give this one another name", ErrConflict, f.Name)
	}
	bf, err := rules.BackendFleetOf(f)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(err.Error(), "policy: "))
	}
	s.fleets.mu.Lock() // one apply or delete of a fleet at a time
	defer s.fleets.mu.Unlock()
	old, err := s.store.GetFleet(ctx, f.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		old = nil
	case err != nil:
		return nil, 0, err
	case old.ProjectID != pid:
		return nil, 0, fmt.Errorf("%w: fleet name %s is taken by another project", ErrConflict, f.Name)
	case old.Status == api.FleetDeleting:
		return nil, 0, fmt.Errorf("%w: fleet %s is being deleted; apply it again when it is gone", ErrConflict, f.Name)
	case storedBackend(old) == nil:
		return nil, 0, fmt.Errorf("%w: fleet %s is an SSH fleet: delete it first to make it a backend fleet", ErrConflict, f.Name)
	}
	if req.Plan {
		offers, err := s.offers(ctx, fleetQuery(bf, sched.Request{}))
		if err != nil {
			return nil, 0, err
		}
		holds, err := s.fleetHolds(ctx, f.Name)
		if err != nil {
			return nil, 0, err
		}
		idle := bf.IdleDuration.String()
		if bf.IdleDuration == time.Duration(1<<63-1) {
			idle = "off"
		}
		p := &api.BackendFleetPlan{Min: bf.Min, Target: bf.Target, Max: bf.Max, IdleDuration: idle, SpotPolicy: bf.SpotPolicy,
			Offers: offers, Holds: holds, CreateNow: max(0, max(bf.Min, bf.Target)-holds), Notes: backendNotes(f)}
		if p.Offers == nil {
			p.Offers = []provider.Offer{}
		}
		if len(offers) == 0 {
			p.CreateNow = 0
			p.Notes = append(p.Notes, "no offer matches the fleet's resources, backends, regions, spot_policy and max_price: it cannot create nodes")
		}
		return api.FleetPlan{Fleet: f.Name, Project: pname, Exists: old != nil, Actions: []api.FleetHostAction{}, Backend: p}, http.StatusOK, nil
	}
	if f.Project == "" {
		f.Project = pname
	}
	sj, _ := json.Marshal(f)
	sf := &store.Fleet{Name: f.Name, ProjectID: pid, Spec: string(sj), Status: api.FleetActive, Hosts: `{"hosts":[]}`, ServerURL: req.ServerURL, CreatedBy: u.ID}
	if err := s.store.PutFleet(ctx, sf); err != nil {
		return nil, 0, err
	}
	s.syncFleetOwners(ctx) // fleet_owners.go
	s.log.Info("fleet applied", "fleet", f.Name, "project", pname, "by", u.Name, "backend", true, "min", bf.Min, "max", bf.Max)
	s.kickCloud()
	got, err := s.store.GetFleet(ctx, f.Name)
	if err != nil {
		return nil, 0, err
	}
	af, err := s.apiFleet(ctx, got)
	return af, http.StatusAccepted, err
}

// fleetHolds is how many instances fleet holds (creating or active).
func (s *Server) fleetHolds(ctx context.Context, fleet string) (int, error) {
	recs, err := s.store.ListInstances(ctx, false)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.Fleet == fleet && (r.State == string(provider.RecordCreating) || r.State == string(provider.RecordActive)) {
			n++
		}
	}
	return n, nil
}

// fleetInstances are fleet's live instances as the API shows them, with
// their nodes' status.
func (s *Server) fleetInstances(ctx context.Context, fleet string) ([]api.Instance, error) {
	recs, err := s.store.ListInstances(ctx, false)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	nodes := s.Nodes()
	s.unlock()
	status := map[string]string{}
	for _, n := range nodes {
		status[n.Name] = n.Status
	}
	out := []api.Instance{}
	for _, x := range recs {
		if x.Fleet != fleet {
			continue
		}
		in := api.Instance{Key: x.Key, Fleet: x.Fleet, Node: x.Node, State: x.State, Detail: x.Detail, NodeState: status[x.Node], CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
		_ = json.Unmarshal([]byte(x.Offer), &in.Offer)
		out = append(out, in)
	}
	return out, nil
}

// deleteBackendFleet is a backend fleet's delete worker: drain every node,
// wait for their jobs (unless force), terminate the instances, forget the
// nodes and remove the row. Taking the cloud gate exclusively waits out
// every creation under way; a creation that starts after it sees the
// fleet deleting and does not happen (provision).
func (s *Server) deleteBackendFleet(ctx context.Context, name string, force bool) error {
	n, err := s.retireInstances(ctx, name, force, "fleet "+name+" deleted") // fleet_retire.go
	if err != nil {
		_ = s.store.SetFleetState(ctx, name, api.FleetDeleting, fmt.Sprintf(`{"hosts":[],"message":%q}`, "delete: "+err.Error()))
		return err
	}
	s.fleets.mu.Lock()
	defer s.fleets.mu.Unlock()
	if cur, err := s.store.GetFleet(ctx, name); err != nil || cur.Status != api.FleetDeleting {
		return errSuperseded
	}
	s.log.Info("fleet deleted", "fleet", name, "instances", n)
	if err := s.store.DeleteFleet(ctx, name); err != nil {
		return err
	}
	s.syncFleetOwners(ctx)
	return nil
}

// waitJobsGone waits until node runs no job (or is not known).
func (s *Server) waitJobsGone(ctx context.Context, node string) error {
	for {
		s.mu.Lock()
		nodes := s.Nodes()
		s.unlock()
		i := slices.IndexFunc(nodes, func(n api.Node) bool { return n.Name == node })
		if i < 0 || nodes[i].Jobs == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// blocksFlag is berth agent's --blocks for a fleet's blocks ("" for 1 or
// unset: the node is not split).
func blocksFlag(b spec.Blocks) string {
	switch {
	case b == spec.BlocksAuto:
		return "auto"
	case b > 1:
		return strconv.Itoa(int(b))
	}
	return ""
}
