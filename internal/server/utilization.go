package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
)

// utilization_policy: a run whose GPUs all stayed under
// min_gpu_utilization for time_window is stopped
// (terminated_due_to_utilization_policy). The check runs as its jobs'
// samples arrive (handleAgentMetrics), on the samples the server keeps
// in memory, or, for a window longer than those cover, on the store's
// (folded to a minute each), at most once a minute per run.

// utilWatch remembers each active run's policy (nil: none) and when the
// store was last read for it.
type utilWatch struct {
	mu     sync.Mutex
	policy map[int64]*spec.UtilizationPolicy
	read   map[int64]time.Time
}

// coverSlack is how far after a window's start its first sample may be
// and the window still count as watched throughout (samples come every
// 5 s, the store's every minute).
const coverSlack = 90 * time.Second

// underUtilized reports whether the jobs' samples cover the window up to
// now (its first sample within coverSlack of its start) and every GPU of
// every sample in it stayed under min percent; covered reports the first
// part alone.
func underUtilized(min int, window time.Duration, jobs map[int64][]api.JobSample, now time.Time) (under, covered bool) {
	from := now.Add(-window)
	first, seen := time.Time{}, false
	for _, ss := range jobs {
		for _, x := range ss {
			if x.Time.Before(from) || x.Time.After(now) {
				continue
			}
			if len(x.GPUs) == 0 {
				continue
			}
			if !seen || x.Time.Before(first) {
				first, seen = x.Time, true
			}
			for _, g := range x.GPUs {
				if g.Util >= float64(min) {
					return false, true
				}
			}
		}
	}
	covered = seen && first.Sub(from) <= coverSlack
	return covered, covered
}

// checkUtilization stops those of runs whose utilization_policy says so.
func (s *Server) checkUtilization(ctx context.Context, runs map[int64]bool) {
	now := s.clock.Now()
	for run := range runs {
		p := s.utilPolicy(run)
		if p == nil {
			continue
		}
		window := time.Duration(p.TimeWindow) * time.Second
		under, covered := underUtilized(p.MinGPUUtilization, window, s.jm.of(run, -1), now)
		if !covered && s.mayReadSamples(run, now) {
			s.mu.Lock()
			_, jobs, ok := s.ActiveRun(run)
			s.unlock()
			if !ok {
				continue
			}
			ids := make([]int64, 0, len(jobs))
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			stored, err := s.storedSamples(ctx, ids, int(window/time.Minute)+int(coverSlack/time.Minute)+2)
			if err != nil {
				s.log.Warn("utilization_policy: read samples", "run_id", run, "err", err)
				continue
			}
			for id, ss := range s.jm.of(run, -1) {
				stored[id] = append(stored[id], ss...)
			}
			under, _ = underUtilized(p.MinGPUUtilization, window, stored, now)
		}
		if !under {
			continue
		}
		s.log.Info("utilization_policy: stopping the run", "run_id", run, "min_gpu_utilization", p.MinGPUUtilization, "time_window", window.String())
		if _, err := s.do(control.StopInput{ID: run, Cause: lifecycle.StopUtilization}); err != nil {
			s.log.Warn("utilization_policy: stop", "run_id", run, "err", err)
		}
		s.util.mu.Lock()
		delete(s.util.policy, run)
		delete(s.util.read, run)
		s.util.mu.Unlock()
	}
}

// utilPolicy is the active run's utilization_policy (nil: none, or the
// run is not active).
func (s *Server) utilPolicy(run int64) *spec.UtilizationPolicy {
	s.util.mu.Lock()
	p, known := s.util.policy[run]
	s.util.mu.Unlock()
	if known {
		return p
	}
	s.mu.Lock()
	rec, _, ok := s.ActiveRun(run)
	s.unlock()
	if !ok {
		return nil
	}
	var t spec.Task
	if err := json.Unmarshal(rec.Spec, &t); err != nil {
		s.log.Warn("utilization_policy: the run's configuration", "run_id", run, "err", fmt.Sprint(err))
	}
	s.util.mu.Lock()
	defer s.util.mu.Unlock()
	if s.util.policy == nil || len(s.util.policy) > 4096 {
		// Runs that ended keep their entry until this reset.
		s.util.policy, s.util.read = map[int64]*spec.UtilizationPolicy{}, map[int64]time.Time{}
	}
	s.util.policy[run] = t.UtilizationPolicy
	return t.UtilizationPolicy
}

// mayReadSamples reports whether the store may be read for run now (once
// a minute at most).
func (s *Server) mayReadSamples(run int64, now time.Time) bool {
	s.util.mu.Lock()
	defer s.util.mu.Unlock()
	if last, ok := s.util.read[run]; ok && now.Sub(last) < time.Minute {
		return false
	}
	s.util.read[run] = now
	return true
}
