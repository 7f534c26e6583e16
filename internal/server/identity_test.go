package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/store"
)

// call sends a request with token (none when empty) and headers, and
// answers the status and body.
func call(t *testing.T, h *harness, method, token, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.http.URL+api.Version+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k := 0; k+1 < len(header); k += 2 {
		req.Header.Set(header[k], header[k+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func httpStatus(err error) int {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status
	}
	if err == nil {
		return 200
	}
	return -1
}

// Users and tokens through the API: an admin makes users and anyone's
// tokens; a user makes, lists and revokes their own and nothing else; a
// token is shown once and works at once; revoked, expired, or its user
// deleted, it stops working (on this server at once: the cache forgets it).
func TestUsersAndTokensAPI(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	admin := h.c
	if _, err := admin.CreateUser(ctx, api.UserRequest{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateUser(ctx, api.UserRequest{Name: "bob"}); httpStatus(err) != http.StatusConflict {
		t.Errorf("bob twice: %v, want 409", err)
	}
	if _, err := admin.CreateUser(ctx, api.UserRequest{Name: "-x y"}); httpStatus(err) != http.StatusBadRequest {
		t.Errorf("a bad name: %v, want 400", err)
	}
	tok, err := admin.CreateToken(ctx, api.TokenRequest{User: "bob", Name: "laptop"})
	if err != nil || tok.Secret == "" || tok.User != "bob" {
		t.Fatalf("bob's token: %+v %v", tok, err)
	}
	bob := client.New(h.http.URL, tok.Secret)
	if w, err := bob.WhoAmI(ctx); err != nil || w.User != "bob" || w.Admin || w.Kind != "user" {
		t.Errorf("bob's whoami: %+v %v", w, err)
	}
	// Bob's own tokens: made, listed (without secrets), revoked.
	own, err := bob.CreateToken(ctx, api.TokenRequest{Name: "ci", ExpiresIn: 3600})
	if err != nil || own.User != "bob" || own.ExpiresAt == nil || own.ExpiresAt.Sub(time.Now()) < 59*time.Minute {
		t.Fatalf("bob's own token: %+v %v", own, err)
	}
	list, err := bob.Tokens(ctx, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("bob's tokens: %+v %v", list, err)
	}
	for _, x := range list {
		if x.Secret != "" || x.User != "bob" {
			t.Errorf("a listed token: %+v (no secret, bob's only)", x)
		}
	}
	// What bob may not do.
	if _, err := bob.CreateUser(ctx, api.UserRequest{Name: "eve"}); httpStatus(err) != http.StatusForbidden {
		t.Errorf("bob makes a user: %v, want 403", err)
	}
	if _, err := bob.Users(ctx); httpStatus(err) != http.StatusForbidden {
		t.Errorf("bob lists users: %v, want 403", err)
	}
	if _, err := bob.CreateToken(ctx, api.TokenRequest{User: "admin"}); httpStatus(err) != http.StatusForbidden {
		t.Errorf("bob makes the admin a token: %v, want 403", err)
	}
	if _, err := bob.CreateNodeToken(ctx, "n1", api.NodeTokenRequest{}); httpStatus(err) != http.StatusForbidden {
		t.Errorf("bob makes a node's token: %v, want 403", err)
	}
	all, err := admin.Tokens(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var adminTok string
	for _, x := range all {
		if x.User == "admin" {
			adminTok = x.ID
		}
	}
	if err := bob.RevokeToken(ctx, adminTok); httpStatus(err) != http.StatusNotFound {
		t.Errorf("bob revokes the admin's token: %v, want 404", err)
	}
	ci := client.New(h.http.URL, own.Secret)
	if _, err := ci.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bob.RevokeToken(ctx, own.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ci.Nodes(ctx); httpStatus(err) != http.StatusUnauthorized {
		t.Errorf("a revoked token: %v, want 401 at once", err)
	}
	// An expired token (stored so: the server checks the time at each use).
	past := &store.Token{ID: store.NewTokenID(), Hash: HashToken("old-secret"), UserID: 1, ExpiresAt: time.Now().Add(-time.Second)}
	if err := h.st.CreateToken(ctx, past); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, h, "GET", "old-secret", "/nodes", ""); code != http.StatusUnauthorized || !strings.Contains(body, "expired") {
		t.Errorf("an expired token: %d %s, want 401 expired", code, body)
	}
	if _, err := admin.CreateToken(ctx, api.TokenRequest{ExpiresIn: -1}); httpStatus(err) != http.StatusBadRequest {
		t.Errorf("expires_in -1: %v, want 400", err)
	}
	// Bob deleted: his token stops working at once; his name stays on his runs.
	run, err := bob.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteUser(ctx, "admin"); httpStatus(err) != http.StatusBadRequest {
		t.Errorf("deleting admin: %v, want 400", err)
	}
	if err := admin.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Nodes(ctx); httpStatus(err) != http.StatusUnauthorized {
		t.Errorf("a deleted user's token: %v, want 401", err)
	}
	if r, err := admin.Run(ctx, run.Name); err != nil || r.User != "bob" {
		t.Errorf("a deleted user's run: %+v %v, want it still bob's", r, err)
	}
	us, err := admin.Users(ctx)
	if err != nil || len(us) != 1 || us[0].Name != "admin" {
		t.Errorf("users after bob's deletion: %+v %v", us, err)
	}
}

// A node's credential acts only as its node, on the agent endpoints; a
// user's token (not an admin's) gets 403 there; a real agent runs jobs with
// a node's credential.
func TestNodeCredentials(t *testing.T) {
	var logs lockedBuffer
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx := context.Background()
	nt, err := h.c.CreateNodeToken(ctx, "n1", api.NodeTokenRequest{Name: "rack 1"})
	if err != nil || nt.Node != "n1" || nt.Secret == "" {
		t.Fatalf("n1's token: %+v %v", nt, err)
	}
	n1 := nt.Secret
	reg := func(name string) string {
		return `{"name":"` + name + `","addr":"127.0.0.1","cpus":2,"memory":1000000}`
	}
	if code, body := call(t, h, "POST", n1, "/agent/register", reg("n1")); code != 200 {
		t.Fatalf("n1 registers as n1: %d %s", code, body)
	}
	bobTok, err := h.c.CreateToken(ctx, api.TokenRequest{User: "bob"})
	if err == nil {
		t.Fatal("a token for a user that does not exist")
	}
	if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	if bobTok, err = h.c.CreateToken(ctx, api.TokenRequest{User: "bob"}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		token, method, path, body string
	}{
		"n1 registers as n2":          {n1, "POST", "/agent/register", reg("n2")},
		"n1 opens n2's stream":        {n1, "GET", "/agent/stream?node=n2", ""},
		"n1 reports for n2":           {n1, "POST", "/agent/events", `{"node":"n2","events":[]}`},
		"n1 sends n2's metrics":       {n1, "POST", "/agent/metrics", `{"node":"n2","samples":[]}`},
		"n1 reports n2's health":      {n1, "POST", "/agent/health", `{"node":"n2","health":{"status":"failure"}}`},
		"n1 lists runs":               {n1, "GET", "/runs", ""},
		"n1 submits":                  {n1, "POST", "/runs", `{"spec":{"type":"task","commands":["true"]}}`},
		"n1 drains itself":            {n1, "POST", "/nodes/n1/drain", `{}`},
		"n1 makes a token":            {n1, "POST", "/tokens", `{}`},
		"n1 vouches for bob":          {n1, "GET", "/runs", ""}, // with the header, below
		"bob registers a node":        {bobTok.Secret, "POST", "/agent/register", reg("n1")},
		"bob opens n1's stream":       {bobTok.Secret, "GET", "/agent/stream?node=n1", ""},
		"bob reports for n1":          {bobTok.Secret, "POST", "/agent/events", `{"node":"n1","events":[]}`},
		"bob vouches for another":     {bobTok.Secret, "GET", "/runs", ""},
		"bob sends n1's health":       {bobTok.Secret, "POST", "/agent/health", `{"node":"n1","health":{"status":"failure"}}`},
		"bob sends n1's metrics":      {bobTok.Secret, "POST", "/agent/metrics", `{"node":"n1","samples":[]}`},
		"n1 creates a node's token":   {n1, "POST", "/nodes/n1/tokens", `{}`},
		"n1 reads the users":          {n1, "GET", "/users", ""},
		"n1 reads the server":         {n1, "GET", "/server", ""},
		"n1 reads the policy":         {n1, "GET", "/policy", ""},
		"n1 creates steps":            {n1, "POST", "/runs/1/steps", `{}`},
		"n1 polls steps":              {n1, "GET", "/runs/1/steps/next?rank=0", ""},
		"n1 posts step output":        {n1, "POST", "/runs/1/steps/0/output?rank=0&at=0", ""},
		"n1 reads a run":              {n1, "GET", "/runs/1", ""},
		"n1 reads a run's logs":       {n1, "GET", "/runs/1/logs", ""},
		"n1 lists steps":              {n1, "GET", "/steps", ""},
		"n1 lists nodes":              {n1, "GET", "/nodes", ""},
		"n1 reads the priorities":     {n1, "GET", "/priorities", ""},
		"n1 stops a run":              {n1, "POST", "/runs/1/stop", `{}`},
		"n1 lists tokens":             {n1, "GET", "/tokens", ""},
		"n1 reads a run's metrics":    {n1, "GET", "/runs/1/metrics", ""},
		"n1 reloads the policy":       {n1, "POST", "/policy/reload", ""},
		"n1 revokes a token":          {n1, "DELETE", "/tokens/x", ""},
		"n1 deletes a user":           {n1, "DELETE", "/users/bob", ""},
		"n1 signals a run":            {n1, "POST", "/runs/1/signal", `{"signal":9}`},
		"n1 controls a run":           {n1, "POST", "/runs/1/control", `{"action":"hold"}`},
		"n1 plans":                    {n1, "POST", "/plan", `{"spec":{"type":"task","commands":["true"]}}`},
		"n1 resumes itself":           {n1, "POST", "/nodes/n1/resume", `{}`},
		"n1 reads the policy file":    {n1, "GET", "/policy/file", ""},
		"n1 writes the policy file":   {n1, "PUT", "/policy/file", `{}`},
		"n1 cancels a step":           {n1, "POST", "/runs/1/steps/0/cancel", `{}`},
		"n1 reads a step":             {n1, "GET", "/runs/1/steps/0", ""},
		"n1 signals a step":           {n1, "POST", "/runs/1/steps/0/signal", `{"signal":9}`},
		"n1 ends a step":              {n1, "POST", "/runs/1/steps/0/exit?rank=0", `{}`},
		"n1 keeps a step alive":       {n1, "POST", "/runs/1/steps/0/alive", `{}`},
		"n1 attaches to a step":       {n1, "GET", "/runs/1/steps/0/attach?rank=0&side=host", ""},
		"bob's token asserts a login": {bobTok.Secret, "GET", "/whoami", ""},
		"n1 lists secrets":            {n1, "GET", "/secrets", ""},
		"n1 reads a secret":           {n1, "GET", "/secrets/x", ""},
		"n1 sets a secret":            {n1, "PUT", "/secrets/x", `{"value":"v"}`},
		"n1 deletes a secret":         {n1, "DELETE", "/secrets/x", ""},
	} {
		var header []string
		if strings.Contains(name, "vouches") || strings.Contains(name, "asserts") {
			header = []string{api.HeaderUser, "carol", api.HeaderUID, "1234"}
		}
		if code, body := call(t, h, c.method, c.token, c.path, c.body, header...); code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", name, code, body)
		}
	}
	if strings.Contains(logs.String(), "deprecated") {
		t.Errorf("a deprecation logged with no admin token acting as an agent:\n%s", logs.String())
	}
	// A real agent, with n1's credential, runs a job.
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, token: n1})
	r, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"echo on n1\"]\n")})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	end, err := h.c.Logs(ctx, r.Name, client.LogOptions{Follow: true, Job: -1}, func(e api.LogEntry) { out.Write(e.Data) })
	if err != nil || end.Status != api.StatusDone || out.String() != "on n1\n" {
		t.Errorf("a job on n1's agent: %v %q %v", end, out.String(), err)
	}
	// The admin's token still acts as any node (older agents), with a
	// line in the log once.
	for range 2 {
		if code, body := call(t, h, "POST", testToken, "/agent/register", reg("n9")); code != 200 {
			t.Fatalf("the admin's token registers n9: %d %s", code, body)
		}
	}
	if n := strings.Count(logs.String(), "deprecated: an admin's token acts as an agent"); n != 1 {
		t.Errorf("the deprecation logged %d times, want once:\n%s", n, logs.String())
	}
	// Revoked, n1's credential stops working.
	if err := h.c.RevokeToken(ctx, nt.ID); err != nil {
		t.Fatal(err)
	}
	if code, _ := call(t, h, "POST", n1, "/agent/register", reg("n1")); code != http.StatusUnauthorized {
		t.Errorf("a revoked node token: %d, want 401", code)
	}
}

