package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
