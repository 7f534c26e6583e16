package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/store"
)

// Projects and roles (dstack's model; a project is a Slurm account). The
// global administrator (users.admin) may do anything. In a project, a
// member's role says what they may do:
//
//   - admin: the project's members (any role), settings and fleets, and
//     every run of the project;
//   - manager: the project's members (not its admins), and every run's
//     history and logs in the project;
//   - user: runs in the project (their own to change), secrets.
//
// Whom a request may read is answered here, in one place, so that every
// route (and later ones: secrets) asks the same question: mayRead,
// mayManage, mayAdmin for a project; seesRun and readsLogs for a run.
//
// A foreign run (of a project the user is not in) is not found, never
// forbidden: its existence is not told.

// Roles a member may have, from the most to the least.
const (
	RoleAdmin   = "admin"
	RoleManager = "manager"
	RoleUser    = "user"
)

// DefaultProject is every user's project unless they say otherwise: the
// one every run went to before projects. Every user is made a member of
// it (the store does so as it makes them).
const DefaultProject = store.DefaultProject

// validRole reports whether role is one of the three.
func validRole(role string) bool {
	return role == RoleAdmin || role == RoleManager || role == RoleUser
}

// PrivateData is what a member does not see of other members' runs in
// their projects (Slurm's PrivateData; berth server --private-data).
type PrivateData struct {
	// Jobs: another member's runs are not found (as a foreign project's),
	// except by the project's admins and managers.
	Jobs bool
	// Logs: another member's logs, metrics and step output are refused
	// (403: the run itself is visible), except to admins and managers.
	Logs bool
}

// cachedRoles are a user's roles by project ID, and until when they may be
// used unread (tokenTTL, as tokens).
type cachedRoles struct {
	roles map[int64]string
	until time.Time
}

// rolesOf are u's roles by project. A membership changed on this server
// takes effect at once (forgetRoles), on another replica within tokenTTL.
func (s *Server) rolesOf(ctx context.Context, u *store.User) map[int64]string {
	if u == nil {
		return nil
	}
	now := time.Now()
	if v, ok := s.roles.Load(u.ID); ok && now.Before(v.(cachedRoles).until) {
		return v.(cachedRoles).roles
	}
	ms, err := s.store.ListMembers(ctx, 0, u.ID)
	if err != nil {
		s.log.Warn("memberships not read: the user is in no project for this request", "user", u.Name, "err", err)
		return nil
	}
	roles := make(map[int64]string, len(ms))
	for _, m := range ms {
		roles[m.ProjectID] = m.Role
	}
	s.roles.Store(u.ID, cachedRoles{roles: roles, until: now.Add(time.Duration(s.tokenTTL.Load()))})
	return roles
}

// forgetRoles drops every cached membership (a change on this server).
func (s *Server) forgetRoles() { s.roles.Clear() }

// mayRead says whether u may read projectID's runs (a member, or an admin).
func (s *Server) mayRead(u *store.User, projectID int64) bool {
	if u == nil {
		return false
	}
	if u.Admin {
		return true
	}
	_, ok := s.rolesOf(context.Background(), u)[projectID]
	return ok
}

// mayManage says whether u may change projectID's members: an admin or
// manager of it, or a global admin.
func (s *Server) mayManage(u *store.User, projectID int64) bool {
	if u == nil {
		return false
	}
	if u.Admin {
		return true
	}
	r := s.rolesOf(context.Background(), u)[projectID]
	return r == RoleAdmin || r == RoleManager
}

// mayAdmin says whether u administers projectID: its admin, or a global
// admin.
func (s *Server) mayAdmin(u *store.User, projectID int64) bool {
	if u == nil {
		return false
	}
	return u.Admin || s.rolesOf(context.Background(), u)[projectID] == RoleAdmin
}

// seesRun says whether u may see run: their own (always: a job's
// credential acts as its owner, and a user removed from a project still
// sees their runs), any run of their projects (unless --private-data jobs,
// then only their managers and admins), every run for an admin.
func (s *Server) seesRun(u *store.User, run *store.Run) bool {
	switch {
	case u == nil:
		return false
	case u.Admin || u.ID == run.UserID:
		return true
	case s.privateData().Jobs:
		return s.mayManage(u, run.ProjectID)
	}
	return s.mayRead(u, run.ProjectID)
}

// readsLogs says whether u, who sees run, may read its output and metrics:
// their own run's, or any in a project they manage, or any when the server
// keeps no logs private.
func (s *Server) readsLogs(u *store.User, run *store.Run) bool {
	if !s.seesRun(u, run) {
		return false
	}
	return !s.privateData().Logs || u.Admin || u.ID == run.UserID || s.mayManage(u, run.ProjectID)
}

// mayChange refuses a user's change to another user's run (Slurm:
// Access/permission denied); a project's admin changes its runs, a global
// admin any run. A run the user does not see is not found.
func (s *Server) mayChange(u *store.User, run *store.Run) error {
	if !s.seesRun(u, run) {
		return notFound(run)
	}
	if u.Admin || u.ID == run.UserID || s.mayAdmin(u, run.ProjectID) {
		return nil
	}
	return fmt.Errorf("%w: run %d is another user's (Slurm: Access/permission denied)", ErrForbidden, run.ID)
}

// notFound is the answer about a run the caller may not see: it names
// nothing of the run (findRun answers as for a run that does not exist
// before this is reached).
func notFound(*store.Run) error {
	return fmt.Errorf("run: %w", store.ErrNotFound)
}

