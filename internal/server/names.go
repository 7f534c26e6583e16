package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// activeOfName is the active run, with its configuration, that a
// submission of t by u would conflict with (SubmitOpts.UniqueName): the
// one of t's project with t's name; nil if none (or t has no name).
func (s *Server) activeOfName(ctx context.Context, u *store.User, t *spec.Task) (*api.Run, error) {
	if t.Name == "" {
		return nil, nil
	}
	pid, _, err := s.projectFor(ctx, u, t.Project)
	if err != nil {
		return nil, err
	}
	run, err := s.store.FindActiveRun(ctx, pid, t.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cur spec.Task
	if err := json.Unmarshal(run.Spec, &cur); err != nil {
		return nil, fmt.Errorf("run %d: its stored configuration: %w", run.ID, err)
	}
	out := s.apiRun(run, nil, s.name(ctx, 'u', run.UserID), &cur)
	out.Spec = &cur
	return out, nil
}

// offlineWhy is the scheduler's word for a node that is not in service
// (sched.FitsNode): the plan says which of its states keeps it out.
const offlineWhy = "node offline"

// nodeAway says why node n, out of service, cannot start a run now: its
// agent is away, its health check failed (and why), or an administrator
// drained it or set it down (and why).
func nodeAway(n api.Node) string {
	with := func(s, reason string) string {
		if reason != "" && !strings.Contains(s, "("+reason+")") {
			return s + ": " + reason
		}
		return s
	}
	switch {
	case n.Status == "offline" || n.Status == "unreachable":
		return with("node "+n.Status+" (its agent is not connected)", n.Reason)
	case strings.HasSuffix(n.Status, "("+api.HealthFailure+")"):
		return with("node unhealthy (its health check fails)", n.Reason)
	case n.Status == "":
		return offlineWhy
	}
	return with("node "+n.Status, n.Reason)
}
