package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Secrets (issue 15), on either database: the statements are written with
// ? and sent through q. The store keeps ciphertexts only; sealing and
// opening them is the server's (internal/server/secrets.go).

const secretCols = `project_id, name, value, set_by, created_at, updated_at`

func scanSecret(sc scanner) (*Secret, error) {
	var x Secret
	var created, updated int64
	if err := sc.Scan(&x.ProjectID, &x.Name, &x.Value, &x.SetBy, &created, &updated); err != nil {
		return nil, err
	}
	x.CreatedAt, x.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &x, nil
}

// PutSecret creates the secret or replaces its value (and SetBy).
func (s *sqlDB) PutSecret(ctx context.Context, x *Secret) error {
	now := time.Now().UnixNano()
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO secrets (`+secretCols+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, name) DO UPDATE SET value = excluded.value, set_by = excluded.set_by, updated_at = excluded.updated_at`),
		x.ProjectID, x.Name, x.Value, x.SetBy, now, now)
	if err != nil {
		return fmt.Errorf("store: secret %q: %w", x.Name, err)
	}
	return nil
}

// GetSecret returns one secret of a project.
func (s *sqlDB) GetSecret(ctx context.Context, projectID int64, name string) (*Secret, error) {
	x, err := scanSecret(s.r.QueryRowContext(ctx, s.q(`SELECT `+secretCols+` FROM secrets WHERE project_id = ? AND name = ?`), projectID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("secret %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: secret %q: %w", name, err)
	}
	return x, nil
}

// ListSecrets lists a project's secrets by name, or with projectID 0
// every project's, by project and name.
func (s *sqlDB) ListSecrets(ctx context.Context, projectID int64) ([]*Secret, error) {
	q, args := `SELECT `+secretCols+` FROM secrets ORDER BY project_id, name`, []any{}
	if projectID != 0 {
		q, args = `SELECT `+secretCols+` FROM secrets WHERE project_id = ? ORDER BY name`, []any{projectID}
	}
	rows, err := s.r.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: secrets: %w", err)
	}
	defer rows.Close()
	var out []*Secret
	for rows.Next() {
		x, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("store: secrets: %w", err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// DeleteSecret removes a secret (ErrNotFound: there was none).
func (s *sqlDB) DeleteSecret(ctx context.Context, projectID int64, name string) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM secrets WHERE project_id = ? AND name = ?`), projectID, name)
	if err != nil {
		return fmt.Errorf("store: delete secret %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %q: %w", name, ErrNotFound)
	}
	return nil
}
