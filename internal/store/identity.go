package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Users, tokens and the server's keys (issue 15's identity), on either
// database: the statements are written with ? and sent through q.

// AddToken stores the hash of a new token of the user.
func (s *sqlDB) AddToken(ctx context.Context, userID int64, hash, name string) error {
	return s.CreateToken(ctx, &Token{ID: NewTokenID(), Hash: hash, Name: name, UserID: userID})
}

// NewTokenID is a random public ID for a token.
func NewTokenID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// UserByToken resolves a token hash to its (live) user.
func (s *sqlDB) UserByToken(ctx context.Context, hash string) (*User, error) {
	_, u, err := s.TokenByHash(ctx, hash)
	if err == nil && u == nil {
		err = fmt.Errorf("token: a node's: %w", ErrNotFound)
	}
	return u, err
}

const userCols = `id, name, admin, created_at, deleted_at`

func scanUser(sc scanner) (*User, error) {
	var u User
	var admin int
	var created, deleted int64
	if err := sc.Scan(&u.ID, &u.Name, &admin, &created, &deleted); err != nil {
		return nil, err
	}
	u.Admin, u.CreatedAt, u.Deleted = admin == 1, fromNanos(created), deleted != 0
	return &u, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CreateUser makes a user, or revives a deleted one.
func (s *sqlDB) CreateUser(ctx context.Context, name string, admin bool) (*User, error) {
	now := time.Now().UnixNano()
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE users SET deleted_at = 0, admin = ?, created_at = ? WHERE name = ? AND deleted_at <> 0`),
		boolInt(admin), now, name)
	if err != nil {
		return nil, fmt.Errorf("store: create user %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		res, err = s.w.ExecContext(ctx, s.q(`INSERT INTO users (name, created_at, admin) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`),
			name, now, boolInt(admin))
		if err != nil {
			return nil, fmt.Errorf("store: create user %q: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, fmt.Errorf("user %q: %w", name, ErrExists)
		}
	}
	u, err := scanUser(s.w.QueryRowContext(ctx, s.q(`SELECT `+userCols+` FROM users WHERE name = ?`), name))
	if err == nil {
		err = s.joinDefault(ctx, u.ID)
	}
	return u, err
}

// UserByName returns a user, deleted or not.
func (s *sqlDB) UserByName(ctx context.Context, name string) (*User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, s.q(`SELECT `+userCols+` FROM users WHERE name = ?`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: user %q: %w", name, err)
	}
	return u, nil
}

// ListUsers lists the live users by name.
func (s *sqlDB) ListUsers(ctx context.Context) ([]*User, error) {
	return query(ctx, s.r, scanUser, s.q(`SELECT `+userCols+` FROM users WHERE deleted_at = 0 ORDER BY name`))
}

// DeleteUser marks the user deleted and removes its tokens, in one transaction.
func (s *sqlDB) DeleteUser(ctx context.Context, name string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete user: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.q(`UPDATE users SET deleted_at = ? WHERE name = ? AND deleted_at = 0`), time.Now().UnixNano(), name)
	if err != nil {
		return fmt.Errorf("store: delete user %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM tokens WHERE user_id = (SELECT id FROM users WHERE name = ?)`), name); err != nil {
		return fmt.Errorf("store: delete user %q: %w", name, err)
	}
	return tx.Commit()
}

// CreateToken stores a user's or a node's token.
func (s *sqlDB) CreateToken(ctx context.Context, t *Token) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now().UTC()
	}
	var err error
	if t.Node != "" {
		_, err = s.w.ExecContext(ctx, s.q(`INSERT INTO node_tokens (hash, id, node, name, assert_users, created_at, expires_at) VALUES (?,?,?,?,?,?,?)`),
			t.Hash, t.ID, t.Node, t.Name, boolInt(t.AssertUsers), nanos(t.CreatedAt), nanos(t.ExpiresAt))
	} else {
		_, err = s.w.ExecContext(ctx, s.q(`INSERT INTO tokens (hash, id, user_id, name, created_at, expires_at) VALUES (?,?,?,?,?,?)`),
			t.Hash, t.ID, t.UserID, t.Name, nanos(t.CreatedAt), nanos(t.ExpiresAt))
	}
	if err != nil {
		return fmt.Errorf("store: add token: %w", err)
	}
	return nil
}

