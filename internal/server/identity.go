package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// Who a request acts for. Three kinds of credential reach the server:
//
//   - a user's token (berth token create): the user, on the user endpoints;
//   - a node's token (berth node token create, or the one the server gives
//     its local agent): that node only, on the agent endpoints; and, when
//     the token may assert users, the Unix user its agent's local socket
//     vouches for (api.HeaderUser), on the user endpoints;
//   - a job's credential (BERTH_JOB_TOKEN): its run's steps and reads, as
//     the run's owner, while the run is active.
//
// An admin's user token may still act as any node (agents set up before
// node tokens existed used one); the server logs a deprecation line once
// per token.

// principal is whom a request acts for.
type principal struct {
	// user is the user acting: a user's token's, the asserted one, or a
	// job credential's run owner (never an admin then).
	user *store.User
	tok  *store.Token // the stored token (nil for a job credential)
	// node is the node a node's token acts as; assert whether it may
	// vouch for its host's users.
	node   string
	assert bool
	// run is a job credential's run.
	run int64
	// via is the node whose socket vouched for user.
	via string
}

// cachedCred is a token as read from the store, and until when it may be
// used unread.
type cachedCred struct {
	tok   *store.Token
	user  *store.User
	until time.Time
}

// lookup resolves a bearer token through the cache (tokenTTL): a token
// revoked, or whose user was deleted, stops working within that time; one
// past its expiry at once.
func (s *Server) lookup(ctx context.Context, token string) (*store.Token, *store.User, error) {
	h := HashToken(token)
	now := time.Now()
	var c cachedCred
	if v, ok := s.tokens.Load(h); ok && now.Before(v.(cachedCred).until) {
		c = v.(cachedCred)
	} else {
		tok, u, err := s.store.TokenByHash(ctx, h)
		if err != nil {
			s.tokens.Delete(h)
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil, fmt.Errorf("%w: unknown token", ErrUnauthorized)
			}
			return nil, nil, err
		}
		c = cachedCred{tok: tok, user: u, until: now.Add(time.Duration(s.tokenTTL.Load()))}
		s.tokens.Store(h, c)
	}
	if e := c.tok.ExpiresAt; !e.IsZero() && !s.clock.Now().Before(e) {
		return nil, nil, fmt.Errorf("%w: token %s expired at %s", ErrUnauthorized, c.tok.ID, e.Format(time.RFC3339))
	}
	return c.tok, c.user, nil
}

// forgetTokens drops cached tokens that match, so that a revocation or a
// deletion on this server takes effect at once (other replicas: within
// tokenTTL).
func (s *Server) forgetTokens(match func(cachedCred) bool) {
	s.tokens.Range(func(k, v any) bool {
		if match(v.(cachedCred)) {
			s.tokens.Delete(k)
		}
		return true
	})
	s.assertedUsers.Clear()
}

// authenticate reads a request's credential and, where a node vouches for
// a local user, that user.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil, fmt.Errorf("%w: missing bearer token (berth login URL, BERTH_TOKEN, or on a node the agent's socket)", ErrUnauthorized)
	}
	if strings.HasPrefix(token, api.JobTokenPrefix) {
		return s.jobCredential(r.Context(), token)
	}
	tok, u, err := s.lookup(r.Context(), token)
	if err != nil {
		return nil, err
	}
	p := &principal{tok: tok, user: u, node: tok.Node, assert: tok.AssertUsers}
	name, uid := r.Header.Get(api.HeaderUser), r.Header.Get(api.HeaderUID)
	if name == "" && uid == "" {
		return p, nil
	}
	via := tok.Node
	switch {
	case p.node != "" && p.assert:
	case u != nil && u.Admin:
		via = "admin token " + tok.ID
		s.deprecated(tok, "vouches for local users")
	default:
		return nil, fmt.Errorf("%w: this credential may not vouch for users (a node's token made with --assert-users may)", ErrForbidden)
	}
	au, err := s.assertedUser(r.Context(), name, uid, via)
	if err != nil {
		return nil, err
	}
	return &principal{user: au, via: via}, nil
}

// deprecated logs, once per token, that an admin's token acts as an agent.
func (s *Server) deprecated(tok *store.Token, what string) {
	if _, seen := s.legacyAgents.LoadOrStore(tok.ID, true); !seen {
		s.log.Warn("deprecated: an admin's token "+what+" as an agent; give the node a credential of its own (berth node token create NODE) and restart its agent with it",
			"token", tok.ID, "token_name", tok.Name)
	}
}

