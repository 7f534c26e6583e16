package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// A backend fleet file is refused, changing nothing, when the server has
// no provider for its backends or it has no name; the message says why.
func TestBackendFleetApplyRefusals(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	parse := func(yaml string) *spec.Fleet {
		t.Helper()
		f, err := spec.ParseFleet("fleet.yml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := map[string]struct {
		yaml, want string
	}{
		"no provider": {"type: fleet\nname: dyn\nnodes: 0..2\n", `fleet dyn: backends: "docker" is not configured on this server`},
		"no name":     {"type: fleet\nnodes: 0..2\n", "name: required for a fleet"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, plan := range []bool{true, false} {
				req := api.FleetApplyRequest{Spec: parse(tc.yaml), Plan: plan}
				_, err := h.c.PlanFleet(ctx, req)
				if !plan {
					_, err = h.c.ApplyFleet(ctx, req)
				}
				var apiErr *client.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "policy:") {
					t.Errorf("plan=%v: %v, want 400 saying %q", plan, err, tc.want)
				}
			}
			if fs, err := h.c.Fleets(ctx); err != nil || len(fs) != 0 {
				t.Errorf("fleets after a refused apply: %+v, %v", fs, err)
			}
		})
	}
}
