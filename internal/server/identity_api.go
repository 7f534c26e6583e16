package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// The identity API: users (admin), tokens (a user's own; any, for an
// admin), nodes' tokens (admin), and who the caller is.

func adminOnly(u *store.User, what string) error {
	if !u.Admin {
		return fmt.Errorf("%w: %s takes an admin", ErrForbidden, what)
	}
	return nil
}

func apiUser(u *store.User) api.User {
	return api.User{Name: u.Name, Admin: u.Admin, CreatedAt: u.CreatedAt}
}

func (s *Server) handleUserCreate(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.UserRequest
	err := decode(r, &req)
	if err == nil {
		err = adminOnly(u, "creating users")
	}
	if err == nil && !validName(req.Name) {
		err = fmt.Errorf("%w: user name %q: letters, digits, _ . @ - (at most 64, not starting with . - @)", ErrInvalid, req.Name)
	}
	var nu *store.User
	if err == nil {
		nu, err = s.store.CreateUser(r.Context(), req.Name, req.Admin)
	}
	if errors.Is(err, store.ErrExists) {
		err = fmt.Errorf("%w: user %s exists", ErrConflict, req.Name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.joinPolicy(r.Context(), nu)
	s.forgetTokens(func(c cachedCred) bool { return c.user != nil && c.user.ID == nu.ID })
	s.log.Info("user created", "user", nu.Name, "admin", nu.Admin, "by", u.Name)
	writeJSON(w, http.StatusCreated, apiUser(nu))
}

func (s *Server) handleUserList(w http.ResponseWriter, r *http.Request, u *store.User) {
	if err := adminOnly(u, "listing users"); err != nil {
		writeError(w, err)
		return
	}
	us, err := s.store.ListUsers(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]api.User, 0, len(us))
	for _, x := range us {
		out = append(out, apiUser(x))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleUserDelete(w http.ResponseWriter, r *http.Request, u *store.User) {
	name := r.PathValue("name")
	err := adminOnly(u, "deleting users")
	if err == nil && name == "admin" {
		err = fmt.Errorf("%w: admin is the server's own administrator (root on the nodes); it cannot be deleted", ErrInvalid)
	}
	var victim *store.User
	if err == nil {
		victim, err = s.store.UserByName(r.Context(), name)
	}
	if err == nil {
		err = s.store.DeleteUser(r.Context(), name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.forgetTokens(func(c cachedCred) bool { return c.user != nil && c.user.ID == victim.ID })
	s.log.Info("user deleted", "user", name, "by", u.Name)
	w.WriteHeader(http.StatusNoContent)
}

func apiToken(t *store.Token) api.Token {
	out := api.Token{ID: t.ID, Name: t.Name, User: t.User, Node: t.Node, AssertUsers: t.AssertUsers, CreatedAt: t.CreatedAt}
	if !t.ExpiresAt.IsZero() {
		e := t.ExpiresAt
		out.ExpiresAt = &e
	}
	return out
}

// expiry is when a token asked to expire in secs seconds does (zero: never).
func (s *Server) expiry(secs int64) (time.Time, error) {
	switch {
	case secs < 0:
		return time.Time{}, fmt.Errorf("%w: expires_in %d: want a positive number of seconds, or 0 for never", ErrInvalid, secs)
	case secs == 0:
		return time.Time{}, nil
	}
	return s.clock.Now().Add(time.Duration(secs) * time.Second), nil
}

func (s *Server) handleTokenCreate(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.TokenRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	owner := u
	if req.User != "" && req.User != u.Name {
		if err := adminOnly(u, "a token for another user"); err != nil {
			writeError(w, err)
			return
		}
		o, err := s.store.UserByName(r.Context(), req.User)
		if err == nil && o.Deleted {
			err = fmt.Errorf("user %s: %w (deleted)", req.User, store.ErrNotFound)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		owner = o
	}
	exp, err := s.expiry(req.ExpiresIn)
	if err != nil {
		writeError(w, err)
		return
	}
	secret := newSecret("berth_")
	t := &store.Token{ID: store.NewTokenID(), Hash: HashToken(secret), Name: req.Name, UserID: owner.ID, User: owner.Name,
		CreatedAt: s.clock.Now(), ExpiresAt: exp}
	if err := s.store.CreateToken(r.Context(), t); err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("token created", "token", t.ID, "user", owner.Name, "by", u.Name, "expires", exp)
	out := apiToken(t)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) handleNodeTokenCreate(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.NodeTokenRequest
	err := decode(r, &req)
	if err == nil {
		err = adminOnly(u, "a node's token")
	}
	node := r.PathValue("name")
	if err == nil && (node == "" || len(node) > 255) {
		err = fmt.Errorf("%w: node name %q", ErrInvalid, node)
	}
	var exp time.Time
	if err == nil {
		exp, err = s.expiry(req.ExpiresIn)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	secret, t, err := s.nodeToken(r.Context(), node, req.Name, req.AssertUsers, exp)
	if err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("node token created", "token", t.ID, "node", node, "assert_users", req.AssertUsers, "by", u.Name)
	out := apiToken(t)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) nodeToken(ctx context.Context, node, name string, assert bool, exp time.Time) (string, *store.Token, error) {
	secret := newSecret("berthnode_")
	t := &store.Token{ID: store.NewTokenID(), Hash: HashToken(secret), Name: name, Node: node, AssertUsers: assert,
		CreatedAt: s.clock.Now(), ExpiresAt: exp}
	return secret, t, s.store.CreateToken(ctx, t)
}

func (s *Server) handleTokenList(w http.ResponseWriter, r *http.Request, u *store.User) {
	id := u.ID
	if u.Admin {
		id = 0
	}
	ts, err := s.store.ListTokens(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	want := r.URL.Query().Get("user")
	out := make([]api.Token, 0, len(ts))
	for _, t := range ts {
		if want == "" || t.User == want {
			out = append(out, apiToken(t))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleTokenRevoke(w http.ResponseWriter, r *http.Request, u *store.User) {
	id := r.PathValue("id")
	if !u.Admin {
		// A user revokes their own tokens only; another's is not found.
		mine, err := s.store.ListTokens(r.Context(), u.ID)
		if err != nil {
			writeError(w, err)
			return
		}
		found := false
		for _, t := range mine {
			found = found || t.ID == id
		}
		if !found {
			writeError(w, fmt.Errorf("token %q: %w", id, store.ErrNotFound))
			return
		}
	}
	t, err := s.store.RevokeToken(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	s.forgetTokens(func(c cachedCred) bool { return c.tok != nil && c.tok.ID == t.ID })
	s.log.Info("token revoked", "token", t.ID, "user", t.User, "node", t.Node, "by", u.Name)
	w.WriteHeader(http.StatusNoContent)
}

// handleWhoAmI answers what the server makes of any credential.
func (s *Server) handleWhoAmI(w http.ResponseWriter, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out := api.WhoAmI{Kind: "user", Node: p.node, Run: p.run, Via: p.via}
	switch {
	case p.run != 0:
		out.Kind = "job"
	case p.user == nil:
		out.Kind = "node"
	}
	if p.user != nil {
		out.User, out.Admin = p.user.Name, p.user.Admin
	}
	writeJSON(w, http.StatusOK, out)
}

// localAgent names the token the server gives its own agent.
const localAgent = "local agent"

// LocalAgentToken makes the credential of the server's own agent, for node:
// a node's token that may vouch for the host's users. The local agent's
// tokens of earlier starts are revoked.
func (s *Server) LocalAgentToken(ctx context.Context, node string) (string, error) {
	ts, err := s.store.ListTokens(ctx, 0)
	if err != nil {
		return "", err
	}
	for _, t := range ts {
		if t.Node == node && t.Name == localAgent {
			if _, err := s.store.RevokeToken(ctx, t.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return "", err
			}
		}
	}
	secret, _, err := s.nodeToken(ctx, node, localAgent, true, time.Time{})
	return secret, err
}
