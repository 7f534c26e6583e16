package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// SSH fleets (issue 17): `berth apply -f fleet.yml` of a `type: fleet`
// with ssh_config. The handlers record the fleet (its configuration, its
// private keys sealed under the secrets key, each host's state) and hand
// it to a worker (fleet_install.go) that installs or uninstalls the agent
// on each host over SSH. Every step is recorded before it is taken, so a
// server killed half-way finds the fleet unfinished at its next start and
// takes it up again (fleetLoop); the steps are idempotent.

func (s *Server) fleetRoutes(mux *http.ServeMux, v string) {
	mux.HandleFunc("POST "+v+"/fleets", s.auth(applyHandler(s.applyFleet)))
	mux.HandleFunc("GET "+v+"/fleets", s.auth(s.handleFleetList))
	mux.HandleFunc("GET "+v+"/fleets/{name}", s.auth(s.handleFleetGet))
	mux.HandleFunc("DELETE "+v+"/fleets/{name}", s.auth(s.handleFleetDelete))
}

// fleetRecord is the hosts column: each host's state, and how the apply
// that set it was asked to go.
type fleetRecord struct {
	Hosts        []*fleetHost `json:"hosts"`
	AllOrNothing bool         `json:"all_or_nothing,omitempty"`
	Force        bool         `json:"force,omitempty"` // a delete that does not wait for jobs
	Message      string       `json:"message,omitempty"`
}

// fleetHost is one host's state as stored.
type fleetHost struct {
	api.FleetHost
	Key     string       `json:"key"`    // hostname:port, the host's identity in the fleet
	Config  spec.SSHHost `json:"config"` // with the fleet's defaults filled in
	Digest  string       `json:"digest"` // of what its installation depends on: a change reinstalls
	Keys    hostKeys     `json:"known_keys"`
	TokenID string       `json:"token_id,omitempty"` // its agent's node token
}

// fleetKeySealName binds a fleet's sealed keys to its name.
func fleetKeySealName(fleet string) string { return "fleet/" + fleet }

// hostsOf resolves the spec's hosts, keyed by hostname:port, in file order.
func hostsOf(f *spec.Fleet) []*fleetHost {
	var out []*fleetHost
	env, _ := json.Marshal(f.Env)
	for i := range f.SSHConfig.Hosts {
		c := f.Host(i)
		d, _ := json.Marshal(struct {
			C         spec.SSHHost
			Env       string
			Placement string
			Network   string
		}{c, string(env), f.Placement, f.SSHConfig.Network})
		sum := sha256.Sum256(d)
		out = append(out, &fleetHost{
			FleetHost: api.FleetHost{Host: fmt.Sprintf("%s@%s:%d", c.User, c.Hostname, c.Port), InstallDir: c.InstallDir, State: api.HostPending},
			Key:       fmt.Sprintf("%s:%d", c.Hostname, c.Port), Config: c, Digest: hex.EncodeToString(sum[:8]),
		})
	}
	return out
}

