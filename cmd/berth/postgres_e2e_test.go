//go:build linux

package main_test

import (
	"testing"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// TestOnPostgres runs end-to-end tests with `berth server --db
// postgres://…` on a throwaway PostgreSQL (startServer gives each of its
// clusters a fresh database, kept across the server's restarts): a run
// applied and its output, and the crash-safety test, whose server is
// killed with SIGKILL four times while runs are submitted and run, and
// which checks that every acknowledged run ends done, once, with its
// whole output.
func TestOnPostgres(t *testing.T) {
	if !pgtest.Available() {
		t.Skip(pgtest.ErrMissing)
	}
	t.Run("ApplyHello", TestApplyHello)
	t.Run("CrashSafety", TestCrashSafety)
}