// lockedBuffer is a log sink tests read while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A node's credential that may assert users vouches for its host's Unix
// logins: the first request of an unknown login makes its user (unless
// the server makes none, or the login is not allowed); root is the admin;
// a login named admin is not; runs submitted so are the login's.
func TestAssertedUsers(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	asserting, err := h.c.CreateNodeToken(ctx, "n1", api.NodeTokenRequest{AssertUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	as := func(name, uid string) []string { return []string{api.HeaderUser, name, api.HeaderUID, uid} }
	whoami := func(token string, header []string) (int, api.WhoAmI) {
		code, body := call(t, h, "GET", token, "/whoami", "", header...)
		var w api.WhoAmI
		_ = json.Unmarshal([]byte(body), &w)
		return code, w
	}
	if code, w := whoami(asserting.Secret, as("carol", "1234")); code != 200 || w.User != "carol" || w.Admin || w.Via != "n1" {
		t.Errorf("carol through n1: %d %+v", code, w)
	}
	if u, err := h.st.UserByName(ctx, "carol"); err != nil || u.Admin {
		t.Errorf("carol's user: %+v %v, want made, not an admin", u, err)
	}
	if code, w := whoami(asserting.Secret, as("root", "0")); code != 200 || w.User != "admin" || !w.Admin {
		t.Errorf("root through n1: %d %+v, want the admin", code, w)
	}
	// A local user through the socket never acts as the node itself.
	if code, body := call(t, h, "POST", asserting.Secret, "/agent/register", `{"name":"n1","addr":"127.0.0.1","cpus":2,"memory":1000000}`,
		as("root", "0")...); code != http.StatusForbidden {
		t.Errorf("an asserted user on /agent/register: %d %s, want 403", code, body)
	}
	if code, _ := whoami(asserting.Secret, as("admin", "1001")); code != http.StatusForbidden {
		t.Errorf("the login admin (uid 1001): %d, want 403", code)
	}
	code, body := call(t, h, "POST", asserting.Secret, "/runs", `{"spec":{"type":"task","commands":["true"]},"hold":true}`, as("carol", "1234")...)
	var run api.Run
	if err := json.Unmarshal([]byte(body), &run); code != http.StatusCreated || err != nil || run.User != "carol" {
		t.Errorf("carol's submission through n1: %d %s, want hers", code, body)
	}
	// A node's token without the right, and the server's settings.
	plain, err := h.c.CreateNodeToken(ctx, "n2", api.NodeTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := whoami(plain.Secret, as("carol", "1234")); code != http.StatusForbidden {
		t.Errorf("a node's token that may not assert: %d, want 403", code)
	}
	h.srv.cfg.AllowUsers = []string{"dave"}
	if code, _ := whoami(asserting.Secret, as("erin", "1300")); code != http.StatusForbidden {
		t.Errorf("erin, not allowed: %d, want 403", code)
	}
	if code, w := whoami(asserting.Secret, as("dave", "1301")); code != 200 || w.User != "dave" {
		t.Errorf("dave, allowed: %d %+v", code, w)
	}
	h.srv.cfg.NoAutoUsers = true
	if code, _ := whoami(asserting.Secret, as("frank", "1302")); code != http.StatusForbidden {
		t.Errorf("frank with auto-users off: %d, want 403", code)
	}
	if code, w := whoami(asserting.Secret, as("carol", "1234")); code != 200 || w.User != "carol" {
		t.Errorf("carol, who exists, with auto-users off: %d %+v", code, w)
	}
	// A deleted user is not made again by their next request.
	if err := h.c.DeleteUser(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	h.srv.cfg.NoAutoUsers = false
	h.srv.cfg.AllowUsers = nil
	if code, body := call(t, h, "GET", asserting.Secret, "/runs", "", as("carol", "1234")...); code != http.StatusForbidden || !strings.Contains(body, "deleted") {
		t.Errorf("deleted carol through n1: %d %s, want 403", code, body)
	}
}

// A job's credential acts on its own run's steps and reads, as the run's
// owner, while the run is active, and on nothing else.
func TestJobCredential(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	mine, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	other, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	tok := h.srv.jobToken(mine.ID)
	id := func(r *api.Run) string { return strconv.FormatInt(r.ID, 10) }
	for path, want := range map[string]int{
		"/runs/" + id(mine):            200,
		"/runs/" + mine.Name:           200,
		"/runs/" + id(mine) + "/logs":  200,
		"/runs/" + id(other):           403,
		"/runs/" + id(other) + "/logs": 403,
		"/runs":                        403,
		"/nodes":                       403,
		"/tokens":                      403,
		"/whoami":                      200,
	} {
		if code, body := call(t, h, "GET", tok, path, ""); code != want {
			t.Errorf("GET %s with run %d's credential: %d %s, want %d", path, mine.ID, code, body, want)
		}
	}
	for path, want := range map[string]int{
		"/runs":                         403,
		"/runs/" + id(mine) + "/stop":   403,
		"/runs/" + id(other) + "/steps": 403,
		"/agent/register":               403,
	} {
		if code, body := call(t, h, "POST", tok, path, `{}`); code != want {
			t.Errorf("POST %s with run %d's credential: %d %s, want %d", path, mine.ID, code, body, want)
		}
	}
	// Forged: its last character changed (to another one: a token that
	// ended in 0 stayed itself once, one run in sixteen).
	forged := tok[:len(tok)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(tok, "0")]
	if code, body := call(t, h, "GET", forged, "/runs/"+id(mine), ""); code != http.StatusUnauthorized {
		t.Errorf("a forged job credential: %d %s, want 401", code, body)
	}
	if _, err := h.c.Stop(ctx, id(mine), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run ended", func() bool { return !h.srv.runActive(mine.ID) })
	if code, body := call(t, h, "GET", tok, "/runs/"+id(mine), ""); code != http.StatusUnauthorized {
		t.Errorf("the credential of an ended run: %d %s, want 401", code, body)
	}
}
