package server

import (
	"fmt"
	"net/http"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/store"
)

// control changes a run as Slurm's scontrol does: hold, release, requeue,
// and update of a run's time limit (waiting or running) and tags, a waiting
// run's priority and nice, or an array's throttle.
func (s *Server) handleControl(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.ControlRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	run, err := s.findRun(r.Context(), u, r.PathValue("ref"))
	if err == nil {
		err = s.mayChange(u, run)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.control(run.ID, req, u != nil && u.Admin); err != nil {
		writeError(w, err)
		return
	}
	if run, err = s.store.GetRun(r.Context(), run.ID); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.apiRun(run, nil, s.name(r.Context(), 'u', run.UserID), nil))
}

// control applies req to run id; admin says the caller is an admin (only
// an admin may raise a running run's time limit, as in Slurm).
func (s *Server) control(id int64, req api.ControlRequest, admin bool) error {
	_, err := s.do(control.ControlInput{ID: id, Req: req, Admin: admin})
	return err
}

// handleSignal sends a signal to a run's running jobs without stopping
// them (scancel --signal); jobs not started yet are not signalled, as in
// Slurm.
func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.SignalRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Signal < 1 || req.Signal > 64 {
		writeError(w, fmt.Errorf("%w: signal %d: want 1..64", ErrInvalid, req.Signal))
		return
	}
	run, err := s.findRun(r.Context(), u, r.PathValue("ref"))
	if err == nil {
		err = s.mayChange(u, run)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	sent, err := s.do(control.SignalInput{ID: run.ID, Signal: req.Signal, BatchOnly: req.BatchOnly, StepsOnly: req.StepsOnly})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Jobs int `json:"jobs"`
	}{sent.(int)})
}