// mergeHosts is the hosts after applying spec over the fleet's current
// ones: new hosts to install (with a node name not used before in the
// fleet), changed ones to reinstall, kept ones as they are, and the ones
// the spec no longer lists to remove.
func mergeHosts(fleet string, old []*fleetHost, f *spec.Fleet) (hosts []*fleetHost, actions []api.FleetHostAction) {
	byKey := map[string]*fleetHost{}
	used := map[string]bool{}
	for _, h := range old {
		byKey[h.Key] = h
		used[h.Node] = true
	}
	next := 0
	nodeName := func() string {
		for {
			n := fmt.Sprintf("%s-%d", fleet, next)
			next++
			if !used[n] {
				used[n] = true
				return n
			}
		}
	}
	seen := map[string]bool{}
	for _, nh := range hostsOf(f) {
		seen[nh.Key] = true
		oh, ok := byKey[nh.Key]
		detail := fmt.Sprintf("berth agent in %s", nh.InstallDir)
		if b := blocksFlag(nh.Config.Blocks); b != "" {
			detail += ", blocks " + b
		}
		if nh.Config.ProxyJump != nil {
			detail += fmt.Sprintf(", through %s@%s:%d", nh.Config.ProxyJump.User, nh.Config.ProxyJump.Hostname, nh.Config.ProxyJump.Port)
		}
		switch {
		case !ok || oh.State == api.HostRemoved:
			nh.Node = nodeName()
			hosts = append(hosts, nh)
			actions = append(actions, api.FleetHostAction{Host: nh.Host, Node: nh.Node, Action: "install", Detail: detail})
		case oh.Digest != nh.Digest || oh.State == api.HostFailed || oh.State == api.HostRemoving:
			oh.Config, oh.Digest, oh.Host, oh.InstallDir = nh.Config, nh.Digest, nh.Host, nh.InstallDir
			oh.State, oh.Message = api.HostPending, ""
			hosts = append(hosts, oh)
			actions = append(actions, api.FleetHostAction{Host: oh.Host, Node: oh.Node, Action: "reinstall", Detail: detail})
		default:
			hosts = append(hosts, oh)
			actions = append(actions, api.FleetHostAction{Host: oh.Host, Node: oh.Node, Action: "keep", Detail: "unchanged (" + oh.State + ")"})
		}
	}
	for _, oh := range old {
		if !seen[oh.Key] && oh.State != api.HostRemoved {
			oh.State, oh.Message = api.HostRemoving, ""
			hosts = append(hosts, oh)
			actions = append(actions, api.FleetHostAction{Host: oh.Host, Node: oh.Node, Action: "uninstall", Detail: "drain, wait for its jobs, stop and remove the agent"})
		}
	}
	return hosts, actions
}

func readRecord(f *store.Fleet) (*fleetRecord, *spec.Fleet, error) {
	var rec fleetRecord
	var sp spec.Fleet
	if err := json.Unmarshal([]byte(f.Hosts), &rec); err != nil {
		return nil, nil, fmt.Errorf("fleet %s: hosts: %w", f.Name, err)
	}
	if err := json.Unmarshal([]byte(f.Spec), &sp); err != nil {
		return nil, nil, fmt.Errorf("fleet %s: spec: %w", f.Name, err)
	}
	return &rec, &sp, nil
}

