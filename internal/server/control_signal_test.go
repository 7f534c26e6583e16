package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

// A signal reaches the job's processes and leaves it running.
func TestSignalRun(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	startAgent(t, h, agentOpts{name: "n1", cpus: 1})
	r := submit(t, h, "type: task\ncommands:\n  - trap 'echo got USR1; exit 0' USR1\n  - echo ready\n  - for i in $(seq 300); do sleep 0.1; done; exit 4\n")
	ready := func(id int64) {
		waitFor(t, "the job to be ready", func() bool {
			got, err := h.c.Run(ctx, fmt.Sprint(id))
			return err == nil && got.Status == api.StatusRunning && got.Jobs[0].LogSize > 0
		})
	}
	ready(r.ID)
	// -b: the job's main process only; its trap runs once its sleep ends.
	n, err := h.c.Signal(ctx, fmt.Sprint(r.ID), 10, true) // SIGUSR1
	if err != nil || n != 1 {
		t.Fatalf("signal: %d jobs, %v", n, err)
	}
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusDone || out != "ready\ngot USR1\n" {
		t.Errorf("after USR1: %s, output %q", end.Status, out)
	}
	if _, err := h.c.Signal(ctx, fmt.Sprint(r.ID), 10, false); err == nil {
		t.Error("an ended run took a signal")
	}
	if _, err := h.c.Signal(ctx, fmt.Sprint(r.ID), 99, false); err == nil {
		t.Error("signal 99 was accepted")
	}
	// Without -b every process of the job gets it (the sleep dies of it).
	r2 := submit(t, h, "type: task\ncommands:\n  - trap 'echo got USR1; exit 0' USR1\n  - echo ready\n  - for i in $(seq 300); do sleep 0.1; done; exit 4\n")
	ready(r2.ID)
	if _, err := h.c.Signal(ctx, fmt.Sprint(r2.ID), 10, false); err != nil {
		t.Fatal(err)
	}
	out, end = follow(t, h, r2.ID)
	if end.Status != api.StatusDone || !strings.HasSuffix(out, "got USR1\n") {
		t.Errorf("after USR1 to all: %s, output %q", end.Status, out)
	}
}
