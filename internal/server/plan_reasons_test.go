package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
)

// The plan says why a node out of service cannot start a run: a failing
// health check is "unhealthy" with the check's reason, not "offline"; an
// agent gone is offline.
func TestPlanSaysWhyNodeIsOut(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "check.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho scratch disk is full\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "sick", cpus: 2, mon: agent.Monitoring{MetricsEvery: -1, HealthCheck: prog, HealthEvery: 100 * time.Millisecond}})
	stopGone := startAgent(t, h, agentOpts{name: "gone", cpus: 2})
	stopGone()
	waitFor(t, "the drain and the agent gone", func() bool {
		return strings.HasSuffix(node(t, h, "sick").Status, "(failure)") && node(t, h, "gone").Status == "offline"
	})
	p, err := h.c.Plan(context.Background(), api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"sick": "later (node unhealthy (its health check fails): scratch disk is full)",
		"gone": "later (node offline (its agent is not connected))",
	}
	for _, r := range p.Rows {
		if got := r.Fits + " (" + r.Why + ")"; got != want[r.Node] {
			t.Errorf("%s: %q, want %q", r.Node, got, want[r.Node])
		}
	}
}
