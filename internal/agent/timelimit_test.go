package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// fired reports whether c fires within a while (a missed timer, not a slow
// one, is what this catches).
func fired(c <-chan time.Time) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// A new limit re-times the deadline and the warning from the job's start:
// a limit already passed fires at once, and the warning is sent once.
func TestJobClockNewLimit(t *testing.T) {
	start := time.Now().Add(-10 * time.Second) // the job has run 10 s
	asg := api.Assignment{MaxDuration: 3600, Signal: &api.SignalAt{Number: 10, Before: 5}}
	c := newJobClock(start, asg)
	defer c.stop()
	if c.deadlineC() == nil || c.warnC() == nil {
		t.Fatal("an hour's limit with a warning: no timers")
	}
	c.setLimit(12) // warning due at 7 s: passed; deadline at 12 s
	if !fired(c.warnC()) {
		t.Fatal("the warning of a limit lowered past it did not fire")
	}
	c.warnSent()
	c.setLimit(3600) // raised again: the warning is not sent twice
	if c.warnC() != nil {
		t.Error("the warning is armed again after it was sent")
	}
	c.setLimit(0) // no limit: nothing to fire
	if c.deadlineC() != nil {
		t.Error("a deadline with no limit")
	}
	c.setLimit(5)
	if !fired(c.deadlineC()) {
		t.Error("a limit already passed did not fire")
	}
}

// The limit file overrides the assignment's; the signal file is read once.
func TestLimitAndSignalFiles(t *testing.T) {
	dir := t.TempDir()
	if got := currentLimit(dir, 60); got != 60 {
		t.Errorf("no limit file: %d, want the assignment's 60", got)
	}
	if err := os.WriteFile(filepath.Join(dir, fileLimit), []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := currentLimit(dir, 60); got != 0 {
		t.Errorf("limit file 0: %d, want 0 (none)", got)
	}
	if err := os.WriteFile(filepath.Join(dir, fileSignal), []byte("B:10"), 0o600); err != nil {
		t.Fatal(err)
	}
	if sig, batch, steps, ok := forwardedSignal(dir); !ok || !batch || steps || sig != 10 {
		t.Errorf("forwarded %v %v %v %v, want 10 batch-only", sig, batch, steps, ok)
	}
	if err := os.WriteFile(filepath.Join(dir, fileSignal), []byte("S:12"), 0o600); err != nil {
		t.Fatal(err)
	}
	if sig, batch, steps, ok := forwardedSignal(dir); !ok || batch || !steps || sig != 12 {
		t.Errorf("forwarded %v %v %v %v, want 12 steps-only", sig, batch, steps, ok)
	}
	if _, _, _, ok := forwardedSignal(dir); ok {
		t.Error("a forwarded signal was read twice (a new limit would send it again)")
	}
}
