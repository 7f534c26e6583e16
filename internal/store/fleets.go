package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Fleets (issue 17), on either database. The store keeps the fleet's
// configuration and per-host state as the server's JSON, and the SSH key
// as a ciphertext only: sealing it is the server's (internal/server).

// Fleet is a fleet as stored.
type Fleet struct {
	Name      string
	ProjectID int64
	Spec      string // JSON of spec.Fleet
	Status    string
	SSHKey    []byte // sealed; nil for none
	ServerURL string // the URL the fleet's agents reach the server at
	Hosts     string // JSON of the server's per-host state
	CreatedBy int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

const fleetCols = `name, project_id, spec, status, ssh_key, server_url, hosts, created_by, created_at, updated_at`

func scanFleet(sc scanner) (*Fleet, error) {
	var f Fleet
	var created, updated int64
	if err := sc.Scan(&f.Name, &f.ProjectID, &f.Spec, &f.Status, &f.SSHKey, &f.ServerURL, &f.Hosts, &f.CreatedBy, &created, &updated); err != nil {
		return nil, err
	}
	f.CreatedAt, f.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &f, nil
}

// PutFleet creates the fleet or replaces every field but its creator and
// creation time.
func (s *sqlDB) PutFleet(ctx context.Context, f *Fleet) error {
	now := time.Now().UnixNano()
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO fleets (`+fleetCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET project_id = excluded.project_id, spec = excluded.spec, status = excluded.status,
		ssh_key = excluded.ssh_key, server_url = excluded.server_url, hosts = excluded.hosts, updated_at = excluded.updated_at`),
		f.Name, f.ProjectID, f.Spec, f.Status, f.SSHKey, f.ServerURL, f.Hosts, f.CreatedBy, now, now)
	if err != nil {
		return fmt.Errorf("store: fleet %q: %w", f.Name, err)
	}
	return nil
}

// SetFleetState records a fleet's status and hosts' state.
func (s *sqlDB) SetFleetState(ctx context.Context, name, status, hosts string) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE fleets SET status = ?, hosts = ?, updated_at = ? WHERE name = ?`),
		status, hosts, time.Now().UnixNano(), name)
	if err != nil {
		return fmt.Errorf("store: fleet %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("fleet %q: %w", name, ErrNotFound)
	}
	return nil
}

// GetFleet returns one fleet.
func (s *sqlDB) GetFleet(ctx context.Context, name string) (*Fleet, error) {
	f, err := scanFleet(s.r.QueryRowContext(ctx, s.q(`SELECT `+fleetCols+` FROM fleets WHERE name = ?`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("fleet %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: fleet %q: %w", name, err)
	}
	return f, nil
}

// ListFleets lists every fleet by name.
func (s *sqlDB) ListFleets(ctx context.Context) ([]*Fleet, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+fleetCols+` FROM fleets ORDER BY name`))
	if err != nil {
		return nil, fmt.Errorf("store: fleets: %w", err)
	}
	defer rows.Close()
	var out []*Fleet
	for rows.Next() {
		f, err := scanFleet(rows)
		if err != nil {
			return nil, fmt.Errorf("store: fleets: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// DeleteFleet removes a fleet (ErrNotFound: there was none).
func (s *sqlDB) DeleteFleet(ctx context.Context, name string) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM fleets WHERE name = ?`), name)
	if err != nil {
		return fmt.Errorf("store: delete fleet %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("fleet %q: %w", name, ErrNotFound)
	}
	return nil
}
