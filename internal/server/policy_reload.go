package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/store"
)

// The policy changes while the server runs: ReloadPolicy (SIGHUP, POST
// /policy/reload) reads the file again, and PUT /policy/file writes a new
// text and puts it in force (what sacctmgr add, modify and delete do). A
// bad file changes nothing. Pending runs are weighed against the new rules
// at once; running ones go on, even past a tighter limit, as in Slurm.

// ErrNoPolicyFile is returned when the server was started without a policy
// file to read or write.
var ErrNoPolicyFile = errors.New("server: no policy file")

// ReloadPolicy reads the policy file again and puts it in force. A file
// that is missing or does not parse leaves the rules as they are; the
// error names its file, line, column and field. The control.Outcome is logged.
func (s *Server) ReloadPolicy() error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	path := s.cfg.PolicyFile
	if path == "" {
		return fmt.Errorf("%w: %w: the server was started without one", ErrInvalid, ErrNoPolicyFile)
	}
	data, version, err := policy.ReadFile(path)
	if err == nil && version == "" {
		err = fmt.Errorf("policy: %s does not exist (an empty file means no rules)", path)
	}
	var p *policy.Policy
	if err == nil {
		p, err = policy.Parse(path, data)
	}
	if err != nil {
		s.log.Error("policy not reloaded: the rules in force stay", "policy_file", path, "err", err)
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	s.setRules(p)
	s.log.Info("policy reloaded", "policy_file", path, "version", version)
	return nil
}

// setRules puts p in force with what is derived from the rules: the
// active-run counts under submit limits and the pending runs' fleets, tier
// and partition hold. Then a full pass weighs every pending run again.
func (s *Server) setRules(p *policy.Policy) {
	if _, err := s.do(control.RulesInput{Rules: p}); err != nil {
		s.log.Warn("policy in force, not all of it durable", "err", err)
	}
	s.syncPolicyProjects(context.Background(), p)
	s.syncFleetOwners(context.Background()) // fleet_owners.go
	s.wakeScheduler()
}

func (s *Server) handlePolicyReload(w http.ResponseWriter, _ *http.Request, u *store.User) {
	if !u.Admin {
		writeError(w, fmt.Errorf("%w: reloading the policy takes an admin's token", ErrForbidden))
		return
	}
	if err := s.ReloadPolicy(); err != nil {
		writeError(w, err)
		return
	}
	s.handlePolicy(w, nil, u)
}

// handlePolicyFile answers the policy file's text and version.
func (s *Server) handlePolicyFile(w http.ResponseWriter, _ *http.Request, _ *store.User) {
	if s.cfg.PolicyFile == "" {
		writeError(w, fmt.Errorf("%w: %w: the server was started without one", ErrNotFound, ErrNoPolicyFile))
		return
	}
	s.fileMu.Lock()
	data, version, err := policy.ReadFile(s.cfg.PolicyFile)
	s.fileMu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PolicyFile{Path: s.cfg.PolicyFile, Text: string(data), Version: version})
}

// handlePolicyWrite replaces the policy file when the writer saw the file
// as it is (its version), the new text is valid, and the writer is an
// admin; then the new rules are in force.
func (s *Server) handlePolicyWrite(w http.ResponseWriter, r *http.Request, u *store.User) {
	if !u.Admin {
		writeError(w, fmt.Errorf("%w: changing the policy takes an admin's token", ErrForbidden))
		return
	}
	var req api.PolicyFile
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	path := s.cfg.PolicyFile
	if path == "" {
		writeError(w, fmt.Errorf("%w: %w: the server was started without one", ErrNotFound, ErrNoPolicyFile))
		return
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	_, version, err := policy.ReadFile(path)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Version != version {
		writeError(w, fmt.Errorf("%w: the policy file changed since it was read (version %.12s, now %.12s): read it again", ErrConflict, req.Version, version))
		return
	}
	p, err := policy.Parse(path, []byte(req.Text))
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", ErrInvalid, err))
		return
	}
	if err := policy.WriteFile(path, []byte(req.Text)); err != nil {
		writeError(w, err)
		return
	}
	s.setRules(p)
	version = policy.Version([]byte(req.Text))
	s.log.Info("policy file written", "policy_file", path, "version", version, "user", u.Name, slog.Int("bytes", len(req.Text)))
	writeJSON(w, http.StatusOK, api.PolicyFile{Path: path, Text: req.Text, Version: version})
}
