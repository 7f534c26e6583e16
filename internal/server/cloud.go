package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// Backend fleets (issue 17): the server creates instances through the
// configured providers when waiting runs fit an offer and no node, and
// terminates nodes idle past their fleet's idle_duration.
//
// Crash safety rests on one order, kept by provision: (1) the node's
// token is stored, (2) the instance is recorded as creating under its
// idempotency key, (3) the provider is asked to create it, (4) the record
// becomes active. After a crash at any point, reconcile compares the
// records with the provider's list (provider.Reconcile): an instance the
// provider has is adopted, a record the provider lacks is marked gone, and
// an instance nothing records is terminated. Create under one key never
// makes two instances, so nothing is doubled; nothing the provider holds
// goes unrecorded for longer than one reconcile, so nothing leaks.

// cloudState is the autoscaler's memory; none of it needs to survive a
// restart (the store has the instances).
type cloudState struct {
	mu  sync.Mutex
	url string // the server as instances reach it (SetCloudURL)
	// gate keeps reconcile from judging a record whose creation is under
	// way: each provision holds it shared, reconcile exclusively.
	gate sync.RWMutex
	// asked are the waiting runs nodes were created for, and when.
	asked map[int64]time.Time
	// idleSince is when each backend node was last seen busy or joining.
	idleSince map[string]time.Time
	// wake asks the loop for an autoscale now (a fleet applied); forget
	// are nodes to remove once their jobs end (nodes_remove.go).
	wake   chan struct{}
	forget map[string]string
	// retiring are the removed fleets whose instances a worker is
	// ending (fleet_retire.go).
	retiring map[string]bool
	// fails are the fleets whose last creations failed (cloud_backoff.go).
	fails map[string]*createFailure
	// unrecorded counts, per fleet, the creations started whose instance
	// is not recorded yet: the next look counts them, so that two looks
	// in a row never create twice for one need.
	unrecorded map[string]int
}

// kickCloud asks for an autoscale now.
func (s *Server) kickCloud() {
	s.cloud.mu.Lock()
	w := s.cloud.wake
	s.cloud.mu.Unlock()
	select {
	case w <- struct{}{}:
	default:
	}
}

// SetCloudURL tells the server where instances reach it (before Run).
func (s *Server) SetCloudURL(url string) {
	s.cloud.mu.Lock()
	s.cloud.url = url
	s.cloud.mu.Unlock()
}

