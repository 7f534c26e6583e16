package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Blobs (issue 16): the archives of the code and files a run carries,
// content-addressed by their SHA-256, on either database.

// PutBlob stores data under digest; an existing digest is kept (same
// digest, same bytes), marked used now. created_at is when a blob was last
// stored or asked for: PruneBlobs keeps what was used recently.
func (s *sqlDB) PutBlob(ctx context.Context, digest string, data []byte) error {
	_, err := s.w.ExecContext(ctx, s.q(`INSERT INTO blobs (digest, size, data, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (digest) DO UPDATE SET created_at = excluded.created_at`), digest, int64(len(data)), data, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("store: blob %s: %w", digest, err)
	}
	return nil
}

// HasBlob says whether digest is stored, and its size, and marks it used
// now: a client that is told the server has a blob does not send it, and
// PruneBlobs must not take it before the run that names it is submitted.
func (s *sqlDB) HasBlob(ctx context.Context, digest string) (int64, bool, error) {
	var size int64
	err := s.w.QueryRowContext(ctx, s.q(`UPDATE blobs SET created_at = ? WHERE digest = ? RETURNING size`), time.Now().UnixNano(), digest).Scan(&size)
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

// digestRE finds the digests a run's stored configuration names (its
// archives'; any other hex SHA-256 in it only keeps a blob longer).
var digestRE = regexp.MustCompile(`"digest":"([0-9a-f]{64})"`)

// PruneBlobs deletes the blobs last used before `before` that no run names
// unless the run finished before `before` too, and says how many and how
// many bytes. A run's configuration names its archives' digests (an
// array's or a schedule's is in its record, migration 00037); the runs
// read are the unfinished ones and those that finished since `before` (the
// index on finished_at), only when some blob is old enough to go.
func (s *sqlDB) PruneBlobs(ctx context.Context, before time.Time) (int, int64, error) {
	cut := before.UnixNano()
	old := map[string]bool{}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT digest FROM blobs WHERE created_at < ?`), cut)
	if err != nil {
		return 0, 0, fmt.Errorf("store: blobs: %w", err)
	}
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("store: blobs: %w", err)
		}
		old[d] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, 0, fmt.Errorf("store: blobs: %w", err)
	}
	if len(old) == 0 {
		return 0, 0, nil
	}
	rows, err = s.r.QueryContext(ctx, s.q(`SELECT spec FROM runs WHERE (finished_at = 0 OR finished_at >= ?) AND spec LIKE '%"digest":"%'
UNION ALL SELECT spec FROM arrays WHERE (finished_at = 0 OR finished_at >= ?) AND spec LIKE '%"digest":"%'
UNION ALL SELECT spec FROM schedules WHERE (finished_at = 0 OR finished_at >= ?) AND spec LIKE '%"digest":"%'`), cut, cut, cut)
	if err != nil {
		return 0, 0, fmt.Errorf("store: blobs in use: %w", err)
	}
	for rows.Next() {
		var spec string
		if err := rows.Scan(&spec); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("store: blobs in use: %w", err)
		}
		for _, m := range digestRE.FindAllStringSubmatch(spec, -1) {
			delete(old, m[1])
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, 0, fmt.Errorf("store: blobs in use: %w", err)
	}
	n, bytes := 0, int64(0)
	for d := range old {
		// Asked for since the list was read (HasBlob, PutBlob): kept.
		var size int64
		err := s.w.QueryRowContext(ctx, s.q(`DELETE FROM blobs WHERE digest = ? AND created_at < ? RETURNING size`), d, cut).Scan(&size)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return n, bytes, fmt.Errorf("store: blob %s: %w", d, err)
		}
		n, bytes = n+1, bytes+size
	}
	return n, bytes, nil
}
