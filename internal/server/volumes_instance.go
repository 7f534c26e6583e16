package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Instance volumes (issue 17): `type: volume` with `node` and `path` names
// a directory on one node. No provider makes it: applying it records it
// (active at once), deleting it forgets it and leaves the directory and
// its data on the node. A run that mounts it by name is resolved at
// submission (resolveInstanceVolumes): the mount gets the host directory
// (spec.Volume.InstancePath beside its Name) and the run's nodelist
// becomes that node, so the scheduler places it only there and the plan
// says why other nodes do not fit, as for `-w NODE`. From there it is an
// ordinary instance mount: a native job's mount namespace
// (internal/agent/mountns.go; a node that cannot make one lacks
// sched.MountsFeature and the plan says so) or a container's bind mount.
//
// The directory is resolved once, at submission: a waiting run keeps the
// node and path it was given even if the volume is deleted (delete is
// refused while an active run mounts it; one submitted in between is
// caught by resolveInstanceVolumes' re-check under vols.mu).

// instanceBackend is an instance volume's backend in the store (its rows'
// `backend`, migration 00016) and in the API.
const (
	instanceBackend    = "local"
	instanceBackendAPI = "instance"
)

// applyInstanceVolume records instance volume c of project pid: its node
// must be known to the cluster; a volume of that name is changed only by
// deleting it first.
func (s *Server) applyInstanceVolume(ctx context.Context, u *store.User, c *spec.VolumeConfig, pid int64, pname string, plan bool) (any, int, error) {
	s.mu.Lock()
	nodes := s.Nodes()
	s.unlock()
	if !slices.ContainsFunc(nodes, func(n api.Node) bool { return n.Name == c.Node }) {
		var have []string
		for _, n := range nodes {
			have = append(have, n.Name)
		}
		return nil, 0, fmt.Errorf("%w: node: %q is not a node of this cluster (nodes: %s; berth fleet lists them)", ErrInvalid, c.Node, cmpOr(strings.Join(have, ", "), "none"))
	}
	s.vols.mu.Lock()
	defer s.vols.mu.Unlock()
	old, err := s.findVolume(ctx, pid, c.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, 0, err
	}
	if plan {
		p := api.VolumePlan{Name: c.Name, Project: pname, Exists: old != nil}
		if old != nil {
			av := s.apiVolume(ctx, old, nil)
			p.Volume = &av
		}
		return p, http.StatusOK, nil
	}
	if old != nil {
		if old.Backend == instanceBackend && old.Node == c.Node && old.Path == c.Path && old.State == api.VolumeActive {
			return s.apiVolume(ctx, old, nil), http.StatusOK, nil
		}
		where := old.Backend
		if old.Backend == instanceBackend {
			where = old.Node + ":" + old.Path
		}
		return nil, 0, fmt.Errorf("%w: volume %s exists (%s): a volume is not changed in place; delete it first (berth volume delete %s)", ErrConflict, c.Name, where, c.Name)
	}
	v := &store.Volume{ProjectID: pid, Name: c.Name, Backend: instanceBackend, Node: c.Node, Path: c.Path, State: api.VolumeActive}
	if err := s.store.PutVolume(ctx, v); err != nil {
		return nil, 0, err
	}
	s.vols.set(pname, c.Name, v.State)
	s.log.Info("instance volume recorded", "volume", c.Name, "project", pname, "by", u.Name, "node", c.Node, "path", c.Path)
	s.wakeScheduler()
	return s.apiVolume(ctx, v, nil), http.StatusCreated, nil
}

