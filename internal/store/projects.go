package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Projects and their members (issue 15's projects and roles), on either
// database: the statements are written with ? and sent through q.

// Project is a tenant (a Slurm account): its runs, members and settings.
type Project struct {
	ID        int64
	Name      string
	CreatedAt time.Time
}

// Member is a user's membership of a project, with its role (admin,
// manager or user).
type Member struct {
	ProjectID int64
	Project   string
	UserID    int64
	User      string
	Role      string
	CreatedAt time.Time
}

const projectCols = `id, name, created_at`

func scanProject(sc scanner) (*Project, error) {
	var p Project
	var created int64
	if err := sc.Scan(&p.ID, &p.Name, &created); err != nil {
		return nil, err
	}
	p.CreatedAt = fromNanos(created)
	return &p, nil
}

// CreateProject makes a project, or makes a deleted one live again (with
// no members); a live project of that name is ErrExists.
func (s *sqlDB) CreateProject(ctx context.Context, name string) (*Project, error) {
	now := time.Now().UnixNano()
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE projects SET deleted_at = 0, created_at = ? WHERE name = ? AND deleted_at <> 0`), now, name)
	if err != nil {
		return nil, fmt.Errorf("store: create project %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		res, err = s.w.ExecContext(ctx, s.q(`INSERT INTO projects (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`), name, now)
		if err != nil {
			return nil, fmt.Errorf("store: create project %q: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, fmt.Errorf("project %q: %w", name, ErrExists)
		}
	}
	return scanProject(s.w.QueryRowContext(ctx, s.q(`SELECT `+projectCols+` FROM projects WHERE name = ?`), name))
}

// ProjectByName returns a live project (a deleted one is ErrNotFound).
func (s *sqlDB) ProjectByName(ctx context.Context, name string) (*Project, error) {
	p, err := scanProject(s.r.QueryRowContext(ctx, s.q(`SELECT `+projectCols+` FROM projects WHERE name = ? AND deleted_at = 0`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("project %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: project %q: %w", name, err)
	}
	return p, nil
}

// ListProjects lists the live projects by name.
func (s *sqlDB) ListProjects(ctx context.Context) ([]*Project, error) {
	return query(ctx, s.r, scanProject, s.q(`SELECT `+projectCols+` FROM projects WHERE deleted_at = 0 ORDER BY name`))
}

// DeleteProject marks a project deleted and removes its members, in one
// transaction; its row stays, for its runs.
func (s *sqlDB) DeleteProject(ctx context.Context, name string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete project: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.q(`UPDATE projects SET deleted_at = ? WHERE name = ? AND deleted_at = 0`), time.Now().UnixNano(), name)
	if err != nil {
		return fmt.Errorf("store: delete project %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("project %q: %w", name, ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM project_members WHERE project_id = (SELECT id FROM projects WHERE name = ?)`), name); err != nil {
		return fmt.Errorf("store: delete project %q: %w", name, err)
	}
	return tx.Commit()
}

// SetMember makes the user a member of the project with role, or changes
// the role of a member.
func (s *sqlDB) SetMember(ctx context.Context, projectID, userID int64, role string) error {
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO project_members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role`), projectID, userID, role, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("store: set member: %w", err)
	}
	return nil
}

// AddMember makes the user a member of the project with role unless they
// are one already (whose role stays); it reports whether it added them.
func (s *sqlDB) AddMember(ctx context.Context, projectID, userID int64, role string) (bool, error) {
	res, err := s.w.ExecContext(ctx, s.q(`INSERT INTO project_members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (project_id, user_id) DO NOTHING`), projectID, userID, role, time.Now().UnixNano())
	if err != nil {
		return false, fmt.Errorf("store: add member: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// RemoveMember ends a membership (none: ErrNotFound).
func (s *sqlDB) RemoveMember(ctx context.Context, projectID, userID int64) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM project_members WHERE project_id = ? AND user_id = ?`), projectID, userID)
	if err != nil {
		return fmt.Errorf("store: remove member: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("member: %w", ErrNotFound)
	}
	return nil
}

func scanMember(sc scanner) (*Member, error) {
	var m Member
	var created int64
	if err := sc.Scan(&m.ProjectID, &m.Project, &m.UserID, &m.User, &m.Role, &created); err != nil {
		return nil, err
	}
	m.CreatedAt = fromNanos(created)
	return &m, nil
}

// ListMembers lists the memberships of live users in live projects, by
// project and user name: of one project (projectID), of one user
// (userID), or every one (both 0).
func (s *sqlDB) ListMembers(ctx context.Context, projectID, userID int64) ([]*Member, error) {
	q := `SELECT m.project_id, p.name, m.user_id, u.name, m.role, m.created_at
  FROM project_members m JOIN projects p ON p.id = m.project_id JOIN users u ON u.id = m.user_id
  WHERE p.deleted_at = 0 AND u.deleted_at = 0`
	var args []any
	if projectID != 0 {
		q += ` AND m.project_id = ?`
		args = append(args, projectID)
	}
	if userID != 0 {
		q += ` AND m.user_id = ?`
		args = append(args, userID)
	}
	return query(ctx, s.r, scanMember, s.q(q+` ORDER BY p.name, u.name`), args...)
}
