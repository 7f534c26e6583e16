package server

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

func TestRetryOnError(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	marker := filepath.Join(t.TempDir(), "failed-once")
	r := submit(t, h, fmt.Sprintf(`type: task
name: flaky
retry: {on_events: [error], duration: 1h}
commands:
  - echo attempt $BERTH_ATTEMPT restart $SLURM_RESTART_COUNT
  - if [ ! -e %s ]; then touch %s; exit 3; fi
`, marker, marker))
	end := finished(t, h, fmt.Sprint(r.ID))
	if end.Status != api.StatusDone || len(end.Jobs) != 2 || end.Jobs[0].Reason != api.ReasonExitedWithError || end.Jobs[1].Attempt != 1 {
		t.Fatalf("flaky run %s, jobs %+v: want the second attempt done", end.Status, end.Jobs)
	}
	out, _ := follow(t, h, r.ID)
	if !strings.Contains(out, "attempt 1 restart 1") {
		t.Errorf("second attempt's output %q lacks its attempt number", out)
	}

	// The other retry rules (events, durations, no-capacity) are in
	// internal/control/testdata/retry.txt.
}