func (s *Server) cloudLoop(ctx context.Context) {
	if len(s.cfg.Providers) == 0 {
		return
	}
	s.cloud.mu.Lock()
	s.cloud.asked, s.cloud.idleSince = map[int64]time.Time{}, map[string]time.Time{}
	wake := make(chan struct{}, 1)
	s.cloud.wake = wake
	s.cloud.mu.Unlock()
	every := s.cfg.CloudEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; ; n++ {
		// The providers are listed on start and every tenth tick (the
		// safety net for interruptions and leaks); the autoscaler runs
		// every tick.
		if n%10 == 0 {
			if err := s.reconcileCloud(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("cloud: reconcile", "err", err)
			}
		}
		if err := s.autoscale(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("cloud: autoscale", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// reconcileCloud brings the store's records and the providers' instances
// together (see the comment at the top).
func (s *Server) reconcileCloud(ctx context.Context) error {
	s.cloud.gate.Lock()
	defer s.cloud.gate.Unlock()
	recs, err := s.store.ListInstances(ctx, false)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range s.cfg.Providers {
		ins, err := p.List(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var mine []provider.Record
		for _, r := range recs {
			if r.Backend == p.Name() {
				mine = append(mine, provider.Record{Key: r.Key, State: provider.RecordState(r.State)})
			}
		}
		// Records marked gone are listed too: an instance under one is a leak.
		all, err := s.store.ListInstances(ctx, true)
		if err != nil {
			return err
		}
		for _, r := range all {
			if r.Backend == p.Name() && r.State == string(provider.RecordGone) {
				mine = append(mine, provider.Record{Key: r.Key, State: provider.RecordGone})
			}
		}
		for _, a := range provider.Reconcile(mine, ins, nil) {
			switch a.Do {
			case "adopt":
				s.log.Info("cloud: instance adopted after a restart", "instance", a.Key, "backend", p.Name())
				errs = append(errs, s.store.SetInstanceState(ctx, a.Key, string(provider.RecordActive), "adopted after a restart"))
			case "gone":
				s.log.Info("cloud: instance gone", "instance", a.Key, "backend", p.Name())
				errs = append(errs, s.store.SetInstanceState(ctx, a.Key, string(provider.RecordGone), "not found at the provider"))
			case "terminate":
				why := "no record (leaked)"
				if a.Record {
					why = "interrupted or being terminated"
				}
				s.log.Info("cloud: terminating instance", "instance", a.Key, "backend", p.Name(), "why", why)
				if err := p.Terminate(ctx, a.Key); err != nil {
					errs = append(errs, err)
					continue
				}
				if a.Record {
					errs = append(errs, s.store.SetInstanceState(ctx, a.Key, string(provider.RecordGone), why))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// provision creates one instance of offer for fleet, in the crash-safe
// order (the comment at the top).
//
// The caller counted the creation as pending (cloudState.pend); the
// record counts it once written, so provision ends the pending count
// there, and pending says whether the caller must end it: a creation that
// failed counts as pending again until the caller has noted the failure
// (backoff), else the next autoscale, between the record's end and the
// note, would create another at once.
func (s *Server) provision(ctx context.Context, fleet string, bf *policy.BackendFleet, offer provider.Offer, vols []provider.VolumeMount, features []string) (pending bool, err error) {
	pending = true
	p, err := provider.Find(s.cfg.Providers, offer.Backend)
	if err != nil {
		return true, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	key := fleet + "-" + hex.EncodeToString(b[:])
	s.cloud.gate.RLock()
	defer s.cloud.gate.RUnlock()
	if s.fleetDeleting(ctx, fleet) {
		// Its delete took the gate after marking it: nothing more is made.
		return true, fmt.Errorf("cloud: fleet %s is being deleted", fleet)
	}
	s.cloud.mu.Lock()
	url := s.cloud.url
	s.cloud.mu.Unlock()
	token, _, err := s.nodeToken(ctx, key, "instance "+key, false, time.Time{})
	if err != nil {
		return true, err
	}
	oj, _ := json.Marshal(offer)
	if err := s.store.CreateInstance(ctx, &store.Instance{Key: key, Fleet: fleet, Backend: p.Name(), Offer: string(oj), Node: key, State: string(provider.RecordCreating)}); err != nil {
		return true, err
	}
	s.cloud.unpend(fleet) // the record counts it from now on
	s.log.Info("cloud: instance recorded", "instance", key, "fleet", fleet, "offer", offer.Instance, "backend", p.Name())
	if d := s.cfg.CloudPauseAfterRecord; d > 0 {
		s.log.Info("cloud: pausing between record and create", "instance", key, "for", d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	in, err := p.Create(ctx, key, offer, s.bootstrap(url, token, key, fleet, bf, vols, features))
	if err != nil {
		// Pending again until the caller notes the failure.
		s.cloud.pend(fleet)
		// Whatever the provider made of it goes: the next reconcile
		// terminates an instance under a gone record.
		_ = p.Terminate(context.WithoutCancel(ctx), key)
		_ = s.store.SetInstanceState(context.WithoutCancel(ctx), key, string(provider.RecordGone), "create failed: "+err.Error())
		return true, fmt.Errorf("cloud: create %s: %w", key, err)
	}
	s.log.Info("cloud: instance created", "instance", key, "id", in.ID, "state", in.State)
	return false, s.store.SetInstanceState(ctx, key, string(provider.RecordActive), "")
}

// terminate ends one instance: recorded as terminating first, so that a
// crash half-way is finished by reconcile.
func (s *Server) terminate(ctx context.Context, r *store.Instance, why string) error {
	p, err := provider.Find(s.cfg.Providers, r.Backend)
	if err != nil {
		return err
	}
	if err := s.store.SetInstanceState(ctx, r.Key, string(provider.RecordTerminating), why); err != nil {
		return err
	}
	s.log.Info("cloud: terminating instance", "instance", r.Key, "fleet", r.Fleet, "why", why)
	if err := p.Terminate(ctx, r.Key); err != nil {
		return err
	}
	return s.store.SetInstanceState(ctx, r.Key, string(provider.RecordGone), why)
}

// offers are every provider's offers that q matches, cheapest first.
func (s *Server) offers(ctx context.Context, q provider.Query) ([]provider.Offer, error) {
	var all []provider.Offer
	for _, p := range s.cfg.Providers {
		os, err := p.Offers(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, os...)
	}
	return provider.Filter(all, q), nil
}

// fleetQuery is what one node of backend fleet bf must have to hold req.
func fleetQuery(bf *policy.BackendFleet, req sched.Request) provider.Query {
	q := provider.Query{
		CPUs:     provider.Range{Min: max(int64(req.CPUs), bf.CPUs.Min), Max: bf.CPUs.Max},
		Memory:   provider.Range{Min: max(int64(req.Memory), bf.Memory.Min), Max: bf.Memory.Max},
		MaxPrice: bf.MaxPrice, Backends: bf.Backends, Regions: bf.Regions,
		Instances: bf.InstanceTypes, Zones: bf.Zones,
	}
	if req.GPU.Count > 0 {
		q.GPUs = provider.Range{Min: int64(req.GPU.Count)}
		q.GPUMemory = provider.Range{Min: int64(req.GPU.MinMemory), Max: int64(req.GPU.MaxMemory)}
		if len(req.GPU.Names) == 1 {
			q.GPUModel = req.GPU.Names[0]
		}
	}
	switch bf.SpotPolicy {
	case "spot":
		yes := true
		q.Spot = &yes
	case "on-demand", "":
		q.Spot = new(bool)
	}
	return q
}

// autoscale is one look at the backend fleets: create nodes for waiting
// runs that fit an offer and no node, keep each fleet at its minimum (or
// target), and terminate nodes idle past idle_duration.
func (s *Server) autoscale(ctx context.Context) error {
	bfs := s.backendFleets(ctx)
	var fleets []string
	known := map[string]bool{}
	for name := range bfs {
		fleets = append(fleets, name)
		known[name] = true
	}
	recs, err := s.store.ListInstances(ctx, false)
	if err != nil {
		return err
	}
	// Instances of a fleet removed from the policy file end (fleet_retire.go).
	s.retireOrphans(ctx, recs, known)
	if len(fleets) == 0 {
		return nil
	}
	slices.Sort(fleets)
	s.mu.Lock()
	demands := s.Demands()
	nodes := s.Nodes()
	s.unlock()
	byName := make(map[string]api.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	now := time.Now()
	s.cloud.mu.Lock()
	waiting := map[int64]bool{}
	for _, d := range demands {
		waiting[d.ID] = true
	}
	for id, at := range s.cloud.asked {
		// A run placed (or gone) is no longer asked for; one still
		// waiting after ten minutes may be asked for again.
		if !waiting[id] || now.Sub(at) > 10*time.Minute {
			delete(s.cloud.asked, id)
		}
	}
	s.cloud.mu.Unlock()
	var errs []error
	for _, name := range fleets {
		bf := bfs[name]
		// A fleet whose creations fail waits (cloud_backoff.go): it
		// creates nothing now, but its idle nodes still go.
		grow := !s.cloud.backingOff(name, now)
		var mine []*store.Instance
		for _, r := range recs {
			if r.Fleet == name && (r.State == string(provider.RecordCreating) || r.State == string(provider.RecordActive)) {
				mine = append(mine, r)
			}
		}
		s.cloud.mu.Lock()
		count := len(mine) + s.cloud.unrecorded[name]
		s.cloud.mu.Unlock()
		// Waiting runs that may use this fleet and that no node holds.
		for _, d := range demands {
			if !grow || !growsFor(name, bf, d) {
				continue
			}
			s.cloud.mu.Lock()
			_, done := s.cloud.asked[d.ID]
			s.cloud.mu.Unlock()
			if done || count+d.Nodes > bf.Max {
				continue
			}
			vols, features, ok := s.volumeBootstrap(ctx, d.Req.Features) // volumes.go
			if !ok {
				continue
			}
			offers, err := s.offers(ctx, fleetQuery(bf, d.Req))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(offers) == 0 {
				continue
			}
			s.cloud.mu.Lock()
			s.cloud.asked[d.ID] = now
			s.cloud.mu.Unlock()
			s.log.Info("cloud: provisioning nodes for a waiting run", "run_id", d.ID, "fleet", name, "nodes", d.Nodes, "offer", offers[0].Instance)
			for range d.Nodes {
				count++
				s.cloud.pend(name)
				go s.provisionLogged(ctx, d.ID, name, bf, offers[0], vols, features)
			}
		}
		// The fleet's floor.
		if want := max(bf.Min, bf.Target); grow && count < want {
			offers, err := s.offers(ctx, fleetQuery(bf, sched.Request{}))
			if err == nil && len(offers) > 0 {
				for ; count < want; count++ {
					s.cloud.pend(name)
					go s.provisionLogged(ctx, 0, name, bf, offers[0], nil, nil)
				}
			}
		}
		// Idle nodes past idle_duration, down to the floor.
		floor := max(bf.Min, bf.Target)
		for _, r := range mine {
			n, joined := byName[r.Node]
			s.cloud.mu.Lock()
			since, seen := s.cloud.idleSince[r.Node]
			busy := !joined || n.Jobs > 0 || r.State != string(provider.RecordActive) || !strings.HasPrefix(n.Status, "idle")
			if busy || !seen {
				s.cloud.idleSince[r.Node] = now
				since = now
			}
			s.cloud.mu.Unlock()
			if busy || count <= floor || now.Sub(since) < bf.IdleDuration {
				continue
			}
			count--
			if err := s.terminate(ctx, r, fmt.Sprintf("idle for %s", bf.IdleDuration)); err != nil {
				errs = append(errs, err)
			} else {
				s.forgetNodeOf(ctx, r.Node, "instance terminated: idle")
			}
			s.cloud.mu.Lock()
			delete(s.cloud.idleSince, r.Node)
			s.cloud.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// growsFor tells whether backend fleet name (bf) may create nodes for
// waiting run d: the run names no fleet or names this one, is not
// heterogeneous, and is of the fleet's project when a project owns it
// (a `type: fleet` file's fleet; the policy file's serve every project).
func growsFor(name string, bf *policy.BackendFleet, d control.Demand) bool {
	if len(d.Req.Fleets) > 0 && !slices.Contains(d.Req.Fleets, name) || len(d.Groups) > 0 {
		return false
	}
	return bf.Project == "" || d.Req.Project == bf.Project
}

// bootstrap is what instance key of fleet bf starts with: its volumes
// mounted, and features (the volumes', the segment's) advertised.
func (s *Server) bootstrap(url, token, key, fleet string, bf *policy.BackendFleet, vols []provider.VolumeMount, features []string) provider.Bootstrap {
	b := provider.Bootstrap{ServerURL: url, Token: token, NodeName: key, Fleet: fleet, Env: bf.Env, Blocks: blocksFlag(bf.Blocks), Volumes: vols,
		Features: slices.Clone(features)}
	if bf.Segment != "" {
		b.Features = append(b.Features, sched.SegmentFeature+bf.Segment)
	}
	return b
}

// provisionLogged provisions for waiting run runID (0: the fleet's floor)
// and notes the outcome (cloud_backoff.go): a failure is logged once per
// message, the fleet waits before its next creation, and the run may be
// asked for again then.
func (s *Server) provisionLogged(ctx context.Context, runID int64, fleet string, bf *policy.BackendFleet, offer provider.Offer, vols []provider.VolumeMount, features []string) {
	pending, err := s.provision(ctx, fleet, bf, offer, vols, features)
	if pending {
		defer s.cloud.unpend(fleet) // once the outcome is noted
	}
	if ctx.Err() != nil {
		return
	}
	if s.cloud.noteCreate(fleet, err, time.Now()) {
		s.log.Warn("cloud: provision failed; retrying with backoff", "fleet", fleet, "err", err)
	} else if err != nil {
		s.log.Debug("cloud: provision failed again", "fleet", fleet, "err", err)
	}
	if err != nil && runID != 0 {
		s.cloud.mu.Lock()
		delete(s.cloud.asked, runID)
		s.cloud.mu.Unlock()
	}
}

// provisioningReason is waiting run id's reason as the API shows it:
// ProvisioningNodes instead of Resources while nodes are being created
// for it.
func (s *Server) provisioningReason(id int64, reason string) string {
	if reason != string(lifecycle.ReasonResources) {
		return reason
	}
	s.cloud.mu.Lock()
	defer s.cloud.mu.Unlock()
	if _, ok := s.cloud.asked[id]; ok {
		return string(lifecycle.ReasonProvisioningNodes)
	}
	return reason
}

// planOffers are the offers the backend fleets that req may use could
// create for it (the plan of a run no node can start now lists them).
func (s *Server) planOffers(req sched.Request) []provider.Offer {
	if len(s.cfg.Providers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []provider.Offer
	seen := map[string]bool{}
	for name, bf := range s.backendFleets(ctx) {
		if len(req.Fleets) > 0 && !slices.Contains(req.Fleets, name) || bf.Project != "" && req.Project != bf.Project {
			continue
		}
		offers, err := s.offers(ctx, fleetQuery(bf, req))
		if err != nil {
			s.log.Warn("cloud: offers for a plan", "fleet", name, "err", err)
			continue
		}
		for _, o := range offers {
			if k := o.Backend + "/" + o.Region + "/" + o.Instance; !seen[k] {
				seen[k] = true
				out = append(out, o)
			}
		}
	}
	return provider.Filter(out, provider.Query{})
}
