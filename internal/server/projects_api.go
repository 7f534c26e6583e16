package server

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// The projects API: projects (a global admin makes and deletes them),
// their members (a project's admins and managers; a manager may not make,
// change or remove an admin), and what each user sees of them (their own
// projects; every one for an admin). A project the caller does not read is
// not found.

var projectRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

func (s *Server) handleProjectCreate(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.ProjectRequest
	err := decode(r, &req)
	if err == nil {
		err = adminOnly(u, "creating projects")
	}
	if err == nil && !projectRE().MatchString(req.Name) {
		err = fmt.Errorf("%w: project name %q: letters, digits, _ . - (at most 64, starting with a letter or digit)", ErrInvalid, req.Name)
	}
	var p *store.Project
	if err == nil {
		p, err = s.store.CreateProject(r.Context(), req.Name)
	}
	if errors.Is(err, store.ErrExists) {
		err = fmt.Errorf("%w: project %s exists", ErrConflict, req.Name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.names.Delete(fmt.Sprintf("p%d", p.ID))
	s.log.Info("project created", "project", p.Name, "by", u.Name)
	writeJSON(w, http.StatusCreated, api.Project{Name: p.Name, CreatedAt: p.CreatedAt})
}

// handleProjectList lists the projects the caller is in (every one for an
// admin), with the caller's role; members=1 adds their members.
func (s *Server) handleProjectList(w http.ResponseWriter, r *http.Request, u *store.User) {
	ps, err := s.store.ListProjects(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	roles := s.rolesOf(r.Context(), u)
	var members map[int64][]api.Member
	if r.URL.Query().Get("members") == "1" {
		ms, err := s.store.ListMembers(r.Context(), 0, 0)
		if err != nil {
			writeError(w, err)
			return
		}
		members = map[int64][]api.Member{}
		for _, m := range ms {
			members[m.ProjectID] = append(members[m.ProjectID], apiMember(m))
		}
	}
	out := []api.Project{}
	for _, p := range ps {
		role, in := roles[p.ID]
		if !in && !u.Admin {
			continue
		}
		out = append(out, api.Project{Name: p.Name, Role: role, Default: p.ID == s.projectID, CreatedAt: p.CreatedAt, Members: members[p.ID]})
	}
	writeJSON(w, http.StatusOK, out)
}

func apiMember(m *store.Member) api.Member {
	return api.Member{Project: m.Project, User: m.User, Role: m.Role, Since: m.CreatedAt}
}

// readProject is the project named in the path, when u reads it (else
// not found, as one that does not exist).
func (s *Server) readProject(r *http.Request, u *store.User) (*store.Project, error) {
	name := r.PathValue("name")
	p, err := s.store.ProjectByName(r.Context(), name)
	if err == nil && !s.mayRead(u, p.ID) {
		err = fmt.Errorf("project %q: %w", name, store.ErrNotFound)
	}
	return p, err
}

func (s *Server) handleProjectDelete(w http.ResponseWriter, r *http.Request, u *store.User) {
	name := r.PathValue("name")
	err := adminOnly(u, "deleting projects")
	var p *store.Project
	if err == nil {
		p, err = s.store.ProjectByName(r.Context(), name)
	}
	if err == nil && p.ID == s.projectID {
		err = fmt.Errorf("%w: %s is the default project, every user's unless they say otherwise; it cannot be deleted", ErrInvalid, name)
	}
	if err == nil {
		var active []*store.Run
		active, err = s.store.ListRuns(r.Context(), store.RunFilter{ProjectID: p.ID, Limit: 1, Brief: true})
		if err == nil && len(active) > 0 {
			err = fmt.Errorf("%w: project %s has active runs (run %d): stop them first (berth stop, scancel -A %s)", ErrConflict, name, active[0].ID, name)
		}
	}
	if err == nil {
		err = s.store.DeleteProject(r.Context(), name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.forgetRoles()
	s.log.Info("project deleted", "project", name, "by", u.Name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleMemberList(w http.ResponseWriter, r *http.Request, u *store.User) {
	p, err := s.readProject(r, u)
	var ms []*store.Member
	if err == nil {
		ms, err = s.store.ListMembers(r.Context(), p.ID, 0)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]api.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, apiMember(m))
	}
	writeJSON(w, http.StatusOK, out)
}

// member reads the request's project and user for a change of membership
// by u, and the user's present role ("" none).
func (s *Server) member(r *http.Request, u *store.User) (*store.Project, *store.User, string, error) {
	p, err := s.readProject(r, u)
	if err != nil {
		return nil, nil, "", err
	}
	if !s.mayManage(u, p.ID) {
		return nil, nil, "", fmt.Errorf("%w: project %s's members are changed by its admins and managers", ErrForbidden, p.Name)
	}
	name := r.PathValue("user")
	who, err := s.store.UserByName(r.Context(), name)
	if err == nil && who.Deleted {
		err = fmt.Errorf("user %q: %w (deleted)", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, nil, "", err
	}
	ms, err := s.store.ListMembers(r.Context(), p.ID, who.ID)
	if err != nil {
		return nil, nil, "", err
	}
	role := ""
	if len(ms) > 0 {
		role = ms[0].Role
	}
	return p, who, role, nil
}

func (s *Server) handleMemberSet(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.MemberRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Role == "" {
		req.Role = RoleUser
	}
	if !validRole(req.Role) {
		writeError(w, fmt.Errorf("%w: role %q: want admin, manager or user", ErrInvalid, req.Role))
		return
	}
	p, who, was, err := s.member(r, u)
	if err == nil && !s.mayAdmin(u, p.ID) && (req.Role == RoleAdmin || was == RoleAdmin) {
		err = fmt.Errorf("%w: only project %s's admins make, change or remove its admins (you are its manager)", ErrForbidden, p.Name)
	}
	if err == nil {
		err = s.store.SetMember(r.Context(), p.ID, who.ID, req.Role)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.forgetRoles()
	s.log.Info("project member set", "project", p.Name, "user", who.Name, "role", req.Role, "was", was, "by", u.Name)
	status := http.StatusOK
	if was == "" {
		status = http.StatusCreated
	}
	writeJSON(w, status, api.Member{Project: p.Name, User: who.Name, Role: req.Role, Since: s.clock.Now()})
}

func (s *Server) handleMemberRemove(w http.ResponseWriter, r *http.Request, u *store.User) {
	p, who, was, err := s.member(r, u)
	if err == nil && was == "" {
		err = fmt.Errorf("user %s in project %s: %w", who.Name, p.Name, store.ErrNotFound)
	}
	if err == nil && was == RoleAdmin && !s.mayAdmin(u, p.ID) {
		err = fmt.Errorf("%w: only project %s's admins remove its admins (you are its manager)", ErrForbidden, p.Name)
	}
	if err == nil {
		err = s.store.RemoveMember(r.Context(), p.ID, who.ID)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.forgetRoles()
	s.log.Info("project member removed", "project", p.Name, "user", who.Name, "role", was, "by", u.Name)
	w.WriteHeader(http.StatusNoContent)
}