// assertedUser is the Berth user of a Unix login a node vouches for: root
// (UID 0) is the admin; an unknown login becomes a user of its own unless
// the server makes none (--auto-users=false) or it is not allowed
// (--allow-users).
func (s *Server) assertedUser(ctx context.Context, name, uid, via string) (*store.User, error) {
	if uid == "0" {
		name = "admin"
	} else if name == "admin" {
		return nil, fmt.Errorf("%w: the Unix login admin is not Berth's administrator (root is)", ErrForbidden)
	}
	if !validName(name) {
		return nil, fmt.Errorf("%w: user %q: not a login name", ErrForbidden, name)
	}
	now := time.Now()
	if v, ok := s.assertedUsers.Load(name); ok && now.Before(v.(cachedCred).until) {
		return v.(cachedCred).user, nil
	}
	u, err := s.store.UserByName(ctx, name)
	switch {
	case err == nil && u.Deleted:
		return nil, fmt.Errorf("%w: user %s was deleted by an administrator (berth user create %s makes them again)", ErrForbidden, name, name)
	case errors.Is(err, store.ErrNotFound):
		if s.cfg.NoAutoUsers {
			return nil, fmt.Errorf("%w: %s is not a Berth user and this server makes none from Unix logins: ask an administrator (berth user create %s)", ErrForbidden, name, name)
		}
		if len(s.cfg.AllowUsers) > 0 && !slices.Contains(s.cfg.AllowUsers, name) {
			return nil, fmt.Errorf("%w: %s is not among the Unix logins this server makes users of (--allow-users)", ErrForbidden, name)
		}
		u, err = s.store.CreateUser(ctx, name, false)
		if errors.Is(err, store.ErrExists) { // made by a request beside this one
			u, err = s.store.UserByName(ctx, name)
		}
		if err == nil {
			s.joinPolicy(ctx, u)
			s.log.Info("user created from a Unix login", "user", name, "uid", uid, "via", via)
		}
	}
	if err != nil {
		return nil, err
	}
	s.assertedUsers.Store(name, cachedCred{user: u, until: now.Add(time.Duration(s.tokenTTL.Load()))})
	return u, nil
}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$`) })

// validName says whether a user's name is one Berth takes: a Unix login's
// characters (and @), at most 64.
func validName(name string) bool { return nameRE().MatchString(name) }

// jobToken is run id's job credential: the run's ID signed with the
// server's key. It needs no row: it is valid while the run is active.
func (s *Server) jobToken(id int64) string {
	m := hmac.New(sha256.New, s.jobKey)
	fmt.Fprintf(m, "run:%d", id)
	return api.JobTokenPrefix + strconv.FormatInt(id, 10) + "_" + hex.EncodeToString(m.Sum(nil))
}

// jobCredential checks a job credential: signed by this server, its run
// still active. It acts as the run's owner, never as an admin.
func (s *Server) jobCredential(ctx context.Context, token string) (*principal, error) {
	idText, _, _ := strings.Cut(strings.TrimPrefix(token, api.JobTokenPrefix), "_")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || subtle.ConstantTimeCompare([]byte(token), []byte(s.jobToken(id))) != 1 {
		return nil, fmt.Errorf("%w: unknown token", ErrUnauthorized)
	}
	s.mu.Lock()
	rec, _, ok := s.ActiveRun(id)
	s.unlock()
	if !ok {
		return nil, fmt.Errorf("%w: the job credential of run %d, which has ended", ErrUnauthorized, id)
	}
	return &principal{user: &store.User{ID: rec.UserID, Name: s.name(ctx, 'u', rec.UserID)}, run: id}, nil
}

// auth serves a user endpoint: a user's token, or a user a node vouches for.
func (s *Server) auth(h func(http.ResponseWriter, *http.Request, *store.User)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err == nil {
			err = p.userOnly()
		}
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, p.user)
	}
}

// userOnly refuses a node's or a job's credential on a user endpoint.
func (p *principal) userOnly() error {
	switch {
	case p.run != 0:
		return fmt.Errorf("%w: a job's credential acts only on its own run's steps", ErrForbidden)
	case p.user == nil:
		return fmt.Errorf("%w: node %s's credential acts only as that node, on the agent endpoints", ErrForbidden, p.node)
	}
	return nil
}

// runAuth serves an endpoint of one run ({ref}): as auth, and a job
// credential on its own run.
func (s *Server) runAuth(h func(http.ResponseWriter, *http.Request, *store.User)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err == nil && p.run != 0 {
			if id, ok := s.refID(r.Context(), p.user, r.PathValue("ref")); !ok || id != p.run {
				err = fmt.Errorf("%w: the job credential of run %d acts only on that run", ErrForbidden, p.run)
			}
		} else if err == nil {
			err = p.userOnly()
		}
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, p.user)
	}
}

// refID is the ID of the run ref names.
func (s *Server) refID(ctx context.Context, u *store.User, ref string) (int64, bool) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		return id, true
	}
	run, err := s.findRun(ctx, u, ref)
	if err != nil {
		return 0, false
	}
	return run.ID, true
}

// agentAuth serves an agent endpoint: a node's token, which acts as its
// node (the handler checks the node each request names with actsAs), or an
// admin's token, which may act as any node (node "").
func (s *Server) agentAuth(h func(w http.ResponseWriter, r *http.Request, node string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		switch {
		case err != nil:
		case p.via != "" || p.run != 0:
			err = fmt.Errorf("%w: the agent endpoints take a node's credential", ErrForbidden)
		case p.node != "":
			h(w, r, p.node)
			return
		case p.user != nil && p.user.Admin:
			s.deprecated(p.tok, "acts")
			h(w, r, "")
			return
		default:
			err = fmt.Errorf("%w: the agent endpoints take a node's credential (berth node token create NODE), not user %s's", ErrForbidden, p.user.Name)
		}
		writeError(w, err)
	}
}

// actsAs refuses (and logs) a request about node from a credential of
// another node (scope "": any node).
func (s *Server) actsAs(scope, node, what string) error {
	if scope != "" && scope != node {
		s.log.Warn("refused: a node's credential acts for another node", "node", scope, "as", node, "call", what)
		return fmt.Errorf("%w: node %s's credential acts only as that node, not as %q", ErrForbidden, scope, node)
	}
	return nil
}

// newSecret is a new token's secret: 24 random bytes, hex, after a prefix
// that says what it is.
func newSecret(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// jobKeyName names the key that signs job credentials (server_keys).
const jobKeyName = "job-credentials"

// loadJobKey reads the key that signs job credentials, making it at the
// first start: every replica and every restart uses the same one, so a
// job's credential outlives a restart of the server, not its run.
func (s *Server) loadJobKey(ctx context.Context) error {
	v, err := s.store.EnsureKey(ctx, jobKeyName, hex.EncodeToString(randomBytes(32)))
	if err != nil {
		return err
	}
	if s.jobKey, err = hex.DecodeString(v); err != nil {
		return fmt.Errorf("server: key %s: %w", jobKeyName, err)
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
