package server

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// Sign-in codes let a user open the dashboard from a terminal without
// pasting a token: `berth ui` asks for one as its caller (a token, or the
// agent's socket on their host: their Unix identity), and the dashboard's
// login page trades it, once and within signInCodeLife, for a token of
// that user good for signInTokenLife.
const (
	signInCodeLife  = time.Minute
	signInTokenLife = 12 * time.Hour
)

type signInCodes struct {
	mu sync.Mutex
	m  map[string]signInCode
}

type signInCode struct {
	user  int64
	until time.Time
}

// take removes code and returns its user, if it is still good at now.
func (c *signInCodes) take(code string, now time.Time) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[code]
	delete(c.m, code)
	return e.user, ok && now.Before(e.until)
}

func (c *signInCodes) add(code string, user int64, until, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]signInCode{}
	}
	for k, e := range c.m { // few at a time: the expired go
		if !now.Before(e.until) {
			delete(c.m, k)
		}
	}
	c.m[code] = signInCode{user: user, until: until}
}

func (s *Server) handleSignInCode(w http.ResponseWriter, r *http.Request, u *store.User) {
	now := s.clock.Now()
	code := newSecret("")
	until := now.Add(signInCodeLife)
	s.signIn.add(code, u.ID, until, now)
	link := (&url.URL{Scheme: "http", Host: r.Host, Path: "/ui/login", RawQuery: url.Values{"code": {code}}.Encode()}).String()
	if r.TLS != nil {
		link = "https" + link[len("http"):]
	}
	writeJSON(w, http.StatusCreated, api.SignInCode{Code: code, URL: link, ExpiresAt: until})
}

func (s *Server) handleSignInRedeem(w http.ResponseWriter, r *http.Request) {
	var req api.SignInRedeem
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	now := s.clock.Now()
	id, ok := s.signIn.take(req.Code, now)
	var owner *store.User
	if ok {
		if name, err := s.store.UserName(r.Context(), id); err == nil {
			if x, err := s.store.UserByName(r.Context(), name); err == nil && !x.Deleted {
				owner = x
			}
		}
	}
	if owner == nil {
		writeError(w, fmt.Errorf("%w: the sign-in code is unknown, used or expired (berth ui makes another)", ErrUnauthorized))
		return
	}
	secret := newSecret("berth_")
	t := &store.Token{ID: store.NewTokenID(), Hash: HashToken(secret), Name: "dashboard sign-in", UserID: owner.ID, User: owner.Name,
		CreatedAt: now, ExpiresAt: now.Add(signInTokenLife)}
	if err := s.store.CreateToken(r.Context(), t); err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("dashboard sign-in", "token", t.ID, "user", owner.Name)
	out := apiToken(t)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
}
