package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Network volumes (issue 17): `type: volume` makes one through a
// provider, for a project; a run's `volumes: [NAME:/path]` mounts it.
//
// Crash safety is the instances' order (cloud.go): the volume's row is
// written (status submitted, with the provider's name for it chosen)
// before the provider is asked to create it, and becomes active after; a
// delete marks the row deleting before the provider is asked, and removes
// it after. reconcileVolumes, at start and every half minute, finishes
// whatever a killed server left: a submitted row is created (the
// provider's create is idempotent by name, so nothing is doubled), a
// deleting one deleted. A provider volume no row names is logged, not
// destroyed: only a lost database makes one, and it holds data.
//
// Attachment: a provider attaches a volume when it creates an instance
// (provider.Bootstrap.Volumes; the Docker provider mounts the Docker volume
// into the instance's container at the run's path). So a run that mounts
// a network volume asks for a node that has it at that path (a feature,
// control/volumes.go); when none has, the autoscaler creates a node of a
// backend fleet with the volume attached, once the volume is active. Until
// the volume is active the run waits with reason WaitingForVolume.

// ReasonWaitingForVolume is a waiting run's reason while a network volume
// it mounts does not exist or is not active yet.
const ReasonWaitingForVolume = "WaitingForVolume"

// volumeState is the volumes' memory: one apply or delete at a time, and
// each volume's status for the waiting runs' reasons (rebuilt from the
// store by every reconcile).
type volumeState struct {
	mu sync.Mutex // applies, deletes and reconciles, one at a time
	// admit is held (read) by each submission from admission to its
	// commit, and (write) by a delete from its check of the volume's users
	// to the row's removal, so a run is either seen by that check or sees
	// the volume gone. Taken before mu.
	admit  sync.RWMutex
	smu    sync.Mutex
	status map[string]string // "project/name" → status
	// engines are the providers' container engine IDs, by backend
	// (volumes_instance.go; under mu).
	engines map[string]string
}

func (vs *volumeState) set(project, name, status string) {
	vs.smu.Lock()
	defer vs.smu.Unlock()
	if vs.status == nil {
		vs.status = map[string]string{}
	}
	if status == "" {
		delete(vs.status, project+"/"+name)
		return
	}
	vs.status[project+"/"+name] = status
}

func (vs *volumeState) get(project, name string) string {
	vs.smu.Lock()
	defer vs.smu.Unlock()
	return vs.status[project+"/"+name]
}

func (s *Server) volumeRoutes(mux *http.ServeMux, v string) {
	mux.HandleFunc("POST "+v+"/volumes", s.auth(applyHandler(s.applyVolume)))
	mux.HandleFunc("GET "+v+"/volumes", s.auth(s.handleVolumeList))
	mux.HandleFunc("DELETE "+v+"/volumes/{name}", s.auth(s.handleVolumeDelete))
}

// admitVolumes checks a run's volumes against what the server can do,
// and names the run's project in it when it mounts a network volume (the
// volume is the project's: control/volumes.go makes the feature of it).
func (s *Server) admitVolumes(ctx context.Context, t *spec.Task, pid int64, project string) error {
	for i, v := range t.Volumes {
		if v.EngineVolume != "" {
			return fmt.Errorf("%w: volumes[%d].engine_volume: set by the server, not by a configuration; name the volume (`name`)", ErrInvalid, i)
		}
	}
	if err := s.resolveInstanceVolumes(ctx, t, pid); err != nil { // volumes_instance.go
		return err
	}
	for i, v := range t.Volumes {
		if !v.IsNetwork() {
			continue
		}
		if t.Image != "" { // resolveEngineVolumes gave it an engine volume if it could
			return fmt.Errorf("%w: volumes[%d]: network volume %s: a run with `image:` mounts a network volume only when the volume is active and its backend is a Docker engine the nodes can share (Berth's docker backend): it is %s; apply it first (berth apply -f vol.yml), or drop `image:` to run on a backend node created with it",
				ErrInvalid, i, strings.Join(v.NetworkNames(), ", "), cmpOr(s.vols.get(project, v.NetworkNames()[0]), "not a volume of project "+project))
		}
		for _, n := range v.NetworkNames() {
			if strings.Contains(n, "${{") {
				return fmt.Errorf("%w: volumes[%d]: %s: a volume per node (`${{ dstack.node_rank }}`) is not supported by Berth yet", ErrInvalid, i, n)
			}
		}
		if strings.ContainsAny(v.Path, ",|\"") {
			return fmt.Errorf("%w: volumes[%d].path: %q: a network volume's path may not contain ',', '|' or '\"'", ErrInvalid, i, v.Path)
		}
		t.Project = project
	}
	return nil
}

