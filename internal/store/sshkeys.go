package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SSHKey is a user's SSH public key (migration 00029).
type SSHKey struct {
	Fingerprint string // SHA256:…, as ssh-keygen -l prints it
	UserID      int64
	User        string // the user's name, when read
	PublicKey   string // the authorized_keys form, without the comment
	Comment     string
	CreatedAt   time.Time
}

const sshKeyRows = `SELECT k.fingerprint, k.user_id, u.name, k.public_key, k.comment, k.created_at
  FROM ssh_keys k JOIN users u ON u.id = k.user_id WHERE u.deleted_at = 0`

func scanSSHKey(sc scanner) (*SSHKey, error) {
	var k SSHKey
	var created int64
	if err := sc.Scan(&k.Fingerprint, &k.UserID, &k.User, &k.PublicKey, &k.Comment, &created); err != nil {
		return nil, err
	}
	k.CreatedAt = fromNanos(created)
	return &k, nil
}

// AddSSHKey stores a user's key; a key already stored (any user's) is
// ErrExists.
func (s *sqlDB) AddSSHKey(ctx context.Context, k *SSHKey) error {
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now().UTC()
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: add ssh key: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM ssh_keys WHERE fingerprint = ?`), k.Fingerprint).Scan(&n); err != nil {
		return fmt.Errorf("store: add ssh key: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("ssh key %s: %w", k.Fingerprint, ErrExists)
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO ssh_keys (fingerprint, user_id, public_key, comment, created_at) VALUES (?,?,?,?,?)`),
		k.Fingerprint, k.UserID, k.PublicKey, k.Comment, nanos(k.CreatedAt)); err != nil {
		// Two at once: the primary key refuses the second.
		return fmt.Errorf("ssh key %s: %w (%v)", k.Fingerprint, ErrExists, err)
	}
	return tx.Commit()
}

// ListSSHKeys lists a user's keys, or every live user's (userID 0), by
// age.
func (s *sqlDB) ListSSHKeys(ctx context.Context, userID int64) ([]*SSHKey, error) {
	q, args := sshKeyRows+` ORDER BY k.created_at, k.fingerprint`, []any{}
	if userID != 0 {
		q, args = sshKeyRows+` AND k.user_id = ? ORDER BY k.created_at, k.fingerprint`, []any{userID}
	}
	return query(ctx, s.r, scanSSHKey, s.q(q), args...)
}

// SSHKeyByFingerprint is the key of that fingerprint, of a live user.
func (s *sqlDB) SSHKeyByFingerprint(ctx context.Context, fingerprint string) (*SSHKey, error) {
	k, err := scanSSHKey(s.r.QueryRowContext(ctx, s.q(sshKeyRows+` AND k.fingerprint = ?`), fingerprint))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ssh key %s: %w", fingerprint, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: ssh key: %w", err)
	}
	return k, nil
}

// RemoveSSHKey removes a key of userID (any user's with 0); another
// user's is ErrNotFound.
func (s *sqlDB) RemoveSSHKey(ctx context.Context, userID int64, fingerprint string) error {
	q, args := `DELETE FROM ssh_keys WHERE fingerprint = ?`, []any{fingerprint}
	if userID != 0 {
		q, args = q+` AND user_id = ?`, append(args, userID)
	}
	res, err := s.w.ExecContext(ctx, s.q(q), args...)
	if err != nil {
		return fmt.Errorf("store: remove ssh key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("ssh key %s: %w", fingerprint, ErrNotFound)
	}
	return nil
}
