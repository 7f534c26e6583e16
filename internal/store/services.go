package store

import (
	"context"
	"fmt"
	"time"
)

// Services (issue 16), on either database. A service's replicas are runs;
// this row is what the server keeps them to (internal/server/services.go).

// Service is a service as stored: the configuration its replicas must
// run (JSON, as a run's Spec) and how many of them are wanted.
type Service struct {
	ProjectID int64
	Name      string
	UserID    int64
	Spec      []byte
	Wanted    int
	CreatedAt time.Time
	UpdatedAt time.Time
}

const serviceCols = `project_id, name, user_id, spec, wanted, created_at, updated_at`

// PutService creates the service or replaces its spec, owner and wanted
// count (the creation time kept).
func (s *sqlDB) PutService(ctx context.Context, x *Service) error {
	now := time.Now().UnixNano()
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO services (`+serviceCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, name) DO UPDATE SET user_id = excluded.user_id, spec = excluded.spec, wanted = excluded.wanted, updated_at = excluded.updated_at`),
		x.ProjectID, x.Name, x.UserID, x.Spec, x.Wanted, now, now)
	if err != nil {
		return fmt.Errorf("store: service %q: %w", x.Name, err)
	}
	return nil
}

// SetServiceWanted changes a service's wanted count (ErrNotFound: none).
func (s *sqlDB) SetServiceWanted(ctx context.Context, projectID int64, name string, wanted int) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE services SET wanted = ?, updated_at = ? WHERE project_id = ? AND name = ?`),
		wanted, time.Now().UnixNano(), projectID, name)
	if err != nil {
		return fmt.Errorf("store: service %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("service %q: %w", name, ErrNotFound)
	}
	return nil
}

// ListServices lists every service, by project and name.
func (s *sqlDB) ListServices(ctx context.Context) ([]*Service, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+serviceCols+` FROM services ORDER BY project_id, name`))
	if err != nil {
		return nil, fmt.Errorf("store: services: %w", err)
	}
	defer rows.Close()
	var out []*Service
	for rows.Next() {
		var x Service
		var created, updated int64
		if err := rows.Scan(&x.ProjectID, &x.Name, &x.UserID, &x.Spec, &x.Wanted, &created, &updated); err != nil {
			return nil, fmt.Errorf("store: services: %w", err)
		}
		x.CreatedAt, x.UpdatedAt = fromNanos(created), fromNanos(updated)
		out = append(out, &x)
	}
	return out, rows.Err()
}

// DeleteService removes a service (ErrNotFound: there was none).
func (s *sqlDB) DeleteService(ctx context.Context, projectID int64, name string) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM services WHERE project_id = ? AND name = ?`), projectID, name)
	if err != nil {
		return fmt.Errorf("store: delete service %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("service %q: %w", name, ErrNotFound)
	}
	return nil
}
