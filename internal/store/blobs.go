package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Blobs (issue 16): the archives of the code and files a run carries,
// content-addressed by their SHA-256, on either database.

// PutBlob stores data under digest; an existing digest is kept (same
// digest, same bytes).
func (s *sqlDB) PutBlob(ctx context.Context, digest string, data []byte) error {
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO blobs (digest, size, data, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (digest) DO NOTHING`), digest, int64(len(data)), data, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("store: blob %s: %w", digest, err)
	}
	return nil
}

// HasBlob says whether digest is stored, and its size.
func (s *sqlDB) HasBlob(ctx context.Context, digest string) (int64, bool, error) {
	var size int64
	err := s.r.QueryRowContext(ctx, s.q(`SELECT size FROM blobs WHERE digest = ?`), digest).Scan(&size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: blob %s: %w", digest, err)
	}
	return size, true, nil
}

// GetBlob returns a blob's bytes.
func (s *sqlDB) GetBlob(ctx context.Context, digest string) ([]byte, error) {
	var data []byte
	err := s.r.QueryRowContext(ctx, s.q(`SELECT data FROM blobs WHERE digest = ?`), digest).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("blob %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: blob %s: %w", digest, err)
	}
	return data, nil
}
