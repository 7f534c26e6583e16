package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

func (s *Server) load(ctx context.Context) error {
	l, err := s.read(ctx)
	if err != nil {
		return err
	}
	if err := s.Restore(l, s.clock.Now()); err != nil {
		return err
	}
	runs, _, jobs, nodes := s.Counts()
	s.log.Info("state loaded", "active_runs", runs, "active_jobs", jobs, "nodes", nodes)
	return nil
}

// read reads what the cluster starts from.
func (s *Server) read(ctx context.Context) (*control.Loaded, error) {
	a, err := s.store.LoadActive(ctx)
	if err != nil {
		return nil, err
	}
	l := &control.Loaded{Active: a, Users: map[int64]string{}, Projects: map[int64]string{}, Tasks: map[int64][]*store.Run{}, Ended: map[int64]*store.Run{}}
	heads := control.ActiveHeads(a) // the runs, arrays and schedules
	active := map[int64]bool{}
	for _, r := range heads {
		active[r.ID] = true
	}
	listTasks := func(id int64) error {
		if _, ok := l.Tasks[id]; ok {
			return nil
		}
		tasks, err := s.store.ListRuns(ctx, store.RunFilter{All: true, ArrayID: id, Brief: true})
		l.Tasks[id] = tasks
		return err
	}
	for _, r := range heads {
		l.Users[r.UserID], l.Projects[r.ProjectID] = s.name(ctx, 'u', r.UserID), s.name(ctx, 'p', r.ProjectID)
		var t spec.Task
		if err := json.Unmarshal(r.Spec, &t); err != nil {
			return nil, fmt.Errorf("server: run %d: %w", r.ID, err)
		}
		if t.Array != "" && r.ArrayID == 0 {
			if err := listTasks(r.ID); err != nil {
				return nil, err
			}
		}
		if api.Status(r.Status) != api.StatusSubmitted {
			continue
		}
		for _, d := range t.DependsOn {
			for _, ref := range d.Runs {
				id, _ := control.ParseRef(ref)
				if _, seen := l.Ended[id]; seen || active[id] {
					continue
				}
				dr, err := s.store.GetRun(ctx, id)
				if err != nil {
					continue
				}
				l.Ended[id] = dr
				if control.IsArrayRun(dr) {
					if err := listTasks(id); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	if l.Usage, err = s.store.UsageSince(ctx, s.clock.Now().Add(-10*s.cfg.HalfLife)); err != nil {
		return nil, err
	}
	if l.Keys, err = s.store.KeysSince(ctx, s.clock.Now().Add(-control.KeyMemory)); err != nil {
		return nil, err
	}
	for _, r := range l.Usage {
		l.Users[r.UserID], l.Projects[r.ProjectID] = s.name(ctx, 'u', r.UserID), s.name(ctx, 'p', r.ProjectID)
	}
	return l, nil
}

func (s *Server) submit(user *store.User, t *spec.Task, ended map[int64]control.Outcome, opts control.SubmitOpts) (*api.Run, error) {
	body, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("server: encode spec: %w", err)
	}
	ctx := context.Background()
	pid, project, err := s.projectFor(ctx, user, t.Project) // reads the store: not under the lock
	if err != nil {
		return nil, err
	}
	r, err := s.do(control.SubmitInput{UserID: user.ID, User: user.Name, ProjectID: pid, Project: project,
		Task: t, Body: body, Ended: ended, Opts: opts})
	if err != nil {
		return nil, err
	}
	if again, ok := r.(control.Resubmitted); ok {
		// The key's run, as it is now (not as when it was submitted).
		run, err := s.store.GetRun(ctx, again.ID)
		if err != nil {
			return nil, err
		}
		return s.apiRun(run, nil, user.Name, nil), nil
	}
	run := r.(store.Run)
	return s.apiRun(&run, nil, user.Name, t), nil
}

// stop asks a run's jobs to end. Jobs not placed yet end at once.
func (s *Server) stop(id int64, abort bool) error {
	_, err := s.do(control.StopInput{ID: id, Abort: abort})
	return err
}

// agentEvents applies a node's reports and answers what the server now holds.
func (s *Server) agentEvents(node string, evs []api.AgentEvent) (*api.AgentAck, error) {
	in := control.ReportInput{Node: node, Events: evs}
	r, err := s.doWith(func() control.Input {
		// The group's peak at the end; the samples' for a job without a
		// group of its own (a container).
		for _, ev := range evs {
			if j, ok := s.Job(ev.JobID); ok && ev.Type == "exited" {
				if p := s.jm.peak(j.RunID, j.ID); p > ev.MaxRSS {
					if in.Peaks == nil {
						in.Peaks = map[int64]int64{}
					}
					in.Peaks[ev.JobID] = p
				}
			}
		}
		in.Events = s.maskEventsLocked(evs)
		return in
	})
	if err != nil {
		return nil, err
	}
	rep := r.(control.Report)
	for _, x := range rep.Refused {
		s.log.Warn("refused an agent's report", "node", node, "job_id", x.Event.JobID, "type", x.Event.Type, "err", x.Err)
	}
	return rep.Ack, nil
}

// schedLoop runs a scheduling pass whenever something changed, and on a slow
// timer as a safety net. It is the only caller of scheduleOnce: one pass at
// a time, so a plan is never applied over another computed beside it.
func (s *Server) schedLoop(ctx context.Context) {
	t := time.NewTimer(s.cfg.ResyncEvery)
	defer t.Stop()
	lastFull := s.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
			if now := s.clock.Now(); now.Sub(lastFull) >= s.cfg.ResyncEvery {
				lastFull = now
				_, _, _ = s.queue(func() control.Input { return control.ResyncInput{} })
			}
		}
		next := s.tick()
		s.scheduleOnce()
		s.mu.Lock()
		if h := s.Due(); !h.IsZero() && (next.IsZero() || h.Before(next)) {
			next = h
		}
		s.unlock()
		wait := s.cfg.ResyncEvery
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(s.clock.Now()), time.Millisecond))
		}
		t.Reset(wait)
	}
}

// scheduleOnce runs one pass and applies its plan. The first placement
// policy is greedy first fit, so a run that did not fit before fits only once
// something was freed: until then a pass tries just the runs submitted since
// the last one, which keeps a pass cheap however long the queue is.
//
// The state lock is held to copy the pass and to apply its plan, not while
// the scheduler computes it (pass.go, plan_apply.go).
func (s *Server) scheduleOnce() {
	start := time.Now() // the pass's duration (prom.go)
	r, _, err := s.queue(func() control.Input { return control.PassInput{} })
	p, _ := r.(*control.Pass)
	if err != nil || p == nil {
		return
	}
	s.applyPlan(p, p.Schedule())
	s.cfg.Metrics.passed(p, time.Since(start))
}
