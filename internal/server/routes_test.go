package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// The secrets of the foreign run (carol's, in a project alice is not in):
// no byte of them may reach alice, nor anyone without a credential for it.
const (
	foreignName    = "zz-foreign-run-9c1e"
	foreignCmd     = "CMDMARK51b2"
	foreignLog     = "FOREIGN-LOG7f3a"
	foreignProject = "zz-secret-proj"
	foreignPending = "zz-foreign-wait-4d0b"
	foreignStep    = "STEPMARK88e1"
)

// blobX is the SHA-256 of "x", a blob the route table uploads.
const blobX = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"

// The columns of the route table: who calls, about which run.
const (
	colOwn     = iota // alice, about her run
	colSame           // alice, about bob's run in their project
	colForeign        // alice, about carol's run in another project
	colMissing        // alice, about a run that does not exist
	colNone           // no token, about carol's run
	colWrong          // a token the server never made
	colRevoked        // alice's revoked token
	colExpired        // alice's expired token
	colNode           // the node's credential (node n1)
	colJob            // the job credential of bob's run, about carol's run
	numCols
)

var colNames = [numCols]string{"own", "same-project", "other-project", "missing", "no token", "wrong token", "revoked", "expired", "node token", "job token"}

// TestRouteTable goes through every route of the API (the mux in
// server.go) × {own run, same-project run, other-project run, a missing
// run, no token, a wrong, revoked or expired token, a node's token, a job
// credential of another run}: each answer has the status the table says,
// an other-project run is answered exactly as a missing one (not found,
// never forbidden), and no answer holds a byte of the foreign run: its
// name, command, log line, step or project.
func TestRouteTable(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.PrivateData = PrivateData{Logs: true} })
	h.srv.stepPollWait.Store(int64(100 * time.Millisecond))
	ctx := context.Background()
	nt, err := h.c.CreateNodeToken(ctx, "n1", api.NodeTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, h, agentOpts{name: "n1", cpus: 4, token: nt.Secret})

	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: u}); err != nil {
			t.Fatal(err)
		}
		tok, err := h.c.CreateToken(ctx, api.TokenRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tok.Secret
	}
	if _, err := h.c.CreateProject(ctx, foreignProject); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.SetMember(ctx, foreignProject, "carol", RoleUser); err != nil {
		t.Fatal(err)
	}
	if err := h.c.RemoveMember(ctx, DefaultProject, "carol"); err != nil {
		t.Fatal(err)
	}
	as := func(u string) *client.Client { return client.New(h.http.URL, tokens[u]) }
	run := func(u, yaml string) *api.Run {
		r, err := as(u).Submit(ctx, api.SubmitRequest{Spec: task(t, yaml)})
		if err != nil {
			t.Fatalf("%s's run: %v", u, err)
		}
		// Its jobs must not outlive the test (an agent's jobs survive
		// the agent): aborted, and waited for, before the server stops.
		t.Cleanup(func() {
			_, _ = h.c.Stop(ctx, fmt.Sprint(r.ID), true)
			for range 200 {
				if x, err := h.c.Run(ctx, fmt.Sprint(r.ID)); err != nil || x.FinishedAt != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		return r
	}
	mine := run("alice", "type: task\nname: alices\ncommands: [\"echo alice-line; sleep 600\"]\n")
	bobs := run("bob", "type: task\nname: bobs\ncommands: [\"echo bob-line; sleep 600\"]\n")
	foreign := run("carol", "type: task\nname: "+foreignName+"\nproject: "+foreignProject+"\ncommands: [\"printf '%s-%s\\\\n' FOREIGN LOG7f3a; true "+foreignCmd+"; sleep 600\"]\n")
	run("carol", "type: task\nname: "+foreignPending+"\nproject: "+foreignProject+"\nresources: {cpu: 64}\ncommands: [\"true "+foreignCmd+"\"]\n")
	if foreign.Project != foreignProject {
		t.Fatalf("carol's run is in %q", foreign.Project)
	}
	for _, r := range []*api.Run{mine, bobs, foreign} {
		waitFor(t, r.Name+" running with output", func() bool {
			got, err := h.c.Run(ctx, strconv.FormatInt(r.ID, 10))
			return err == nil && got.Status == api.StatusRunning && len(got.Jobs) > 0 && got.Jobs[0].LogSize > 0
		})
	}
	// A step of carol's run, with the foreign marker in its command.
	if _, err := as("carol").CreateStep(ctx, strconv.FormatInt(foreign.ID, 10), api.StepRequest{Argv: []string{"echo", foreignStep}, NTasks: 1}); err != nil {
		t.Fatalf("carol's step: %v", err)
	}

	// alice's tokens: one revoked, one expired (an hour's, an hour on).
	revoked, err := h.c.CreateToken(ctx, api.TokenRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.RevokeToken(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	expired, err := h.c.CreateToken(ctx, api.TokenRequest{User: "alice", ExpiresIn: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token's expiry", func() bool { return time.Now().After(expired.ExpiresAt.Add(10 * time.Millisecond)) })
	carolTokens, err := as("carol").Tokens(ctx, "")
	if err != nil || len(carolTokens) == 0 {
		t.Fatalf("carol's tokens: %v %v", carolTokens, err)
	}

	const missing = int64(987654)
	ids := [numCols]int64{mine.ID, bobs.ID, foreign.ID, missing}
	creds := [numCols]string{tokens["alice"], tokens["alice"], tokens["alice"], tokens["alice"], "", "berth_" + strings.Repeat("0", 48),
		revoked.Secret, expired.Secret, nt.Secret, h.srv.jobToken(bobs.ID)}
	for c := colNone; c < numCols; c++ {
		ids[c] = foreign.ID
	}
	projects := [numCols]string{DefaultProject, DefaultProject, foreignProject, "zz-no-such-project"}
	for c := colNone; c < numCols; c++ {
		projects[c] = foreignProject
	}

	// The routes, each with its answer per column: own, same, foreign,
	// missing, none, wrong, revoked, expired, node, job. {run} is the
	// column's run, {project} its project. Listings (no {run}) are asked
	// by every column alike: their bodies must not list the foreign run.
	const (
		authed = "401 401 401 401 403 403" // none, wrong, revoked, expired, node, job on a user route
	)
	routes := []struct {
		method, path, body string
		want               string
		header             []string
	}{
		{"POST", "/runs", `{"spec":{"type":"task","project":"{project}","commands":["true"]},"hold":true}`, "201 201 400 400 " + authed, nil},
		{"POST", "/plan", `{"spec":{"type":"task","commands":["true"]}}`, "200 200 200 200 " + authed, nil},
		{"GET", "/runs?all=1&jobs=1&spec=1", "", "200 200 200 200 " + authed, nil},
		{"GET", "/runs/{run}", "", "200 200 404 404 401 401 401 401 403 403", nil},
		{"POST", "/runs/{run}/control", `{"action":"update","tags":{"k":"v"}}`, "200 403 404 404 " + authed, nil},
		{"POST", "/runs/{run}/signal", `{"signal":28}`, "200 403 404 404 " + authed, nil},
		{"GET", "/runs/{run}/logs", "", "200 403 404 404 401 401 401 401 403 403", nil},
		{"GET", "/runs/{run}/logs?follow=1", "", "200 403 404 404 401 401 401 401 403 403", nil},
		{"GET", "/runs/{run}/metrics", "", "200 403 404 404 " + authed, nil},
		{"GET", "/nodes", "", "200 200 200 200 " + authed, nil},
		{"POST", "/nodes/n1/drain", `{}`, "403 403 403 403 " + authed, nil},
		{"POST", "/nodes/n1/resume", `{}`, "403 403 403 403 " + authed, nil},
		{"POST", "/nodes/n1/tokens", `{}`, "403 403 403 403 " + authed, nil},
		{"GET", "/server", "", "200 200 200 200 " + authed, nil},
		{"GET", "/priorities", "", "200 200 200 200 " + authed, nil},
		{"GET", "/policy", "", "200 200 200 200 " + authed, nil},
		{"GET", "/usage?project=" + DefaultProject + "&since=2020-01-01T00:00:00Z", "", "200 200 200 200 " + authed, nil},
		{"GET", "/usage", "", "200 200 200 200 " + authed, nil},
		{"GET", "/fairshare", "", "200 200 200 200 " + authed, nil},
		{"POST", "/policy/reload", "", "403 403 403 403 " + authed, nil},
		{"GET", "/policy/file", "", "404 404 404 404 " + authed, nil},
		{"PUT", "/policy/file", `{"text":"","version":""}`, "403 403 403 403 " + authed, nil},
		{"POST", "/users", `{"name":"eve"}`, "403 403 403 403 " + authed, nil},
		{"GET", "/users", "", "403 403 403 403 " + authed, nil},
		{"DELETE", "/users/carol", "", "403 403 403 403 " + authed, nil},
		{"POST", "/tokens", `{}`, "201 201 201 201 " + authed, nil},
		{"GET", "/tokens", "", "200 200 200 200 " + authed, nil},
		{"DELETE", "/tokens/" + carolTokens[0].ID, "", "404 404 404 404 " + authed, nil},
		{"GET", "/whoami", "", "200 200 200 200 401 401 401 401 200 200", nil},
		{"POST", "/signin-codes", `{}`, "201 201 201 201 " + authed, nil},
		{"POST", "/signin-codes/redeem", `{"code":"not-a-code"}`, "401 401 401 401 401 401 401 401 401 401", nil},
		{"POST", "/projects", `{"name":"eve-proj"}`, "403 403 403 403 " + authed, nil},
		{"GET", "/projects?members=1", "", "200 200 200 200 " + authed, nil},
		{"DELETE", "/projects/{project}", "", "403 403 403 403 " + authed, nil},
		{"GET", "/projects/{project}/members", "", "200 200 404 404 " + authed, nil},
		{"PUT", "/projects/{project}/members/alice", `{"role":"admin"}`, "403 403 404 404 " + authed, nil},
		{"DELETE", "/projects/{project}/members/bob", "", "403 403 404 404 " + authed, nil},
		{"POST", "/agent/register", `{"name":"n2","cpus":1}`, "403 403 403 403 401 401 401 401 403 403", nil},
		{"GET", "/agent/stream?node=n2", "", "403 403 403 403 401 401 401 401 403 403", nil},
		{"POST", "/agent/events", `{"node":"n2","events":[]}`, "403 403 403 403 401 401 401 401 403 403", nil},
		{"POST", "/agent/metrics", `{"node":"n2","samples":[]}`, "403 403 403 403 401 401 401 401 403 403", nil},
		{"POST", "/agent/health", `{"node":"n2","health":{"status":"ok"}}`, "403 403 403 403 401 401 401 401 403 403", nil},
		{"POST", "/runs/{run}/steps", `{"argv":["true"],"ntasks":1}`, "200 403 404 404 401 401 401 401 403 403", nil},
		{"GET", "/runs/{run}/steps/next?rank=0", "", "200 403 410 410 401 401 401 401 403 403", nil},
		{"GET", "/runs/{run}/steps/0?wait=0", "", "200 403 404 404 401 401 401 401 403 403", nil},
		{"POST", "/runs/{run}/steps/0/output?rank=0&at=0&fd=1", "x", "200 403 404 404 401 401 401 401 403 403", nil},
		{"POST", "/runs/{run}/steps/0/alive", `{}`, "204 403 404 404 401 401 401 401 403 403", nil},
		{"POST", "/runs/{run}/steps/0/signal", `{"signal":28}`, "204 403 404 404 401 401 401 401 403 403", nil},
		{"GET", "/runs/{run}/steps/0/attach?side=client", "", "400 403 404 404 401 401 401 401 403 403", nil},
		{"POST", "/runs/{run}/steps/0/cancel", `{}`, "204 403 404 404 401 401 401 401 403 403", nil},
		{"POST", "/runs/{run}/steps/0/exit?rank=0", `{"code":0}`, "204 403 404 404 401 401 401 401 403 403", nil},
		{"GET", "/steps?runs={run}", "", "200 200 200 200 " + authed, nil},
		{"PUT", "/blobs/" + blobX, "x", "200 200 200 200 " + authed, nil},
		{"GET", "/blobs/" + blobX, "", "200 200 200 200 " + authed, nil},
		{"GET", "/runs/{run}/blobs/" + blobX, "", "404 403 404 404 401 401 401 401 403 403", nil},
		// Stopping comes last: it ends alice's run.
		{"POST", "/runs/{run}/stop", `{}`, "200 403 404 404 " + authed, nil},
	}
	secrets := []string{foreignName, foreignCmd, foreignLog, foreignProject, foreignPending, foreignStep}
	for _, rt := range routes {
		want := strings.Fields(rt.want)
		if len(want) != numCols {
			t.Fatalf("%s %s: %d answers in the table, want %d", rt.method, rt.path, len(want), numCols)
		}
		var foreignBody string
		for c := range numCols {
			if rt.method == "POST" && rt.path == "/runs/{run}/stop" && c == colOwn {
				continue // below, once the others are asked
			}
			path, reqBody := expand(rt.path, ids[c], projects[c]), expand(rt.body, ids[c], projects[c])
			code, body := routeCall(t, h, rt.method, path, creds[c], reqBody)
			// What the caller wrote (a project's name) may come back.
			checkAnswer(t, rt.method+" "+rt.path, colNames[c], want[c], code, body,
				slices.DeleteFunc(slices.Clone(secrets), func(s string) bool { return strings.Contains(path+reqBody, s) }))
			switch c {
			case colForeign:
				foreignBody = strings.ReplaceAll(body, strconv.FormatInt(foreign.ID, 10), "ID")
				foreignBody = strings.ReplaceAll(foreignBody, foreignProject, "PROJECT")
			case colMissing:
				if !strings.Contains(rt.path, "{") {
					continue // a listing: the same for both
				}
				b := strings.ReplaceAll(body, strconv.FormatInt(missing, 10), "ID")
				b = strings.ReplaceAll(b, "zz-no-such-project", "PROJECT")
				if b != foreignBody && !strings.HasPrefix(rt.path, "/runs?") {
					t.Errorf("%s %s: another project's run is told apart from a missing one:\n  foreign: %s\n  missing: %s", rt.method, rt.path, foreignBody, b)
				}
			}
		}
	}
	code, body := routeCall(t, h, "POST", expand("/runs/{run}/stop", mine.ID, ""), tokens["alice"], `{}`)
	checkAnswer(t, "POST /runs/{run}/stop", colNames[colOwn], "200", code, body, secrets)

	// What alice lists is hers and bob's, never carol's; carol's run is
	// untouched by all of it.
	rs, err := as("alice").Runs(ctx, client.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Project != DefaultProject {
			t.Errorf("alice lists run %d of project %s", r.ID, r.Project)
		}
	}
	got, err := h.c.Run(ctx, strconv.FormatInt(foreign.ID, 10))
	if err != nil || got.Status != api.StatusRunning {
		t.Errorf("carol's run after the table: %+v %v, want running", got, err)
	}
}

func expand(s string, id int64, project string) string {
	s = strings.ReplaceAll(s, "{run}", strconv.FormatInt(id, 10))
	return strings.ReplaceAll(s, "{project}", project)
}

// routeCall asks the API, reading at most 2 s of a streamed answer.
func routeCall(t *testing.T, h *harness, method, path, token, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.http.URL+api.Version+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // a stream: until the deadline
	return resp.StatusCode, string(b)
}

func checkAnswer(t *testing.T, route, col, want string, code int, body string, secrets []string) {
	t.Helper()
	if got := fmt.Sprint(code); got != want {
		t.Errorf("%s as %s: %s %.300s, want %s", route, col, got, body, want)
	}
	for _, s := range secrets {
		if strings.Contains(body, s) {
			t.Errorf("%s as %s: the answer holds %q of carol's run: %.300s", route, col, s, body)
		}
	}
}