func (s *Server) apiFleet(ctx context.Context, f *store.Fleet) (api.Fleet, error) {
	rec, sp, err := readRecord(f)
	if err != nil {
		return api.Fleet{}, err
	}
	out := api.Fleet{Name: f.Name, Project: s.projectName(ctx, f.ProjectID), Status: f.Status, Message: rec.Message, Spec: sp,
		Hosts: []api.FleetHost{}, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
	for _, h := range rec.Hosts {
		out.Hosts = append(out.Hosts, h.FleetHost)
	}
	if sp.Nodes != nil {
		if out.Instances, err = s.fleetInstances(ctx, f.Name); err != nil {
			return api.Fleet{}, err
		}
		if msg, at, retry := s.cloud.lastError(f.Name); msg != "" { // cloud_backoff.go
			out.LastError = &api.CreateError{Message: msg, At: at, RetryAt: retry}
		}
	}
	return out, nil
}

// projectName is a project's name by ID ("" when it is gone).
func (s *Server) projectName(ctx context.Context, id int64) string {
	ps, err := s.store.ListProjects(ctx)
	if err != nil {
		return ""
	}
	for _, p := range ps {
		if p.ID == id {
			return p.Name
		}
	}
	return ""
}

// identityFiles are the key files a fleet's hosts and bastions name.
func identityFiles(f *spec.Fleet) []string {
	var out []string
	for i := range f.SSHConfig.Hosts {
		h := f.Host(i)
		out = append(out, h.IdentityFile)
		if h.ProxyJump != nil {
			out = append(out, h.ProxyJump.IdentityFile)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (s *Server) applyFleet(ctx context.Context, u *store.User, req *api.FleetApplyRequest) (any, int, error) {
	f := req.Spec
	if f == nil {
		return nil, 0, fmt.Errorf("%w: no fleet configuration (spec)", ErrInvalid)
	}
	if err := f.Validate(); err != nil {
		return nil, 0, fmt.Errorf("%w: %s", ErrInvalid, err)
	}
	if !f.IsSSH() {
		return s.applyBackendFleet(ctx, u, req) // fleet_backend.go
	}
	if f.Name == "" {
		return nil, 0, fmt.Errorf("%w: name: required for a fleet (it names the fleet's nodes: NAME-0, NAME-1, ...)", ErrInvalid)
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
	if err := s.secretsOn(); err != nil {
		return nil, 0, fmt.Errorf("%w (an SSH fleet's private key is kept sealed under it)", err)
	}
	for _, id := range identityFiles(f) {
		if _, ok := req.Keys[id]; !ok {
			return nil, 0, fmt.Errorf("%w: identity_file %s: the request carries no key for it", ErrInvalid, id)
		}
		if _, err := clientConfig("check", id, req.Keys, nil); err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	s.fleets.mu.Lock() // one apply or delete of a fleet at a time
	defer s.fleets.mu.Unlock()
	old, err := s.store.GetFleet(ctx, f.Name)
	var rec *fleetRecord
	switch {
	case errors.Is(err, store.ErrNotFound):
		old, rec = nil, &fleetRecord{}
	case err != nil:
		return nil, 0, err
	default:
		if old.ProjectID != pid {
			return nil, 0, fmt.Errorf("%w: fleet name %s is taken by another project", ErrConflict, f.Name)
		}
		if old.Status == api.FleetDeleting {
			return nil, 0, fmt.Errorf("%w: fleet %s is being deleted; apply it again when it is gone", ErrConflict, f.Name)
		}
		if rec, _, err = readRecord(old); err != nil {
			return nil, 0, err
		}
	}
	hosts, actions := mergeHosts(f.Name, rec.Hosts, f)
	if req.Plan {
		return api.FleetPlan{Fleet: f.Name, Project: pname, Exists: old != nil, Actions: actions}, http.StatusOK, nil
	}
	if f.Project == "" {
		f.Project = pname
	}
	keys, _ := json.Marshal(req.Keys)
	url := req.ServerURL
	if url == "" && old != nil {
		url = old.ServerURL
	}
	if url == "" {
		return nil, 0, fmt.Errorf("%w: server_url: required (the URL the fleet's agents reach this server at)", ErrInvalid)
	}
	spec, _ := json.Marshal(f)
	nr := &fleetRecord{Hosts: hosts, AllOrNothing: req.AllOrNothing}
	hj, _ := json.Marshal(nr)
	sf := &store.Fleet{Name: f.Name, ProjectID: pid, Spec: string(spec), Status: api.FleetProvisioning,
		SSHKey: s.secrets.seal(pid, fleetKeySealName(f.Name), keys), ServerURL: url, Hosts: string(hj), CreatedBy: u.ID}
	if err := s.store.PutFleet(ctx, sf); err != nil {
		return nil, 0, err
	}
	s.syncFleetOwners(ctx) // fleet_owners.go
	s.log.Info("fleet applied", "fleet", f.Name, "project", pname, "by", u.Name, "hosts", len(hosts))
	s.kickFleet(f.Name)
	got, err := s.store.GetFleet(ctx, f.Name)
	if err != nil {
		return nil, 0, err
	}
	af, err := s.apiFleet(ctx, got)
	return af, http.StatusAccepted, err
}

// fleetVisible is the fleet if u may read it; otherwise 404, never 403.
func (s *Server) fleetVisible(ctx context.Context, u *store.User, name string) (*store.Fleet, error) {
	f, err := s.store.GetFleet(ctx, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (u == nil || !s.mayRead(u, f.ProjectID))) {
		return nil, fmt.Errorf("%w: fleet %s", ErrNotFound, name)
	}
	return f, err
}

func (s *Server) handleFleetGet(w http.ResponseWriter, r *http.Request, u *store.User) {
	f, err := s.fleetVisible(r.Context(), u, r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.apiFleet(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleFleetList(w http.ResponseWriter, r *http.Request, u *store.User) {
	fs, err := s.store.ListFleets(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := []api.Fleet{}
	for _, f := range fs {
		if u == nil || !s.mayRead(u, f.ProjectID) {
			continue
		}
		af, err := s.apiFleet(r.Context(), f)
		if err != nil {
			writeError(w, err)
			return
		}
		out = append(out, af)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleFleetDelete(w http.ResponseWriter, r *http.Request, u *store.User) {
	ctx := r.Context()
	force, _ := strconv.ParseBool(r.URL.Query().Get("force"))
	s.fleets.mu.Lock()
	defer s.fleets.mu.Unlock()
	f, err := s.fleetVisible(ctx, u, r.PathValue("name"))
	if err == nil && !s.mayAdmin(u, f.ProjectID) {
		err = fmt.Errorf("%w: deleting project %s's fleets takes its admin role", ErrForbidden, s.projectName(ctx, f.ProjectID))
	}
	var rec *fleetRecord
	if err == nil {
		rec, _, err = readRecord(f)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	for _, h := range rec.Hosts {
		if h.State != api.HostRemoved {
			h.State, h.Message = api.HostRemoving, ""
		}
	}
	rec.Force = rec.Force || force
	hj, _ := json.Marshal(rec)
	if err := s.store.SetFleetState(ctx, f.Name, api.FleetDeleting, string(hj)); err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("fleet delete", "fleet", f.Name, "by", u.Name, "force", force)
	s.kickFleet(f.Name)
	f.Status, f.Hosts = api.FleetDeleting, string(hj)
	out, err := s.apiFleet(ctx, f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, out)
}

// fleetWorkers runs one worker per fleet with work to do. kickFleet asks
// for a fleet's worker; fleetLoop (started by Run, which gives it the
// server's context) starts them, and at its start takes up every fleet a
// previous process left unfinished.
type fleetWorkers struct {
	mu      sync.Mutex // one apply or delete at a time (handlers)
	once    sync.Once
	wake    chan struct{}
	pmu     sync.Mutex
	pending map[string]bool
	running map[string]bool
}

func (fw *fleetWorkers) init() {
	fw.once.Do(func() {
		fw.wake = make(chan struct{}, 1)
		fw.pending, fw.running = map[string]bool{}, map[string]bool{}
	})
}

func (s *Server) kickFleet(name string) {
	fw := &s.fleets
	fw.init()
	fw.pmu.Lock()
	fw.pending[name] = true
	fw.pmu.Unlock()
	select {
	case fw.wake <- struct{}{}:
	default:
	}
}

func (s *Server) fleetLoop(ctx context.Context) {
	fw := &s.fleets
	fw.init()
	go s.nodeSweepLoop(ctx) // nodes_remove.go
	if fs, err := s.store.ListFleets(ctx); err != nil {
		s.log.Error("fleets: cannot list the fleets to resume", "err", err)
	} else {
		for _, f := range fs {
			if f.Status == api.FleetProvisioning || f.Status == api.FleetDeleting {
				s.log.Info("fleet: resuming", "fleet", f.Name, "status", f.Status)
				s.kickFleet(f.Name)
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-fw.wake:
		}
		fw.pmu.Lock()
		for name := range fw.pending {
			if fw.running[name] {
				continue // it runs again when the running worker ends
			}
			delete(fw.pending, name)
			fw.running[name] = true
			go func() {
				s.fleetWork(ctx, name)
				fw.pmu.Lock()
				delete(fw.running, name)
				again := fw.pending[name]
				fw.pmu.Unlock()
				if again {
					select {
					case fw.wake <- struct{}{}:
					default:
					}
				}
			}()
		}
		fw.pmu.Unlock()
	}
}

// fleetSummary is a fleet's status from its hosts'.
func fleetSummary(rec *fleetRecord) (status, msg string) {
	var failed []string
	for _, h := range rec.Hosts {
		if h.State == api.HostFailed {
			failed = append(failed, h.Node)
		}
	}
	switch {
	case len(rec.Hosts) > 0 && len(failed) == len(rec.Hosts):
		return api.FleetFailed, "every host failed"
	case len(failed) > 0:
		return api.FleetActive, fmt.Sprintf("%d of %d hosts failed: %s", len(failed), len(rec.Hosts), strings.Join(failed, ", "))
	}
	return api.FleetActive, ""
}

// applyHandler serves a POST of an apply request (a fleet's, a volume's):
// the body decoded into Req, apply's answer written with its status.
func applyHandler[Req any](apply func(context.Context, *store.User, *Req) (any, int, error)) func(http.ResponseWriter, *http.Request, *store.User) {
	return func(w http.ResponseWriter, r *http.Request, u *store.User) {
		var req Req
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
		out, status, err := apply(r.Context(), u, &req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, status, out)
	}
}
