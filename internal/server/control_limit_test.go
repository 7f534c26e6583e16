package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

// A job that runs long, saying "ready" once it has started.
const longJob = "type: task\nmax_duration: %s\ncommands:\n  - echo ready\n  - for i in $(seq 300); do sleep 0.1; done\n  - echo finished\n"

// waitReady waits until the run's job runs and has written its first line.
func waitReady(t *testing.T, h *harness, id int64) {
	t.Helper()
	waitFor(t, "the job to be ready", func() bool {
		got, err := h.c.Run(context.Background(), fmt.Sprint(id))
		return err == nil && got.Status == api.StatusRunning && len(got.Jobs) > 0 && got.Jobs[0].LogSize > 0
	})
}

func setLimit(c interface {
	Control(context.Context, string, api.ControlRequest) (*api.Run, error)
}, id int64, secs int64) error {
	_, err := c.Control(context.Background(), fmt.Sprint(id), api.ControlRequest{Action: "update", TimeLimit: &secs})
	return err
}

func specLimit(t *testing.T, h *harness, id int64) string {
	t.Helper()
	r, err := h.c.Run(context.Background(), fmt.Sprint(id))
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec == nil || r.Spec.MaxDuration == nil {
		return "none"
	}
	return fmt.Sprint(int64(*r.Spec.MaxDuration))
}

// scontrol update TimeLimit= on running jobs: a lowered limit already
// passed ends the job with the time-limit reason (Slurm's TIMEOUT); only an
// admin may raise one, and a raised limit lets the job run past its old one.
func TestUpdateTimeLimitRunning(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})

	lowered := submit(t, h, fmt.Sprintf(longJob, "1h"))
	waitReady(t, h, lowered.ID)
	if err := setLimit(h.c, lowered.ID, 1); err != nil {
		t.Fatal(err)
	}
	out, end := follow(t, h, lowered.ID)
	if end.Status != api.StatusTerminated || end.Reason != api.ReasonMaxDuration || strings.Contains(out, "finished") {
		t.Errorf("lowered to 1s: %s (%s), output %q; want terminated (%s)", end.Status, end.Reason, out, api.ReasonMaxDuration)
	}
	if got := specLimit(t, h, lowered.ID); got != "1" {
		t.Errorf("lowered run's max_duration %s, want 1", got)
	}

	// The old limit (5s) is shorter than the job (8s).
	raised := submit(t, h, "type: task\nmax_duration: 5s\ncommands:\n  - echo ready\n  - sleep 8\n  - echo survived\n")
	waitReady(t, h, raised.ID)
	bob := h.userClient(t, "bob")
	err := setLimit(bob, raised.ID, 60)
	if err == nil || !strings.Contains(err.Error(), "Slurm: Access/permission denied") {
		t.Errorf("a user raised a running run's limit: %v", err)
	}
	if err := setLimit(bob, raised.ID, 0); err == nil {
		t.Error("a user lifted a running run's limit")
	}
	if err := setLimit(h.c, raised.ID, 60); err != nil {
		t.Fatal(err)
	}
	out, end = follow(t, h, raised.ID)
	if end.Status != api.StatusDone || !strings.HasSuffix(out, "survived\n") {
		t.Errorf("raised past its old limit: %s (%s), output %q; want done", end.Status, end.Reason, out)
	}
	if err := setLimit(h.c, raised.ID, 10); err == nil {
		t.Error("an ended run's limit changed")
	}
}

// A limit changed while the node's agent is away reaches the job when the
// agent comes back (its sync carries the run's limit; the restored agent
// reads the job's own).
func TestUpdateTimeLimitAgentAway(t *testing.T) {
	h := newHarness(t, t.TempDir())
	o := agentOpts{name: "n1", cpus: 2, dir: t.TempDir()}
	stop := startAgent(t, h, o)
	r := submit(t, h, fmt.Sprintf(longJob, "1h"))
	waitReady(t, h, r.ID)
	stop()
	if err := setLimit(h.c, r.ID, 1); err != nil {
		t.Fatal(err)
	}
	startAgent(t, h, o)
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusTerminated || end.Reason != api.ReasonMaxDuration || strings.Contains(out, "finished") {
		t.Errorf("limit lowered while the agent was away: %s (%s), output %q; want terminated (%s)", end.Status, end.Reason, out, api.ReasonMaxDuration)
	}
}
