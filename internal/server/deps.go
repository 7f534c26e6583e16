package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// resolveDeps rewrites t's dependencies into canonical references, reading
// the store (without the server's lock): unknown runs are an error that
// names the field. It returns the outcomes of the final runs it met, for the
// in-memory cache.
func (s *Server) resolveDeps(ctx context.Context, u *store.User, t *spec.Task) (map[int64]control.Outcome, error) {
	seen := map[int64]control.Outcome{}
	for i := range t.DependsOn {
		d := &t.DependsOn[i]
		field := fmt.Sprintf("depends_on[%d].%s", i, d.Type)
		d.IDs = make([]int64, len(d.Runs))
		for k, ref := range d.Runs {
			run, index, err := s.lookupRef(ctx, u, ref)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
			}
			if d.Type == "aftercorr" && (!control.IsArrayRun(run) || t.Array == "") {
				return nil, fmt.Errorf("%w: %s: aftercorr ties the tasks of two arrays: %q is not an array, or this run is not one", ErrInvalid, field, ref)
			}
			d.IDs[k] = run.ID
			d.Runs[k] = strconv.FormatInt(run.ID, 10)
			if index >= 0 {
				d.Runs[k] += "_" + strconv.Itoa(index)
			}
			if api.Status(run.Status).Finished() {
				seen[run.ID] = control.OutcomeOf(run)
			}
		}
	}
	return seen, nil
}

// lookupRef finds the run a reference names: an ID, a name (the newest run
// of that name), or a task of an array (ID_INDEX or NAME_INDEX). For a
// task not created yet it returns the array and the index; else index -1.
func (s *Server) lookupRef(ctx context.Context, u *store.User, ref string) (*store.Run, int, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		run, err := s.store.GetRun(ctx, id)
		if err != nil || !s.sees(u, run) {
			return nil, -1, fmt.Errorf("no run %d", id)
		}
		return run, -1, nil
	}
	if run, err := s.findNamed(ctx, u, ref); err == nil {
		return run, -1, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, -1, err
	}
	if m := control.TaskRef().FindStringSubmatch(ref); m != nil {
		index, _ := strconv.Atoi(m[2])
		array, _, err := s.lookupRef(ctx, u, m[1])
		if err == nil {
			if task, err := s.store.FindArrayTask(ctx, array.ID, index); err == nil {
				return task, -1, nil
			}
			return array, index, nil
		}
	}
	return nil, -1, fmt.Errorf("no run named %q", ref)
}
