package store

import (
	"context"
	"fmt"
	"time"
)

// Backend fleets' instances and volumes (issue 17), on either database.

// Instance is one machine a provider lent (see migration 00016).
type Instance struct {
	Key       string // the idempotency key given to the provider
	Fleet     string
	Backend   string
	Offer     string // provider.Offer as JSON
	Node      string
	State     string // provider.RecordState
	Detail    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Volume is a volume of a project.
type Volume struct {
	ProjectID    int64
	Name         string
	Backend      string // "local": a host path on Node
	ProviderName string
	Node         string
	Path         string
	Size         int64
	State        string
	CreatedAt    time.Time
	// Region is where the provider made it; External: registered by
	// volume_id, so deleting it forgets the row and keeps the volume;
	// Detail is the provider's last error (migration 00024).
	Region   string
	External bool
	Detail   string
	// AutoCleanup deletes it once unused that long (seconds; 0: never),
	// counted from LastUsed: when an active run last mounted it (zero:
	// never; migration 00035).
	AutoCleanup int64
	LastUsed    time.Time
}

// CloudStore keeps instances and volumes.
type CloudStore interface {
	// CreateInstance records an instance about to be created; a key that
	// exists is ErrExists.
	CreateInstance(ctx context.Context, x *Instance) error
	// SetInstanceState changes an instance's state and detail (ErrNotFound:
	// no such key).
	SetInstanceState(ctx context.Context, key, state, detail string) error
	// ListInstances lists the instances not gone (all: gone ones too), by
	// creation.
	ListInstances(ctx context.Context, all bool) ([]*Instance, error)
	// PutVolume creates or replaces a volume's row.
	PutVolume(ctx context.Context, v *Volume) error
	// ListVolumes lists a project's volumes by name (0: every project's).
	ListVolumes(ctx context.Context, projectID int64) ([]*Volume, error)
	// DeleteVolume removes a volume's row (ErrNotFound: none).
	DeleteVolume(ctx context.Context, projectID int64, name string) error
}

const instanceCols = `key, fleet, backend, offer, node, state, detail, created_at, updated_at`

// CreateInstance records x (state as given, normally "creating").
func (s *sqlDB) CreateInstance(ctx context.Context, x *Instance) error {
	now := time.Now().UnixNano()
	res, err := s.w.ExecContext(ctx, s.q(`INSERT INTO instances (`+instanceCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (key) DO NOTHING`), x.Key, x.Fleet, x.Backend, x.Offer, x.Node, x.State, x.Detail, now, now)
	if err != nil {
		return fmt.Errorf("store: instance %q: %w", x.Key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: instance %q: %w", x.Key, ErrExists)
	}
	x.CreatedAt, x.UpdatedAt = fromNanos(now), fromNanos(now)
	return nil
}

// SetInstanceState moves an instance to state.
func (s *sqlDB) SetInstanceState(ctx context.Context, key, state, detail string) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE instances SET state = ?, detail = ?, updated_at = ? WHERE key = ?`), state, detail, time.Now().UnixNano(), key)
	if err != nil {
		return fmt.Errorf("store: instance %q: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: instance %q: %w", key, ErrNotFound)
	}
	return nil
}

// ListInstances lists instances by creation (then key).
func (s *sqlDB) ListInstances(ctx context.Context, all bool) ([]*Instance, error) {
	q := `SELECT ` + instanceCols + ` FROM instances WHERE state <> 'gone' ORDER BY created_at, key`
	if all {
		q = `SELECT ` + instanceCols + ` FROM instances ORDER BY created_at, key`
	}
	rows, err := s.r.QueryContext(ctx, s.q(q))
	if err != nil {
		return nil, fmt.Errorf("store: instances: %w", err)
	}
	defer rows.Close()
	var out []*Instance
	for rows.Next() {
		var x Instance
		var created, updated int64
		if err := rows.Scan(&x.Key, &x.Fleet, &x.Backend, &x.Offer, &x.Node, &x.State, &x.Detail, &created, &updated); err != nil {
			return nil, fmt.Errorf("store: instances: %w", err)
		}
		x.CreatedAt, x.UpdatedAt = fromNanos(created), fromNanos(updated)
		out = append(out, &x)
	}
	return out, rows.Err()
}

const volumeCols = `project_id, name, backend, provider_name, node, path, size, state, created_at, region, external, detail, auto_cleanup, last_used`

// PutVolume creates or replaces v's row.
func (s *sqlDB) PutVolume(ctx context.Context, v *Volume) error {
	if v.CreatedAt.IsZero() {
		v.CreatedAt = time.Now()
	}
	external := 0
	if v.External {
		external = 1
	}
	var lastUsed int64
	if !v.LastUsed.IsZero() {
		lastUsed = v.LastUsed.UnixNano()
	}
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO volumes (`+volumeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, name) DO UPDATE SET backend = excluded.backend, provider_name = excluded.provider_name,
		node = excluded.node, path = excluded.path, size = excluded.size, state = excluded.state,
		region = excluded.region, external = excluded.external, detail = excluded.detail, auto_cleanup = excluded.auto_cleanup,
		last_used = excluded.last_used`),
		v.ProjectID, v.Name, v.Backend, v.ProviderName, v.Node, v.Path, v.Size, v.State, v.CreatedAt.UnixNano(), v.Region, external, v.Detail, v.AutoCleanup, lastUsed)
	if err != nil {
		return fmt.Errorf("store: volume %q: %w", v.Name, err)
	}
	return nil
}

// ListVolumes lists volumes by project and name.
func (s *sqlDB) ListVolumes(ctx context.Context, projectID int64) ([]*Volume, error) {
	q, args := `SELECT `+volumeCols+` FROM volumes ORDER BY project_id, name`, []any{}
	if projectID != 0 {
		q, args = `SELECT `+volumeCols+` FROM volumes WHERE project_id = ? ORDER BY name`, []any{projectID}
	}
	rows, err := s.r.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: volumes: %w", err)
	}
	defer rows.Close()
	var out []*Volume
	for rows.Next() {
		var v Volume
		var created, external, lastUsed int64
		if err := rows.Scan(&v.ProjectID, &v.Name, &v.Backend, &v.ProviderName, &v.Node, &v.Path, &v.Size, &v.State, &created, &v.Region, &external, &v.Detail, &v.AutoCleanup, &lastUsed); err != nil {
			return nil, fmt.Errorf("store: volumes: %w", err)
		}
		v.CreatedAt, v.External = fromNanos(created), external != 0
		if lastUsed != 0 {
			v.LastUsed = fromNanos(lastUsed)
		}
		out = append(out, &v)
	}
	return out, rows.Err()
}

// DeleteVolume removes a volume's row.
func (s *sqlDB) DeleteVolume(ctx context.Context, projectID int64, name string) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM volumes WHERE project_id = ? AND name = ?`), projectID, name)
	if err != nil {
		return fmt.Errorf("store: delete volume %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: volume %q: %w", name, ErrNotFound)
	}
	return nil
}