// volumeReason is a waiting run's reason as the API shows it:
// WaitingForVolume while a network volume it mounts is not active.
func (s *Server) volumeReason(t *spec.Task, project, reason string) string {
	switch reason {
	case string(lifecycle.ReasonResources), string(lifecycle.ReasonProvisioningNodes), sched.ReasonNoNode:
	default:
		return reason
	}
	if t == nil {
		return reason
	}
	for _, v := range t.Volumes {
		if v.IsNetwork() && !slices.ContainsFunc(v.NetworkNames(), func(n string) bool { return s.vols.get(project, n) == api.VolumeActive }) {
			return ReasonWaitingForVolume
		}
	}
	return reason
}

// volumeNotes are the plan's words on t's network volumes that are not
// active: the run will wait for them.
func (s *Server) volumeNotes(t *spec.Task) []string {
	var out []string
	for _, v := range t.Volumes {
		if !v.IsNetwork() || slices.ContainsFunc(v.NetworkNames(), func(n string) bool { return s.vols.get(t.Project, n) == api.VolumeActive }) {
			continue
		}
		out = append(out, fmt.Sprintf("volume %s of project %s is not active (%s): the run waits for it (%s); create it with berth apply -f of a `type: volume`",
			strings.Join(v.NetworkNames(), " or "), t.Project, cmpOr(s.vols.get(t.Project, v.NetworkNames()[0]), "no such volume"), ReasonWaitingForVolume))
	}
	return out
}

// volumeBootstrap is what a node created for a run with request features
// must have attached: the first active volume of each network volume it
// mounts, and the features that say so. ok is false when the run cannot
// be helped by a new node now: a volume is not active, or it needs mount
// namespaces (which backend nodes, containers themselves, do not give).
func (s *Server) volumeBootstrap(ctx context.Context, features []string) (mounts []provider.VolumeMount, have []string, ok bool) {
	var rows []*store.Volume
	for _, f := range features {
		if f == sched.MountsFeature {
			return nil, nil, false
		}
		if !strings.HasPrefix(f, sched.VolumeFeature) {
			continue
		}
		if rows == nil {
			var err error
			if rows, err = s.store.ListVolumes(ctx, 0); err != nil {
				return nil, nil, false
			}
		}
		found := false
		for _, alt := range strings.Split(f, "|") {
			ref, path, _ := strings.Cut(strings.TrimPrefix(alt, sched.VolumeFeature), ":")
			project, name, _ := strings.Cut(ref, "/")
			i := slices.IndexFunc(rows, func(v *store.Volume) bool {
				// An instance volume is never attached by a backend: a run
				// submitted before it was applied keeps waiting (resolved
				// at submission only; volumes_instance.go).
				return v.Name == name && v.State == api.VolumeActive && v.Backend != instanceBackend && s.name(ctx, 'p', v.ProjectID) == project
			})
			if i >= 0 {
				mounts = append(mounts, provider.VolumeMount{Volume: rows[i].ProviderName, Path: path})
				have = append(have, alt)
				found = true
				break
			}
		}
		if !found {
			return nil, nil, false
		}
	}
	return mounts, have, true
}

