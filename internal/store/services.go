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
	// ScaledAt is the autoscaler's last scaling event (an apply is one);
	// Fails the replicas that ended by themselves in a row, NotBefore
	// when the next may be submitted (zero: at once), and EndsSeen the
	// time up to which replicas' ends are counted in Fails. A restart
	// reads them back.
	ScaledAt  time.Time
	Fails     int
	NotBefore time.Time
	EndsSeen  time.Time
}

const serviceCols = `project_id, name, user_id, spec, wanted, created_at, updated_at, scaled_at, fails, not_before, ends_seen`

// PutService creates the service or replaces its spec, owner and wanted
// count (the creation time kept). It is a scaling event (scaled_at now),
// and starts the crash-loop count again (fails and not_before reset,
// ends_seen now).
func (s *sqlDB) PutService(ctx context.Context, x *Service) error {
	now := time.Now().UnixNano()
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO services (`+serviceCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?)
		ON CONFLICT (project_id, name) DO UPDATE SET user_id = excluded.user_id, spec = excluded.spec, wanted = excluded.wanted, updated_at = excluded.updated_at,
			scaled_at = excluded.scaled_at, fails = 0, not_before = 0, ends_seen = excluded.ends_seen`),
		x.ProjectID, x.Name, x.UserID, x.Spec, x.Wanted, now, now, now, now)
	if err != nil {
		return fmt.Errorf("store: service %q: %w", x.Name, err)
	}
	return nil
}

// SetServiceScale changes a service's wanted count, scaled at at
// (ErrNotFound: no such service).
func (s *sqlDB) SetServiceScale(ctx context.Context, projectID int64, name string, wanted int, at time.Time) error {
	return s.updateService(ctx, projectID, name, `wanted = ?, scaled_at = ?`, wanted, at.UnixNano())
}

// SetServiceBackoff records a service's crash-loop count, counting its
// replicas' ends up to endsSeen, and when its next replica may start
// (zero: at once; ErrNotFound: no such service).
func (s *sqlDB) SetServiceBackoff(ctx context.Context, projectID int64, name string, fails int, notBefore, endsSeen time.Time) error {
	return s.updateService(ctx, projectID, name, `fails = ?, not_before = ?, ends_seen = ?`, fails, nanosOrZero(notBefore), nanosOrZero(endsSeen))
}

// updateService sets cols (placeholders for args) of one service.
func (s *sqlDB) updateService(ctx context.Context, projectID int64, name, cols string, args ...any) error {
	args = append(args, time.Now().UnixNano(), projectID, name)
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE services SET `+cols+`, updated_at = ? WHERE project_id = ? AND name = ?`), args...)
	if err != nil {
		return fmt.Errorf("store: service %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("service %q: %w", name, ErrNotFound)
	}
	return nil
}

// nanosOrZero is t in Unix ns, 0 for the zero time.
func nanosOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
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
		var created, updated, scaled, notBefore, endsSeen int64
		if err := rows.Scan(&x.ProjectID, &x.Name, &x.UserID, &x.Spec, &x.Wanted, &created, &updated, &scaled, &x.Fails, &notBefore, &endsSeen); err != nil {
			return nil, fmt.Errorf("store: services: %w", err)
		}
		x.CreatedAt, x.UpdatedAt, x.ScaledAt = fromNanos(created), fromNanos(updated), fromNanos(scaled)
		x.NotBefore, x.EndsSeen = fromNanos(notBefore), fromNanos(endsSeen)
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
