package server

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// Two concurrent submissions of one name with UniqueName (berth apply's):
// one run is made, the other is refused with a conflict that names the
// active run; once it ends, the name may be used again, and the old run
// stays reachable by its ID.
func TestUniqueActiveName(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	req := api.SubmitRequest{Spec: task(t, "type: task\nname: once\ncommands: [\"sleep 60\"]\n"), UniqueName: true}
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	runs := make([]*api.Run, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = h.c.Submit(ctx, req)
		}()
	}
	wg.Wait()
	var made []int64
	for i, err := range errs {
		switch {
		case err == nil:
			made = append(made, runs[i].ID)
		case errors.Is(err, client.ErrConflict):
			if msg := err.Error(); !strings.Contains(msg, "run once is active") || strings.Contains(msg, "server:") {
				t.Errorf("conflict message %q: want the active run named, no package prefix", msg)
			}
		default:
			t.Errorf("submission %d: %v, want a conflict", i, err)
		}
	}
	if len(made) != 1 {
		t.Fatalf("%d runs made of one name, want 1 (%v)", len(made), made)
	}
	listed, err := h.c.Runs(ctx, client.ListOptions{All: true})
	if err != nil || len(listed) != 1 {
		t.Fatalf("runs stored: %d (%v), want 1", len(listed), err)
	}
	// The plan names the active run, with its configuration.
	p, err := h.c.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if p.Active == nil || p.Active.ID != made[0] || p.Active.Spec == nil || p.Active.Spec.Commands[0] != "sleep 60" {
		t.Fatalf("plan's active run = %+v, want run %d with its configuration", p.Active, made[0])
	}
	// Without UniqueName (Slurm's job names repeat) a second run is made.
	dup, err := h.c.Submit(ctx, api.SubmitRequest{Spec: req.Spec})
	if err != nil {
		t.Fatalf("a submission without UniqueName: %v", err)
	}
	for _, id := range []int64{made[0], dup.ID} {
		if _, err := h.c.Stop(ctx, fmt.Sprint(id), false); err != nil {
			t.Fatal(err)
		}
	}
	again, err := h.c.Submit(ctx, req)
	if err != nil {
		t.Fatalf("the name once its runs ended: %v", err)
	}
	if again.ID == made[0] {
		t.Fatalf("reused ID %d", again.ID)
	}
	old, err := h.c.Run(ctx, fmt.Sprint(made[0]))
	if err != nil || old.Status != api.StatusTerminated {
		t.Errorf("the first run by ID: %v, %v; want it terminated", old, err)
	}
	if p, err := h.c.Plan(ctx, req); err != nil || p.Active == nil || p.Active.ID != again.ID {
		t.Errorf("the plan's active run after reuse: %+v, %v; want %d", p.Active, err, again.ID)
	}
}

// stop NAME stops the name's active run, even where a newer run of that
// name has ended, and a scheduled configuration's schedule rather than the
// runs it fired; a name with only finished runs changes nothing.
func TestStopNameActsOnActiveRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	active := submit(t, h, "type: task\nname: twice\ncommands: [\"sleep 60\"]\n")
	newer := submit(t, h, "type: task\nname: twice\ncommands: [\"sleep 60\"]\n")
	if _, err := h.c.Stop(ctx, fmt.Sprint(newer.ID), false); err != nil {
		t.Fatal(err)
	}
	got, err := h.c.Stop(ctx, "twice", false)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != active.ID || got.Status != api.StatusTerminated {
		t.Errorf("stop twice answered run %d %s, want the active run %d, terminated", got.ID, got.Status, active.ID)
	}
	if r, err := h.c.Run(ctx, "twice"); err != nil || r.ID != newer.ID {
		t.Errorf("with none active, the name is the newest run: %v, %v; want %d", r, err, newer.ID)
	}
	again, err := h.c.Stop(ctx, "twice", false)
	if err != nil || again.ID != newer.ID || again.Status != api.StatusTerminated {
		t.Errorf("stop of a name whose runs ended: %+v, %v", again, err)
	}

	sched := submit(t, h, "type: task\nname: nightly\nschedule:\n  cron: \"0 3 * * *\"\ncommands: [\"true\"]\n")
	if sched.Status != api.StatusScheduled {
		t.Fatalf("schedule made %s", sched.Status)
	}
	got, err = h.c.Stop(ctx, "nightly", false)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != sched.ID || !got.Status.Finished() {
		t.Errorf("stop nightly: run %d %s, want the schedule %d ended", got.ID, got.Status, sched.ID)
	}
}

