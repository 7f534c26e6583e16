package server

import (
	"context"
	"errors"
	"fmt"
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
		if err != nil {
			// Memory is now ahead of the store: stop taking changes and let
			// the process restart from what is durable.
			err = fmt.Errorf("server: commit failed, restart needed: %w", err)
			s.log.Error("commit failed", "err", err)
			s.mu.Lock()
			s.broken = errors.Join(ErrUnavailable, err)
			s.mu.Unlock()
			for _, r := range group {
				r.done <- s.broken
			}
			s.fatal <- err
			return err
		}
		s.metrics.commits.Add(1)
		s.metrics.batches.Add(int64(len(group)))
		s.cfg.Metrics.committed(merged, len(group), time.Since(start))
		for _, r := range group {
			for _, e := range r.after {
				s.perform(e)
			}
			r.done <- nil
		}
		// The reused slice must not keep the committed batches alive (a
		// pass's batch holds a copy of every run it touched).
		clear(group)
	}
}
