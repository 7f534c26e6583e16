package server

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// Roles: a project's manager adds and removes users and managers but not
// admins; its admin any member, and changes (stops) its members' runs; a
// user changes neither. A global admin makes and deletes projects; the
// default one cannot be deleted, nor one with active runs.
func TestProjectRoles(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	as := map[string]*client.Client{}
	for _, u := range []string{"ann", "max", "uma", "zed"} {
		if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: u}); err != nil {
			t.Fatal(err)
		}
		tok, err := h.c.CreateToken(ctx, api.TokenRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		as[u] = client.New(h.http.URL, tok.Secret)
	}
	if _, err := as["ann"].CreateProject(ctx, "lab"); httpStatus(err) != http.StatusForbidden {
		t.Errorf("a user makes a project: %v, want 403", err)
	}
	if _, err := h.c.CreateProject(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	for u, role := range map[string]string{"ann": RoleAdmin, "max": RoleManager, "uma": RoleUser} {
		if _, err := h.c.SetMember(ctx, "lab", u, role); err != nil {
			t.Fatal(err)
		}
	}
	// In order: each step starts from the last one's members.
	for _, c := range []struct {
		name, by, user, role string
		remove               bool
		want                 int
	}{
		{"a manager adds a user", "max", "zed", RoleUser, false, http.StatusCreated},
		{"a manager makes an admin", "max", "zed", RoleAdmin, false, http.StatusForbidden},
		{"a manager demotes an admin", "max", "ann", RoleUser, false, http.StatusForbidden},
		{"a manager removes an admin", "max", "ann", "", true, http.StatusForbidden},
		{"a user adds a user", "uma", "zed", RoleUser, false, http.StatusForbidden},
		{"an admin makes a manager", "ann", "zed", RoleManager, false, http.StatusOK},
		{"a bad role", "ann", "zed", "owner", false, http.StatusBadRequest},
		{"a user nobody made", "ann", "nobody", RoleUser, false, http.StatusNotFound},
		{"an admin removes the manager", "ann", "zed", "", true, http.StatusNoContent},
	} {
		t.Run(c.name, func(t *testing.T) {
			var code int
			if c.remove {
				code, _ = call(t, h, "DELETE", tokenOf(t, h, c.by), "/projects/lab/members/"+c.user, "")
			} else {
				code, _ = call(t, h, "PUT", tokenOf(t, h, c.by), "/projects/lab/members/"+c.user, `{"role":"`+c.role+`"}`)
			}
			if code != c.want {
				t.Errorf("%d, want %d", code, c.want)
			}
			if c.want == http.StatusCreated || c.want == http.StatusOK {
				if _, err := h.c.SetMember(ctx, "lab", c.user, RoleUser); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// uma's run in lab: ann (its admin) stops it, max (manager) may not.
	r, err := as["uma"].Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nproject: lab\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil || r.Project != "lab" {
		t.Fatalf("uma's run in lab: %+v %v", r, err)
	}
	ref := strconv.FormatInt(r.ID, 10)
	if _, err := as["max"].Stop(ctx, ref, false); httpStatus(err) != http.StatusForbidden {
		t.Errorf("the manager stops uma's run: %v, want 403", err)
	}
	if err := h.c.DeleteProject(ctx, "lab"); httpStatus(err) != http.StatusConflict {
		t.Errorf("deleting lab with an active run: %v, want 409", err)
	}
	if _, err := as["ann"].Stop(ctx, ref, false); err != nil {
		t.Errorf("lab's admin stops uma's run: %v", err)
	}
	waitFor(t, "uma's run ended", func() bool { return !h.srv.runActive(r.ID) })
	if err := h.c.DeleteProject(ctx, DefaultProject); httpStatus(err) != http.StatusBadRequest {
		t.Errorf("deleting main: %v, want 400", err)
	}
	if err := h.c.DeleteProject(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	// lab's members lost it: uma's run there is hers still, no one else's.
	if _, err := as["max"].Run(ctx, ref); httpStatus(err) != http.StatusNotFound {
		t.Errorf("max reads uma's run of a deleted project: %v, want 404", err)
	}
	if _, err := as["uma"].Run(ctx, ref); err != nil {
		t.Errorf("uma reads her own run: %v", err)
	}
	if _, err := as["uma"].Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nproject: lab\ncommands: [\"true\"]\n")}); httpStatus(err) != http.StatusBadRequest {
		t.Errorf("a submission to a deleted project: %v, want 400", err)
	}
}

// --private-data jobs: another member's runs are not found, except by the
// project's managers; logs: their output is refused (403), the run shown.
func TestPrivateData(t *testing.T) {
	for name, pd := range map[string]PrivateData{"jobs": {Jobs: true}, "logs": {Logs: true}} {
		t.Run(name, func(t *testing.T) {
			h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.PrivateData = pd })
			ctx := context.Background()
			for _, u := range []string{"ann", "max"} {
				if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: u}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.c.SetMember(ctx, DefaultProject, "max", RoleManager); err != nil {
				t.Fatal(err)
			}
			r := submit(t, h, "type: task\ncommands: [\"true\"]\n") // admin's
			ref := strconv.FormatInt(r.ID, 10)
			wantRun, wantLogs := http.StatusOK, http.StatusForbidden
			if pd.Jobs {
				wantRun, wantLogs = http.StatusNotFound, http.StatusNotFound
			}
			if code, body := call(t, h, "GET", tokenOf(t, h, "ann"), "/runs/"+ref, ""); code != wantRun {
				t.Errorf("ann reads admin's run: %d %s, want %d", code, body, wantRun)
			}
			if code, body := call(t, h, "GET", tokenOf(t, h, "ann"), "/runs/"+ref+"/logs", ""); code != wantLogs {
				t.Errorf("ann reads admin's logs: %d %s, want %d", code, body, wantLogs)
			}
			if code, body := call(t, h, "GET", tokenOf(t, h, "max"), "/runs/"+ref+"/logs", ""); code != http.StatusOK {
				t.Errorf("max (manager) reads admin's logs: %d %s", code, body)
			}
			rs, err := client.New(h.http.URL, tokenOf(t, h, "ann")).Runs(ctx, client.ListOptions{All: true})
			if err != nil || len(rs) != map[bool]int{true: 0, false: 1}[pd.Jobs] {
				t.Errorf("ann's listing: %d runs %v", len(rs), err)
			}
		})
	}
}

// tokenOf makes a new token of user u.
func tokenOf(t *testing.T, h *harness, u string) string {
	t.Helper()
	tok, err := h.c.CreateToken(context.Background(), api.TokenRequest{User: u})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}