func (s *Server) applyVolume(ctx context.Context, u *store.User, req *api.VolumeApplyRequest) (any, int, error) {
	c := req.Spec
	if c == nil {
		return nil, 0, fmt.Errorf("%w: no volume configuration (spec)", ErrInvalid)
	}
	if err := c.Validate(); err != nil {
		return nil, 0, fmt.Errorf("%w: %s", ErrInvalid, err)
	}
	if u == nil {
		return nil, 0, fmt.Errorf("%w: volumes are managed by users", ErrForbidden)
	}
	pid, pname, err := s.projectFor(ctx, u, c.Project)
	if err != nil {
		return nil, 0, err
	}
	if c.IsInstance() {
		return s.applyInstanceVolume(ctx, u, c, pid, pname, req.Plan) // volumes_instance.go
	}
	p, err := provider.Find(s.cfg.Providers, c.Backend)
	if err != nil {
		var have []string
		for _, p := range s.cfg.Providers {
			have = append(have, p.Name())
		}
		return nil, 0, fmt.Errorf("%w: backend: %q is not configured on this server (configured: %s; see the policy file's providers)", ErrInvalid, c.Backend, cmpOr(strings.Join(have, ", "), "none"))
	}
	if err := checkVolumeID(ctx, p, c); err != nil {
		return nil, 0, err
	}
	s.vols.mu.Lock()
	defer s.vols.mu.Unlock()
	old, err := s.findVolume(ctx, pid, c.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, 0, err
	}
	if req.Plan {
		plan := api.VolumePlan{Name: c.Name, Project: pname, Exists: old != nil}
		if old != nil {
			av := s.apiVolume(ctx, old, nil)
			plan.Volume = &av
		}
		return plan, http.StatusOK, nil
	}
	if old != nil {
		same := old.Backend == c.Backend && old.External == (c.VolumeID != "") && (c.VolumeID == "" || c.VolumeID == old.ProviderName) &&
			(c.Size == nil || int64(*c.Size) == old.Size) && old.AutoCleanup == autoCleanupOf(c)
		switch {
		case old.State == api.VolumeDeleting:
			return nil, 0, fmt.Errorf("%w: volume %s is being deleted; apply it again when it is gone", ErrConflict, c.Name)
		case !same:
			return nil, 0, fmt.Errorf("%w: volume %s exists (backend %s, size %s): a volume is not changed in place; delete it first (berth volume delete %s)",
				ErrConflict, c.Name, old.Backend, spec.Bytes(old.Size), c.Name)
		case old.State == api.VolumeActive:
			return s.apiVolume(ctx, old, nil), http.StatusOK, nil
		}
		// Submitted or failed: try again, under the same provider name.
	} else {
		old = &store.Volume{ProjectID: pid, Name: c.Name, Backend: c.Backend, ProviderName: c.VolumeID, External: c.VolumeID != ""}
		if c.Size != nil {
			old.Size = int64(*c.Size)
		}
		if old.ProviderName == "" {
			var b [4]byte
			_, _ = rand.Read(b[:])
			old.ProviderName = "berth-" + c.Name + "-" + hex.EncodeToString(b[:])
		}
	}
	old.State, old.Region, old.Detail, old.AutoCleanup = api.VolumeSubmitted, c.Region, "", autoCleanupOf(c)
	if err := s.store.PutVolume(ctx, old); err != nil {
		return nil, 0, err
	}
	s.vols.set(pname, c.Name, old.State)
	s.log.Info("volume recorded", "volume", c.Name, "project", pname, "by", u.Name, "backend", c.Backend, "provider_name", old.ProviderName)
	if err := s.createVolume(ctx, p, old, pname); err != nil {
		return nil, 0, err
	}
	return s.apiVolume(ctx, old, nil), http.StatusCreated, nil
}

