package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/store"
)

// commitReq is one caller's batch and what to do once it is durable.
type commitReq struct {
	b     *store.Batch
	after []control.Effect
	done  chan error
}

// perform carries out an effect. It never takes s.mu.
func (s *Server) perform(e control.Effect) {
	switch e.Kind {
	case control.EffectSend:
		s.connMu.Lock()
		c := s.conns[e.Node]
		s.connMu.Unlock()
		if c.epoch == e.Epoch && c.conn != nil {
			c.conn.send(s.handOff(e.Msg))
		}
	case control.EffectNotify:
		s.hub.notify(e.Run)
	case control.EffectWake:
		s.wakeScheduler()
	}
}

// flushLocked queues what the cluster emitted, in order, for the
// committer; the channel answers once the last of it is durable and its
// effects performed (nil when nothing was emitted).
func (s *Server) flushLocked() <-chan error {
	var done <-chan error
	r := s.Take()
	s.svcRunsEnded(r.Ended) // a replica's end wakes the services' reconciler
	for _, f := range r.Ended {
		s.secrets.mask.forgetRun(f.Run)
		if steps := s.steps.endRun(f.Run, f.At); len(steps) > 0 {
			done = s.enqueue(&store.Batch{Steps: steps})
		}
	}
	for _, c := range r.Commits {
		done = s.enqueue(c.Batch, c.Effects...)
	}
	if r.WakeNow {
		s.wakeScheduler()
	}
	if done == nil {
		c := make(chan error, 1)
		c <- s.broken
		done = c
	}
	return done
}

// unlock releases mu, first queueing what the cluster emitted under it
// (flushLocked): nothing emitted waits for a later change to be queued.
func (s *Server) unlock() {
	if s.Emitted() {
		s.flushLocked()
	}
	s.mu.Unlock()
}

// storageFull tells whether err is the store out of room or read-only: a
// condition that passes (a full disk freed, a volume remounted).
func storageFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"database or disk is full", "SQLITE_FULL", "readonly database", "SQLITE_READONLY",
		"(SQLSTATE 53100)", "(SQLSTATE 25006)", "no space left on device"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// waitForRoom retries the batch that failed for want of room, every
// second, until it is written (nil), the failure changes (that error), or
// ctx ends. Meanwhile changes are refused with 503 (s.full, setFull): the
// server stays up, answers reads, and takes changes again once the batch
// is in. Nothing acknowledged is lost: the batch's callers were told 503,
// and what memory holds is the batch, written once it can be.
func (s *Server) waitForRoom(ctx context.Context, b *store.Batch, err error) error {
	for storageFull(err) {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
		err = s.store.Apply(context.WithoutCancel(ctx), b)
	}
	if err == nil {
		s.log.Info("the database takes writes again: changes accepted")
		s.mu.Lock()
		s.full = nil
		s.mu.Unlock()
		s.cfg.Metrics.storeFull(false)
	}
	return err
}

// setFull refuses changes from now on with 503, for err.
func (s *Server) setFull(err error) {
	s.log.Error("the database cannot be written: changes refused until it can", "err", err)
	s.mu.Lock()
	s.full = errors.Join(ErrUnavailable, fmt.Errorf("server: the database cannot be written (%v): retry later", err))
	s.mu.Unlock()
	s.cfg.Metrics.storeFull(true)
}

// maxGroup bounds how many queued batches share one transaction.
const maxGroup = 2048

// enqueue queues b for the committer; the caller must hold s.mu, which makes
// the queue's order the order in which the changes were made in memory.
// after is performed once b is durable, before done is signalled.
func (s *Server) enqueue(b *store.Batch, after ...control.Effect) <-chan error {
	done := make(chan error, 1)
	if s.broken != nil {
		done <- s.broken
		return done
	}
	if s.full != nil {
		// Refused, not queued: the queue would fill while the committer
		// waits for room (a caller that changed memory first says so).
		done <- s.full
		return done
	}
	s.commits <- &commitReq{b: b, after: after, done: done}
	if s.Freed() {
		// The change freed resources: the next pass may run now, beside
		// this commit, instead of after it. Its placements are queued
		// behind this batch, so none is durable, nor sent to an agent,
		// before what freed its room (often they share its transaction).
		s.wakeScheduler()
	}
	return done
}

// committer writes queued batches, many per transaction.
func (s *Server) committer(ctx context.Context) error {
	var group []*commitReq
	for {
		group = group[:0]
		select {
		case <-ctx.Done():
			return nil
		case r := <-s.commits:
			group = append(group, r)
		}
	drain:
		for len(group) < maxGroup {
			select {
			case r := <-s.commits:
				group = append(group, r)
			default:
				break drain
			}
		}
		merged := &store.Batch{}
		for _, r := range group {
			merged.Add(r.b)
		}
		var err error
		start := time.Now() // the transaction's duration (prom.go)
		if !merged.Empty() {
			// Not the callers' contexts: what is queued is committed even if
			// they have gone.
			err = s.store.Apply(context.WithoutCancel(ctx), merged)
		}
		answered := false
		if err != nil && storageFull(err) {
			// Its callers hear 503 now (the outcome unknown, as when an
			// answer is lost: a retry with the same Idempotency-Key gets
			// the run once it is in); the batch is written when it can be.
			s.setFull(err)
			for _, r := range group {
				r.done <- s.full
			}
			answered = true
			err = s.waitForRoom(ctx, merged, err)
			if ctx.Err() != nil {
				return nil
			}
		}
		if err != nil {
			// Memory is now ahead of the store: stop taking changes and let
			// the process restart from what is durable.
			err = fmt.Errorf("server: commit failed, restart needed: %w", err)
			s.log.Error("commit failed", "err", err)
			s.mu.Lock()
			s.broken = errors.Join(ErrUnavailable, err)
			s.mu.Unlock()
			if !answered {
				for _, r := range group {
					r.done <- s.broken
				}
			}
			s.fatal <- err
			return err
		}
		s.metrics.commits.Add(1)
		s.metrics.batches.Add(int64(len(group)))
		s.cfg.Metrics.committed(merged, len(group), time.Since(start))
		if seen(merged) {
			s.changes.notify()
		}
		for _, r := range group {
			for _, e := range r.after {
				s.perform(e)
			}
			if !answered {
				r.done <- nil
			}
		}
		// The reused slice must not keep the committed batches alive (a
		// pass's batch holds a copy of every run it touched).
		clear(group)
	}
}
