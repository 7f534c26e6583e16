package slurm

import (
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// TestSignalSpecMapsOntoTheRunsSignal: what sbatch's --signal reads
// (without R:, which Berth refuses) prints, with String, as a value of the
// run's `signal:` meaning the same signal, time and B: flag.
func TestSignalSpecMapsOntoTheRunsSignal(t *testing.T) {
	for _, in := range []string{"B:USR1@300", "USR1", "10@90", "b:sigterm", "SIGUSR2@0", "B:INT@65535", "XCPU@5"} {
		s, err := ParseSignal(in)
		if err != nil {
			t.Fatalf("ParseSignal(%q): %v", in, err)
		}
		got, err := spec.ParseSignal(s.String())
		if err != nil {
			t.Errorf("--signal=%s: spec.ParseSignal(%q): %v", in, s.String(), err)
			continue
		}
		want := spec.Signal{Number: s.Signal, Before: spec.Duration(s.Before / time.Second), BatchOnly: s.BatchOnly}
		if got != want {
			t.Errorf("--signal=%s: signal: %s reads as %+v, want %+v", in, s.String(), got, want)
		}
	}
	s, _ := ParseSignal("R:USR1@60")
	if _, err := spec.ParseSignal(s.String()); err == nil {
		t.Errorf("R: (reservations) maps onto a signal Berth would accept silently")
	}
}