// volumeGetter is a provider that can look up one volume by its name,
// whoever made it.
type volumeGetter interface {
	GetVolume(ctx context.Context, name string) (provider.Volume, error)
}

// checkVolumeID refuses a registration (volume_id) of a volume the
// provider does not have. A provider that cannot look one up is trusted.
func checkVolumeID(ctx context.Context, p provider.Provider, c *spec.VolumeConfig) error {
	g, ok := p.(volumeGetter)
	if c.VolumeID == "" || !ok {
		return nil
	}
	if _, err := g.GetVolume(ctx, c.VolumeID); errors.Is(err, provider.ErrNotFound) {
		return fmt.Errorf("%w: volume_id: %q: backend %s has no volume of that name (give the name of an existing one, or size: to create one)", ErrInvalid, c.VolumeID, c.Backend)
	} else if err != nil {
		return fmt.Errorf("volume_id: %q: %w", c.VolumeID, err)
	}
	return nil
}

func autoCleanupOf(c *spec.VolumeConfig) int64 {
	if d := c.AutoCleanupDuration; d != nil && *d > 0 {
		return int64(d.Bounded())
	}
	return 0
}

// createVolume asks the provider for the recorded volume v and records
// the answer: active, or failed with the provider's words.
func (s *Server) createVolume(ctx context.Context, p provider.Provider, v *store.Volume, project string) error {
	if d := s.cfg.CloudPauseAfterRecord; d > 0 {
		s.log.Info("volume: pausing between record and create", "volume", v.Name, "for", d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	v.State = api.VolumeActive
	if !v.External {
		got, err := p.CreateVolume(ctx, v.ProviderName, provider.Bytes(v.Size))
		if err != nil {
			v.State, v.Detail = api.VolumeFailed, err.Error()
		} else if got.Region != "" {
			v.Region = got.Region
		}
	}
	if err := s.store.PutVolume(context.WithoutCancel(ctx), v); err != nil {
		return err
	}
	s.vols.set(project, v.Name, v.State)
	s.log.Info("volume "+v.State, "volume", v.Name, "project", project, "detail", v.Detail)
	s.wakeScheduler() // runs waiting for it may be provisioned for now
	return nil
}

// findVolume is project pid's volume name.
func (s *Server) findVolume(ctx context.Context, pid int64, name string) (*store.Volume, error) {
	vs, err := s.store.ListVolumes(ctx, pid)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if v.Name == name {
			return v, nil
		}
	}
	return nil, fmt.Errorf("volume %s: %w", name, store.ErrNotFound)
}

// volumeUsers are the active runs of project pid that mount volume name,
// by name (or ID).
func (s *Server) volumeUsers(ctx context.Context, pid int64, name string) ([]string, error) {
	runs, err := s.store.ListRuns(ctx, store.RunFilter{ProjectID: pid})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range runs {
		var t spec.Task
		if json.Unmarshal(r.Spec, &t) != nil {
			continue
		}
		if slices.ContainsFunc(t.Volumes, func(v spec.Volume) bool { return slices.Contains(v.NetworkNames(), name) }) {
			out = append(out, cmpOr(r.Name, fmt.Sprint(r.ID)))
		}
	}
	return out, nil
}

// attachedNodes are the nodes that have volume name of project attached.
func (s *Server) attachedNodes(project, name string) []api.Node {
	prefix := control.VolumeFeatureOf(project, name, "")
	s.mu.Lock()
	nodes := s.Nodes()
	s.unlock()
	var out []api.Node
	for _, n := range nodes {
		if slices.ContainsFunc(n.Features, func(f string) bool { return strings.HasPrefix(f, prefix) }) {
			out = append(out, n)
		}
	}
	return out
}

func (s *Server) apiVolume(ctx context.Context, v *store.Volume, users []string) api.Volume {
	project := s.name(ctx, 'p', v.ProjectID)
	out := api.Volume{Name: v.Name, Project: project, Backend: v.Backend, Region: v.Region, Status: v.State, Size: v.Size,
		External: v.External, VolumeID: v.ProviderName, Message: v.Detail, CreatedAt: v.CreatedAt, UsedBy: users}
	if v.Backend == instanceBackend {
		out.Backend, out.Node, out.Path, out.Attached = instanceBackendAPI, v.Node, v.Path, []string{v.Node}
		if !s.hasNode(v.Node) {
			out.Message = "node " + v.Node + " is not in the cluster: runs that mount it cannot start (ReqNodeNotAvail) until it is back"
		}
		return out
	}
	for _, n := range s.attachedNodes(project, v.Name) {
		out.Attached = append(out.Attached, n.Name)
	}
	return out
}

func (s *Server) handleVolumeList(w http.ResponseWriter, r *http.Request, u *store.User) {
	ctx := r.Context()
	var pid int64
	if p := r.URL.Query().Get("project"); p != "" {
		var err error
		if pid, _, err = s.projectFor(ctx, u, p); err != nil {
			writeError(w, err)
			return
		}
	}
	vs, err := s.store.ListVolumes(ctx, pid)
	if err != nil {
		writeError(w, err)
		return
	}
	out := []api.Volume{}
	for _, v := range vs {
		if u == nil || !s.mayRead(u, v.ProjectID) {
			continue
		}
		users, err := s.volumeUsers(ctx, v.ProjectID, v.Name)
		if err != nil {
			writeError(w, err)
			return
		}
		out = append(out, s.apiVolume(ctx, v, users))
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Project < out[j].Project || out[i].Project == out[j].Project && out[i].Name < out[j].Name
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleVolumeDelete(w http.ResponseWriter, r *http.Request, u *store.User) {
	ctx := r.Context()
	name := r.PathValue("name")
	pid, pname, err := s.projectFor(ctx, u, r.URL.Query().Get("project"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.vols.admit.Lock()
	defer s.vols.admit.Unlock()
	s.vols.mu.Lock()
	defer s.vols.mu.Unlock()
	v, err := s.findVolume(ctx, pid, name)
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w: volume %s in project %s", ErrNotFound, name, pname)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	users, err := s.volumeUsers(ctx, pid, name)
	if err == nil && len(users) > 0 {
		err = fmt.Errorf("%w: volume %s is used by run %s: stop it first (berth stop NAME)", ErrConflict, name, strings.Join(users, ", "))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	v.State, v.Detail = api.VolumeDeleting, ""
	if err := s.store.PutVolume(ctx, v); err != nil {
		writeError(w, err)
		return
	}
	s.vols.set(pname, name, v.State)
	s.log.Info("volume delete", "volume", name, "project", pname, "by", u.Name)
	if err := s.deleteVolume(ctx, v, pname); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteVolume finishes the delete of v (recorded as deleting): the
// backend nodes it is attached to (idle, since no run uses it) are
// terminated, then the provider deletes it (a registered volume is only
// forgotten), then its row goes.
func (s *Server) deleteVolume(ctx context.Context, v *store.Volume, project string) error {
	fail := func(err error) error {
		v.Detail = err.Error()
		_ = s.store.PutVolume(context.WithoutCancel(ctx), v)
		return err
	}
	if nodes := s.attachedNodes(project, v.Name); len(nodes) > 0 && v.Backend != instanceBackend {
		recs, err := s.store.ListInstances(ctx, false)
		if err != nil {
			return fail(err)
		}
		for _, n := range nodes {
			i := slices.IndexFunc(recs, func(r *store.Instance) bool { return r.Node == n.Name })
			if i < 0 {
				continue // not a backend node: the provider says if it still holds it
			}
			if err := s.terminate(ctx, recs[i], "its volume "+v.Name+" is deleted"); err != nil { // cloud.go
				return fail(err)
			}
		}
	}
	if !v.External && v.Backend != instanceBackend { // an instance volume's directory stays on its node
		p, err := provider.Find(s.cfg.Providers, v.Backend)
		if err != nil {
			return fail(err)
		}
		if err := p.DeleteVolume(ctx, v.ProviderName); err != nil {
			return fail(err)
		}
	}
	if err := s.store.DeleteVolume(ctx, v.ProjectID, v.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.vols.set(project, v.Name, "")
	s.log.Info("volume deleted", "volume", v.Name, "project", project, "provider_name", v.ProviderName)
	return nil
}

// autoCleanup deletes active volume v once no active run has mounted it
// for its auto_cleanup_duration (dstack's), counted from its last use as
// stored (store.Volume.LastUsed, renewed by each reconcile that sees it
// used; never used: from its creation), so a restart neither restarts
// nor loses the count. The delete waits for no submission: when one is
// being admitted (volumeState.admit) it is left to the next reconcile.
func (s *Server) autoCleanup(ctx context.Context, v *store.Volume, project string) error {
	if v.AutoCleanup <= 0 {
		return nil
	}
	users, err := s.volumeUsers(ctx, v.ProjectID, v.Name)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	if len(users) > 0 {
		v.LastUsed = now
		return s.store.PutVolume(ctx, v)
	}
	since := v.LastUsed
	if since.IsZero() {
		since = v.CreatedAt
	}
	if now.Sub(since) < time.Duration(v.AutoCleanup)*time.Second {
		return nil
	}
	if !s.vols.admit.TryLock() {
		return nil // a submission is being admitted: it may mount it
	}
	defer s.vols.admit.Unlock()
	if users, err := s.volumeUsers(ctx, v.ProjectID, v.Name); err != nil || len(users) > 0 {
		return err
	}
	s.log.Info("volume: unused for its auto_cleanup_duration: deleting", "volume", v.Name, "project", project, "unused_since", since)
	v.State, v.Detail = api.VolumeDeleting, ""
	if err := s.store.PutVolume(ctx, v); err != nil {
		return err
	}
	s.vols.set(project, v.Name, v.State)
	return s.deleteVolume(ctx, v, project)
}

// volumeLoop reconciles the volumes at start and every half minute.
func (s *Server) volumeLoop(ctx context.Context) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		if err := s.reconcileVolumes(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("volumes: reconcile", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcileVolumes finishes what a killed server left (see the top) and
// refreshes the statuses the reasons read.
func (s *Server) reconcileVolumes(ctx context.Context) error {
	s.vols.mu.Lock()
	defer s.vols.mu.Unlock()
	vs, err := s.store.ListVolumes(ctx, 0)
	if err != nil {
		return err
	}
	var errs []error
	known := map[string]bool{}
	for _, v := range vs {
		known[v.Backend+"/"+v.ProviderName] = true
		project := s.name(ctx, 'p', v.ProjectID)
		s.vols.set(project, v.Name, v.State)
		switch v.State {
		case api.VolumeSubmitted:
			p, err := provider.Find(s.cfg.Providers, v.Backend)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.log.Info("volume: finishing a create after a restart", "volume", v.Name, "project", project)
			errs = append(errs, s.createVolume(ctx, p, v, project))
		case api.VolumeDeleting:
			s.log.Info("volume: finishing a delete", "volume", v.Name, "project", project)
			errs = append(errs, s.deleteVolume(ctx, v, project))
		case api.VolumeActive:
			errs = append(errs, s.autoCleanup(ctx, v, project))
		}
	}
	for _, p := range s.cfg.Providers {
		pvs, err := p.Volumes(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, pv := range pvs {
			if !known[p.Name()+"/"+pv.Name] {
				s.log.Warn("volume: the provider has a volume no record names; left in place (it may hold data)", "backend", p.Name(), "provider_name", pv.Name)
			}
		}
	}
	return errors.Join(errs...)
}
