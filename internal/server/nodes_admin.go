package server

import (
	"fmt"
	"net/http"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/store"
)

// handleAgentHealth takes a node's health report. Only a change of status
// or reason is committed (and may drain the node or lift its drain); the
// time of the check is kept in memory.
func (s *Server) handleAgentHealth(w http.ResponseWriter, r *http.Request, scope string) {
	var req api.AgentHealth
	err := decode(r, &req)
	if err == nil {
		err = s.actsAs(scope, req.Node, "health")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	h := req.Health
	switch h.Status {
	case api.HealthOK, api.HealthWarning, api.HealthFailure:
	default:
		writeError(w, fmt.Errorf("%w: health status %q (ok, warning or failure)", ErrInvalid, h.Status))
		return
	}
	if h.CheckedAt.IsZero() {
		h.CheckedAt = s.clock.Now()
	}
	if _, err := s.do(control.HealthInput{Node: req.Node, Health: h}); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// handleDrain drains a node on an administrator's word.
func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.DrainRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	s.setDrain(w, r.PathValue("name"), u, &req)
}

// handleResume lifts an administrator's drain.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request, u *store.User) {
	s.setDrain(w, r.PathValue("name"), u, nil)
}

// setDrain drains the node (req set) or lifts its manual drain, and
// answers the node as it now is.
func (s *Server) setDrain(w http.ResponseWriter, name string, u *store.User, req *api.DrainRequest) {
	if !u.Admin {
		writeError(w, fmt.Errorf("%w: draining and resuming nodes takes an admin's token", ErrForbidden))
		return
	}
	out, err := s.do(control.DrainInput{Node: name, Drain: req, By: u.Name})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