// mayLog refuses the logs of a run u sees but whose output is private.
func (s *Server) mayLog(u *store.User, run *store.Run) error {
	if !s.seesRun(u, run) {
		return notFound(run)
	}
	if !s.readsLogs(u, run) {
		return fmt.Errorf("%w: run %d's output is its owner's and the project's managers' (berth server --private-data logs)", ErrForbidden, run.ID)
	}
	return nil
}

// runFilterFor bounds a listing to what u may see: nil for an admin.
func (s *Server) visibleProjects(u *store.User) (projects []int64, all bool) {
	if u == nil {
		return []int64{}, false
	}
	if u.Admin {
		return nil, true
	}
	projects = []int64{}
	for id, role := range s.rolesOf(context.Background(), u) {
		if !s.privateData().Jobs || role == RoleAdmin || role == RoleManager {
			projects = append(projects, id)
		}
	}
	slices.Sort(projects)
	return projects, false
}

// errNoAccount is the refusal of a submission to a project the user may
// not submit to, whether it exists or not (no existence leak), in Slurm's
// words.
func errNoAccount(name string) error {
	return fmt.Errorf("%w: project %q: you are not a member of it (berth project list shows yours; Slurm: Invalid account or account/partition combination specified)", ErrInvalid, name)
}

// projectFor is the project a submission of u's goes to: the one named
// (which u must be a member of; a global admin may name any), or u's
// default: main when u is a member of it (or an admin), else the first of
// their projects by name.
func (s *Server) projectFor(ctx context.Context, u *store.User, name string) (int64, string, error) {
	if name != "" {
		p, err := s.store.ProjectByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return 0, "", errNoAccount(name)
		}
		if err != nil {
			return 0, "", err
		}
		if !u.Admin {
			if _, ok := s.rolesOf(ctx, u)[p.ID]; !ok {
				return 0, "", errNoAccount(name)
			}
		}
		return p.ID, p.Name, nil
	}
	if u.Admin || s.mayRead(u, s.projectID) {
		return s.projectID, DefaultProject, nil
	}
	ms, err := s.store.ListMembers(ctx, 0, u.ID)
	if err != nil {
		return 0, "", err
	}
	if len(ms) == 0 {
		return 0, "", fmt.Errorf("%w: %s is a member of no project: ask an administrator (berth project member add --project P %s) (Slurm: Invalid account or account/partition combination specified)", ErrInvalid, u.Name, u.Name)
	}
	return ms[0].ProjectID, ms[0].Project, nil
}

// syncPolicyProjects makes the policy file's accounts projects, and its
// users (those who are Berth users) members of them as users: the
// database holds who belongs where (berth project, sacctmgr), the file the
// shares and limits. The file adds; it never removes.
func (s *Server) syncPolicyProjects(ctx context.Context, p *policy.Policy) {
	if p == nil {
		return
	}
	changed := false
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range p.Projects {
			if !yield(n) {
				return
			}
		}
	}) {
		pr, err := s.store.ProjectByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			if pr, err = s.store.CreateProject(ctx, name); errors.Is(err, store.ErrExists) {
				pr, err = s.store.ProjectByName(ctx, name)
			}
			if err == nil {
				s.log.Info("project created from the policy file", "project", name)
			}
		}
		if err != nil {
			s.log.Warn("policy file's account not made a project", "project", name, "err", err)
			continue
		}
		for _, un := range p.Projects[name] {
			u, err := s.store.UserByName(ctx, un)
			if err != nil || u.Deleted {
				continue // made a member when they are made a user (joinPolicy)
			}
			added, err := s.store.AddMember(ctx, pr.ID, u.ID, RoleUser)
			if err != nil {
				s.log.Warn("policy file's user not made a member", "project", name, "user", un, "err", err)
			}
			changed = changed || added
		}
	}
	if changed {
		s.forgetRoles()
	}
}

// joinPolicy makes a new user a member of the projects the policy file
// lists them under.
func (s *Server) joinPolicy(ctx context.Context, u *store.User) {
	rules := s.Rules()
	for name, users := range rules.Projects {
		if !slices.Contains(users, u.Name) {
			continue
		}
		if pr, err := s.store.ProjectByName(ctx, name); err == nil {
			_, _ = s.store.AddMember(ctx, pr.ID, u.ID, RoleUser)
		}
	}
	s.roles.Delete(u.ID)
}

// visibleTo bounds a listing to the runs u sees (and to project, when
// named: a project u does not read lists nothing, as one that does not
// exist).
func (s *Server) visibleTo(ctx context.Context, u *store.User, f *store.RunFilter, project string) error {
	if project != "" {
		p, err := s.store.ProjectByName(ctx, project)
		switch {
		case errors.Is(err, store.ErrNotFound):
			f.ProjectID = -1
		case err != nil:
			return err
		default:
			f.ProjectID = p.ID
		}
	}
	if projects, all := s.visibleProjects(u); !all {
		f.Visible = projects
		if u != nil {
			f.VisibleUser = u.ID
		}
	}
	return nil
}

// seenIDs keeps the run IDs of ids that u sees.
func (s *Server) seenIDs(ctx context.Context, u *store.User, ids []int64) ([]int64, error) {
	if len(ids) == 0 || u != nil && u.Admin {
		return ids, nil
	}
	f := store.RunFilter{All: true, Brief: true, IDs: ids}
	if err := s.visibleTo(ctx, u, &f, ""); err != nil {
		return nil, err
	}
	runs, err := s.store.ListRuns(ctx, f)
	if err != nil {
		return nil, err
	}
	seen := make(map[int64]bool, len(runs))
	for _, r := range runs {
		seen[r.ID] = true
	}
	return slices.DeleteFunc(ids, func(id int64) bool { return !seen[id] }), nil
}
