package server

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// A user stops, signals, holds and updates their own runs only (Slurm:
// Access/permission denied); an admin does any user's.
func TestOwnerOnly(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	bob := h.userClient(t, "bob")
	theirs := submit(t, h, "type: task\nnodes: 5\ncommands: [\"true\"]\n") // admin's, waiting
	ref := strconv.FormatInt(theirs.ID, 10)
	forbidden := func(what string, err error) {
		t.Helper()
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 403 || !contains(apiErr.Message, "Access/permission denied") {
			t.Errorf("bob's %s of admin's run: %v, want 403 Access/permission denied", what, err)
		}
	}
	_, err := bob.Stop(ctx, ref, false)
	forbidden("stop", err)
	_, err = bob.Control(ctx, ref, api.ControlRequest{Action: "hold"})
	forbidden("hold", err)
	_, err = bob.Signal(ctx, ref, 10, false)
	forbidden("signal", err)
	if r, err := h.c.Run(ctx, ref); err != nil || r.Status != api.StatusSubmitted {
		t.Fatalf("admin's run after bob's tries: %+v, %v", r, err)
	}

	mine, err := bob.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nnodes: 5\ncommands: [\"true\"]\n")})
	if err != nil {
		t.Fatal(err)
	}
	mref := strconv.FormatInt(mine.ID, 10)
	if _, err := bob.Control(ctx, mref, api.ControlRequest{Action: "hold"}); err != nil {
		t.Errorf("bob's hold of his own run: %v", err)
	}
	if _, err := h.c.Stop(ctx, mref, false); err != nil {
		t.Errorf("admin's stop of bob's run: %v", err)
	}
}
