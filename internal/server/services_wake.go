package server

import (
	"time"

	"github.com/berth-hq/berth/internal/control"
)

// The services' reconciler runs when something it acts on happens, not on
// a clock: an apply or a stop (which run a pass themselves), a replica's
// run ending (the commit path: svcRunsEnded), a replica becoming ready or
// not (the prober), a request that raises the autoscaler's count (the
// gateway), a drain finished; and at the next deadline any service has (a
// probe due, a crash loop's backoff over, a scale delay passed, the oldest
// request leaving the rate window), on one timer set to the earliest. A
// pass with nothing to do costs no query; with no deadline and no event,
// none runs but a safety pass every serviceSafety.

// wakeServicesAt makes sure a pass comes at t (zero: none needed).
func (s *Server) wakeServicesAt(t time.Time) {
	s.svcInit()
	s.svc.mu.Lock()
	s.wakeAtLocked(t)
	s.svc.mu.Unlock()
}

// wakeAtLocked is wakeServicesAt with s.svc.mu held: the timer moves
// earlier, never later (an earlier pass sets the later deadlines again).
func (s *Server) wakeAtLocked(t time.Time) {
	if t.IsZero() || !s.svc.timerAt.IsZero() && !t.Before(s.svc.timerAt) {
		return
	}
	if s.svc.timer != nil {
		s.svc.timer.Stop()
	}
	s.svc.timerGen++
	gen := s.svc.timerGen
	s.svc.timerAt = t
	s.svc.timer = time.AfterFunc(time.Until(t), func() {
		s.svc.mu.Lock()
		if s.svc.timerGen == gen {
			s.svc.timerAt = time.Time{}
		}
		s.svc.mu.Unlock()
		s.wakeServices()
	})
}

// svcRunsEnded wakes the reconciler when one of the ended runs is a
// replica (called with s.mu held, as the cluster's ends are taken).
func (s *Server) svcRunsEnded(ended []control.RunEnd) {
	if len(ended) == 0 {
		return
	}
	s.svcInit()
	s.svc.mu.Lock()
	found := false
	for _, e := range ended {
		if _, ok := s.svc.reps[e.Run]; ok {
			found = true
			break
		}
	}
	s.svc.mu.Unlock()
	if found {
		s.wakeServices()
	}
}

// gatewayHitLocked counts a request to info and wakes the reconciler
// when the autoscaler would now want more replicas: at once if it may
// scale up now, else when scale_up_delay has passed (s.svc.mu held).
func (s *Server) gatewayHitLocked(info *svcInfo, now time.Time) {
	info.hits.add(now)
	t := info.task
	if t == nil || t.Scaling == nil || info.row == nil {
		return
	}
	r := t.ReplicaRange()
	cur := info.row.Wanted
	if cur >= r.Max || desiredReplicas(info.hits.count(now), rpsWindow, t.Scaling.Target, r) <= cur {
		return
	}
	up := defaultScaleUpDelay
	if d := t.Scaling.ScaleUpDelay; d != nil {
		up = d.Std()
	}
	if at := info.scaledAt.Add(up); cur > 0 && now.Before(at) {
		s.wakeAtLocked(at)
		return
	}
	select {
	case s.svc.wake <- struct{}{}:
	default:
	}
}