// The API's refusals speak the user's words: along the main error paths
// (missing runs by ID and name, a bad configuration, an unknown project,
// a conflict, a forbidden change, a bad token, missing users, projects,
// secrets and nodes) no message carries a Go package's prefix.
func TestErrorsHaveNoPackagePrefix(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	bob := h.userClient(t, "bob")
	mine := submit(t, h, "type: task\nname: mine\ncommands: [\"sleep 60\"]\n")
	calls := map[string]func() error{
		"run by ID":    func() error { _, err := h.c.Run(ctx, "4242"); return err },
		"run by name":  func() error { _, err := h.c.Run(ctx, "no-such-run"); return err },
		"stop by ID":   func() error { _, err := h.c.Stop(ctx, "4242", false); return err },
		"stop by name": func() error { _, err := h.c.Stop(ctx, "no-such-run", true); return err },
		"logs": func() error {
			_, err := h.c.Logs(ctx, "4242", client.LogOptions{Job: -1}, func(api.LogEntry) {})
			return err
		},
		"control": func() error { _, err := h.c.Control(ctx, "4242", api.ControlRequest{Action: "hold"}); return err },
		"bad configuration": func() error {
			code, msg := post(t, h, testToken, "/api/v1/runs", `{"spec":{"commands":["true"],"resorces":{}},"source":"a.yml"}`)
			return &client.APIError{Status: code, Message: msg}
		},
		"unknown project": func() error {
			_, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nproject: nope\ncommands: [x]\n")})
			return err
		},
		"name conflict": func() error {
			_, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nname: mine\ncommands: [x]\n"), UniqueName: true})
			return err
		},
		"forbidden nice": func() error {
			_, err := bob.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nnice: -5\ncommands: [x]\n")})
			return err
		},
		"bad token":           func() error { _, err := h.c.WithToken("nope").Runs(ctx, client.ListOptions{}); return err },
		"missing user":        func() error { return h.c.DeleteUser(ctx, "nobody") },
		"missing project":     func() error { return h.c.DeleteProject(ctx, "nowhere") },
		"missing secret":      func() error { _, err := h.c.Secret(ctx, "nothing"); return err },
		"missing node":        func() error { _, err := h.c.Drain(ctx, "no-node", "x"); return err },
		"a user's admin call": func() error { _, err := bob.Users(ctx); return err },
		"missing array task":  func() error { _, err := h.c.Run(ctx, "4242_7"); return err },
		"stop a foreign run":  func() error { _, err := bob.Stop(ctx, fmt.Sprint(mine.ID), false); return err },
		"step of missing run": func() error {
			_, err := h.c.CreateStep(ctx, "4242", api.StepRequest{Argv: []string{"true"}})
			return err
		},
		"metrics, missing run": func() error { _, err := h.c.RunMetrics(ctx, "4242", client.MetricsOptions{}); return err },
	}
	leak := regexp.MustCompile(`(^|[ :])(server|store|sql|control|sched|spec|secrets|client|lifecycle|policy): `)
	for name, call := range calls {
		err := call()
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("%s: %v, want the server's refusal", name, err)
			continue
		}
		if leak.MatchString(apiErr.Message) {
			t.Errorf("%s: %q shows a package's name", name, apiErr.Message)
		}
	}
	// Not found reads as such, with what was looked for.
	if _, err := h.c.Run(ctx, "4242"); err == nil || err.Error() != "run 4242 not found" {
		t.Errorf("a missing run: %v, want %q", err, "run 4242 not found")
	}
	if _, err := h.c.Run(ctx, "no-such-run"); err == nil || err.Error() != `run "no-such-run" not found` {
		t.Errorf("a missing name: %v", err)
	}
}

func TestPublicMessage(t *testing.T) {
	tests := map[string]string{
		`run "x": store: not found`:                             `run "x" not found`,
		"server: invalid request: a.yml: commands: required":    "a.yml: commands: required",
		"server: conflict: run x is active":                     "run x is active",
		"server: not found":                                     "not found",
		"server: unauthorized":                                  "unauthorized",
		"store: run 3: sql: database is closed":                 "run 3: database is closed",
		"server: forbidden: nice -5: only an administrator may": "nice -5: only an administrator may",
		"policy.yml:5: qos.high: unknown":                       "policy.yml:5: qos.high: unknown",
	}
	for in, want := range tests {
		if got := publicMessage(in); got != want {
			t.Errorf("publicMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
