package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Jobs' metrics samples (issue 18): written through Apply, folded by the
// server (level 0 into level 1) and cut by it at its retention.

func (s *sqlDB) applySamples(ctx context.Context, tx *sql.Tx, b *Batch) error {
	for _, c := range b.SampleCuts {
		q, args := `DELETE FROM metric_samples WHERE level = ? AND time < ?`, []any{c.Level, nanos(c.Before)}
		if c.JobID != 0 {
			q, args = q+` AND job_id = ?`, append(args, c.JobID)
		}
		if !c.From.IsZero() {
			q, args = q+` AND time >= ?`, append(args, nanos(c.From))
		}
		if _, err := tx.ExecContext(ctx, s.q(q), args...); err != nil {
			return fmt.Errorf("store: drop samples: %w", err)
		}
	}
	if len(b.Samples) == 0 {
		return nil
	}
	st := s.stmt(ctx, tx, insertSample)
	for _, m := range b.Samples {
		if _, err := st(ctx, m.JobID, m.Level, nanos(m.Time), string(m.Data)); err != nil {
			return fmt.Errorf("store: sample of job %d: %w", m.JobID, err)
		}
	}
	return nil
}

func scanSample(sc scanner) (*MetricSample, error) {
	var m MetricSample
	var t int64
	var data string
	if err := sc.Scan(&m.JobID, &m.Level, &t, &data); err != nil {
		return nil, err
	}
	m.Time, m.Data = fromNanos(t), []byte(data)
	return &m, nil
}

// ListSamples lists the jobs' samples, by job then time, each job's newest
// limit (<= 0: all).
func (s *sqlDB) ListSamples(ctx context.Context, jobIDs []int64, limit int) ([]*MetricSample, error) {
	var out []*MetricSample
	for _, id := range jobIDs {
		q, args := `SELECT job_id, level, time, data FROM metric_samples WHERE job_id = ? ORDER BY time DESC, level DESC`, []any{id}
		if limit > 0 {
			q, args = q+` LIMIT ?`, append(args, limit)
		}
		ms, err := query(ctx, s.r, scanSample, s.q(q), args...)
		if err != nil {
			return nil, err
		}
		for i := len(ms) - 1; i >= 0; i-- {
			out = append(out, ms[i])
		}
	}
	return out, nil
}

// SamplesBefore lists level's samples taken before t, oldest first, at
// most limit.
func (s *sqlDB) SamplesBefore(ctx context.Context, level int, t time.Time, limit int) ([]*MetricSample, error) {
	return query(ctx, s.r, scanSample, s.q(`SELECT job_id, level, time, data FROM metric_samples WHERE level = ? AND time < ? ORDER BY time, job_id LIMIT ?`),
		level, nanos(t), limit)
}