func scanToken(sc scanner) (*Token, error) {
	var t Token
	var assert int
	var created, expires int64
	if err := sc.Scan(&t.ID, &t.Hash, &t.Name, &t.UserID, &t.User, &t.Node, &assert, &created, &expires); err != nil {
		return nil, err
	}
	t.AssertUsers, t.CreatedAt, t.ExpiresAt = assert == 1, fromNanos(created), fromNanos(expires)
	return &t, nil
}

// tokenRows is every token as one relation: users' and nodes'.
const tokenRows = `SELECT t.id, t.hash, t.name, t.user_id, u.name AS user_name, '' AS node, 0 AS assert_users, t.created_at, t.expires_at
  FROM tokens t JOIN users u ON u.id = t.user_id WHERE u.deleted_at = 0
UNION ALL
SELECT id, hash, name, 0, '', node, assert_users, created_at, expires_at FROM node_tokens`

// ListTokens lists a user's tokens, or every token (userID 0), without hashes.
func (s *sqlDB) ListTokens(ctx context.Context, userID int64) ([]*Token, error) {
	q, args := `SELECT * FROM (`+tokenRows+`) a ORDER BY created_at, id`, []any{}
	if userID != 0 {
		q, args = `SELECT * FROM (`+tokenRows+`) a WHERE user_id = ? ORDER BY created_at, id`, []any{userID}
	}
	ts, err := query(ctx, s.r, scanToken, s.q(q), args...)
	for _, t := range ts {
		t.Hash = ""
	}
	return ts, err
}

// RevokeToken removes a token by ID and returns it.
func (s *sqlDB) RevokeToken(ctx context.Context, id string) (*Token, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: revoke token: %w", err)
	}
	defer tx.Rollback()
	t, err := scanToken(tx.QueryRowContext(ctx, s.q(`SELECT * FROM (`+tokenRows+`) a WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: revoke token: %w", err)
	}
	table := "tokens"
	if t.Node != "" {
		table = "node_tokens"
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE id = ?`), id); err != nil {
		return nil, fmt.Errorf("store: revoke token: %w", err)
	}
	return t, tx.Commit()
}

// TokenByHash resolves a token hash: the token and, for a user's, the user.
func (s *sqlDB) TokenByHash(ctx context.Context, hash string) (*Token, *User, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, s.q(`SELECT * FROM (`+tokenRows+`) a WHERE hash = ?`), hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: token: %w", err)
	}
	if t.Node != "" {
		return t, nil, nil
	}
	u, err := scanUser(s.r.QueryRowContext(ctx, s.q(`SELECT `+userCols+` FROM users WHERE id = ?`), t.UserID))
	if err != nil {
		return nil, nil, fmt.Errorf("store: token's user: %w", err)
	}
	return t, u, nil
}

// EnsureKey returns the key of that name, storing value when there is none.
func (s *sqlDB) EnsureKey(ctx context.Context, name, value string) (string, error) {
	if _, err := s.w.ExecContext(ctx, s.q(`INSERT INTO server_keys (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`),
		name, value, time.Now().UnixNano()); err != nil {
		return "", fmt.Errorf("store: key %q: %w", name, err)
	}
	var v string
	if err := s.w.QueryRowContext(ctx, s.q(`SELECT value FROM server_keys WHERE name = ?`), name).Scan(&v); err != nil {
		return "", fmt.Errorf("store: key %q: %w", name, err)
	}
	return v, nil
}