// resolveInstanceVolumes gives each of t's mounts that names an instance
// volume of project pid its host directory, and pins t to the volume's
// node. A run of several nodes, one whose nodelist leaves the node out,
// and one with instance volumes on two nodes are refused: no placement
// could give them the volume. Volumes being deleted are refused too.
func (s *Server) resolveInstanceVolumes(ctx context.Context, t *spec.Task, pid int64) error {
	if !slices.ContainsFunc(t.Volumes, spec.Volume.IsNetwork) {
		return nil
	}
	// Under vols.mu, so that a delete that has checked its users (under
	// the same lock) has also removed the row: the run sees it gone.
	s.vols.mu.Lock()
	defer s.vols.mu.Unlock()
	rows, err := s.store.ListVolumes(ctx, pid)
	if err != nil {
		return err
	}
	find := func(name string) *store.Volume {
		i := slices.IndexFunc(rows, func(v *store.Volume) bool { return v.Name == name })
		if i < 0 {
			return nil
		}
		return rows[i]
	}
	node := ""
	for i := range t.Volumes {
		v := &t.Volumes[i]
		if !v.IsNetwork() {
			continue
		}
		for _, n := range v.NetworkNames() {
			if row := find(n); row != nil && row.State == api.VolumeDeleting {
				return fmt.Errorf("%w: volumes[%d]: volume %s is being deleted", ErrConflict, i, n)
			}
		}
		var inst *store.Volume
		for _, n := range v.NetworkNames() {
			if row := find(n); row != nil && row.Backend == instanceBackend {
				inst = row
			}
		}
		if inst == nil {
			continue
		}
		switch {
		case len(v.NetworkNames()) > 1:
			return fmt.Errorf("%w: volumes[%d]: %s is an instance volume (a directory on node %s): it cannot be one of several names; name it alone",
				ErrInvalid, i, inst.Name, inst.Node)
		case t.JobCount() > 1:
			return fmt.Errorf("%w: volumes[%d]: %s is an instance volume, a directory on node %s only: a run of %d nodes cannot mount it (use a network volume, or nodes: 1)",
				ErrInvalid, i, inst.Name, inst.Node, t.JobCount())
		case node != "" && node != inst.Node:
			return fmt.Errorf("%w: volumes[%d]: %s is an instance volume on node %s, another volume of the run is on node %s: no node has both",
				ErrInvalid, i, inst.Name, inst.Node, node)
		case len(t.Nodelist) > 0 && !slices.Equal(t.Nodelist, []string{inst.Node}):
			return fmt.Errorf("%w: volumes[%d]: %s is an instance volume on node %s, which the run's nodelist (%s) does not name alone",
				ErrInvalid, i, inst.Name, inst.Node, strings.Join(t.Nodelist, ","))
		case slices.Contains(t.Exclude, inst.Node):
			return fmt.Errorf("%w: volumes[%d]: %s is an instance volume on node %s, which the run excludes", ErrInvalid, i, inst.Name, inst.Node)
		}
		node = inst.Node
		v.Name, v.Names, v.InstancePath = inst.Name, nil, inst.Path
	}
	if node != "" {
		t.Nodelist = []string{node}
	}
	if t.Image != "" {
		return s.resolveEngineVolumes(ctx, t, find)
	}
	return nil
}

// engineProvider is a provider whose volumes live on a container engine
// that nodes may share (the Docker provider: its engine's ID).
type engineProvider interface {
	EngineID(ctx context.Context) (string, error)
}

// resolveEngineVolumes gives each network volume of container run t
// whose volume is active on a Docker engine its engine volume
// (spec.Volume.EngineVolume, the provider's name for it), and asks for
// nodes of that engine (sched.EngineFeature in t.Constraint): the node's
// engine then mounts the volume into the run's container, whether the
// node was started by hand, by an SSH fleet or by a backend. Volumes it
// cannot resolve stay network volumes (admitVolumes refuses them with
// why). Called under vols.mu.
func (s *Server) resolveEngineVolumes(ctx context.Context, t *spec.Task, find func(string) *store.Volume) error {
	for i := range t.Volumes {
		v := &t.Volumes[i]
		if !v.IsNetwork() {
			continue
		}
		for _, n := range v.NetworkNames() {
			row := find(n)
			if row == nil || row.State != api.VolumeActive || row.Backend == instanceBackend {
				continue
			}
			id, err := s.engineOf(ctx, row.Backend)
			if err != nil {
				return err
			}
			if id == "" {
				continue
			}
			v.Name, v.Names, v.EngineVolume = n, nil, row.ProviderName
			if f := sched.EngineFeature + id; !slices.Contains(t.Constraint, f) {
				t.Constraint = append(t.Constraint, f)
			}
			break
		}
	}
	return nil
}

// engineOf is the engine ID of backend's provider ("" when it has none),
// asked once per provider. Called under vols.mu.
func (s *Server) engineOf(ctx context.Context, backend string) (string, error) {
	if id, ok := s.vols.engines[backend]; ok {
		return id, nil
	}
	p, err := provider.Find(s.cfg.Providers, backend)
	if err != nil {
		return "", nil // not configured now: nothing to attach through
	}
	ep, ok := p.(engineProvider)
	if !ok {
		return "", nil
	}
	id, err := ep.EngineID(ctx)
	if err != nil {
		return "", fmt.Errorf("backend %s: %w", backend, err)
	}
	if s.vols.engines == nil {
		s.vols.engines = map[string]string{}
	}
	s.vols.engines[backend] = id
	return id, nil
}

// instanceVolumeNotes are the plan's words on t's instance volumes: where
// they pin the run.
func instanceVolumeNotes(t *spec.Task) []string {
	var out []string
	for _, v := range t.Volumes {
		if v.Name != "" && v.InstancePath != "" && len(t.Nodelist) == 1 {
			out = append(out, fmt.Sprintf("volume %s is an instance volume, directory %s on node %s: the run goes to that node only", v.Name, v.InstancePath, t.Nodelist[0]))
		}
	}
	return out
}

// hasNode reports whether the cluster has a node of that name.
func (s *Server) hasNode(name string) bool {
	s.mu.Lock()
	nodes := s.Nodes()
	s.unlock()
	return slices.ContainsFunc(nodes, func(n api.Node) bool { return n.Name == name })
}
