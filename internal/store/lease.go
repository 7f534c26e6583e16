package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The leader lease of several servers on one PostgreSQL database (issue
// 19; docs/design.md, "Replicas"). The lease is the session advisory lock
// serverLockID, held on a connection of its own; the fencing token is the
// epoch in the one-row table leadership: the replica that takes the lock
// increments it (TakeOver), and from then on every Apply checks, first in
// its transaction, that the epoch is still its own. A deposed leader's
// late batch touches no row there and is refused with ErrFenced; the row
// lock it takes makes a new leader's increment wait for a batch in
// flight, so the new leader, which reads the state after its increment,
// sees every batch that was let through.

// ErrFenced is returned by Apply when another replica took the lead since
// this one did: nothing of the batch was written.
var ErrFenced = errors.New("store: another server took the lead (fencing epoch moved): batch refused")

// leaseIdle is how long PostgreSQL keeps a lease session that stops
// talking (idle_session_timeout, PostgreSQL 14 and later): a leader cut
// off from the database loses the lock then, even where its TCP
// connection lingers. The leader pings far more often (LeaseOptions).
const leaseIdle = 3 * time.Second

// TryLease tries once to take the leader lease; true when this store
// holds it (again, when it already did). It does not fence anything yet:
// TakeOver does.
func (p *Postgres) TryLease(ctx context.Context) (bool, error) {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	if p.owner == nil {
		c, err := p.w.Conn(ctx)
		if err != nil {
			return false, fmt.Errorf("store: postgres: lease: %w", err)
		}
		// Older servers lack the setting; the lease then lasts until
		// PostgreSQL notices the connection gone.
		_, _ = c.ExecContext(ctx, fmt.Sprintf("SET idle_session_timeout = %d", leaseIdle.Milliseconds()))
		p.owner = c
	}
	var ok bool
	if err := p.owner.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, serverLockID).Scan(&ok); err != nil {
		p.owner.Close()
		p.owner = nil
		return false, fmt.Errorf("store: postgres: lease: %w", err)
	}
	return ok, nil
}

// TakeOver makes the lease's holder the leader: it increments the epoch,
// records url as where the leader is, and fences every later Apply with
// the new epoch, which it returns.
func (p *Postgres) TakeOver(ctx context.Context, url string) (int64, error) {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	if p.owner == nil {
		return 0, errors.New("store: postgres: take over without the lease")
	}
	var epoch int64
	err := p.owner.QueryRowContext(ctx, `UPDATE leadership SET epoch = epoch + 1, leader_url = $1, since = $2 WHERE id = 1 RETURNING epoch`,
		url, time.Now().UnixNano()).Scan(&epoch)
	if err != nil {
		return 0, fmt.Errorf("store: postgres: take over: %w", err)
	}
	p.fence.Store(epoch)
	return epoch, nil
}

// PingLease checks, within timeout, that the lease's session is alive
// (its lock goes with it). An error means the lease may have passed: the
// leader must stop at once.
func (p *Postgres) PingLease(ctx context.Context, timeout time.Duration) error {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	if p.owner == nil {
		return errors.New("store: postgres: no lease")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var held bool
	// The lock itself, not only the session: a lock released by hand
	// (pg_advisory_unlock_all) is a lost lease too.
	err := p.owner.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
		AND ((classid::bigint << 32) | objid::bigint) = $1)`, serverLockID).Scan(&held)
	if err != nil {
		return fmt.Errorf("store: postgres: lease: %w", err)
	}
	if !held {
		return errors.New("store: postgres: lease: the lock is no longer held")
	}
	return nil
}

// Leader reads who leads: the epoch and the URL the leader advertised
// ("" before any replica led).
func (p *Postgres) Leader(ctx context.Context) (epoch int64, url string, err error) {
	err = p.r.QueryRowContext(ctx, `SELECT epoch, leader_url FROM leadership WHERE id = 1`).Scan(&epoch, &url)
	if err != nil {
		return 0, "", fmt.Errorf("store: postgres: leader: %w", err)
	}
	return epoch, url, nil
}

// Epoch is the epoch this store fences its batches with (0: none).
func (p *Postgres) Epoch() int64 { return p.fence.Load() }

// Refused counts the batches Apply refused with ErrFenced.
func (p *Postgres) Refused() int64 { return p.refused.Load() }

// checkFence is the first statement of a fenced Apply's transaction.
func (p *Postgres) checkFence(ctx context.Context, tx *sql.Tx) error {
	epoch := p.fence.Load()
	if epoch == 0 {
		return nil
	}
	res, err := tx.ExecContext(ctx, `UPDATE leadership SET epoch = epoch WHERE id = 1 AND epoch = $1`, epoch)
	if err != nil {
		return fmt.Errorf("store: fence: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		p.refused.Add(1)
		return fmt.Errorf("%w (this server's epoch %d)", ErrFenced, epoch)
	}
	return nil
}
