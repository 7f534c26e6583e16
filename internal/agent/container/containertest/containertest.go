// Package containertest gives tests a Docker engine with the local test
// image, or a clear reason why there is none.
package containertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
)

// Image is the test image: busybox imported without a registry by
// scripts/test-docker.sh (`make test-deps`).
const Image = "local/busybox:ci"

// Engine returns a connection to the local engine that has Image. The test
// skips only where no engine can run at all (not root), or when
// BERTH_TEST_DOCKER=skip; anywhere else a missing engine fails the test,
// with what to run.
func Engine(t testing.TB) *container.Engine {
	t.Helper()
	if os.Getenv("BERTH_TEST_DOCKER") == "skip" {
		t.Skip("BERTH_TEST_DOCKER=skip: container tests skipped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := container.Open(ctx)
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("no Docker engine, and dockerd cannot run without root: %v", err)
		}
		t.Fatalf("no Docker engine: %v\nrun `make test-deps` (scripts/test-docker.sh) to install and start one, or set BERTH_TEST_DOCKER=skip", err)
	}
	t.Cleanup(func() { e.Close() })
	if ok, err := e.HasImage(ctx, Image); !ok {
		t.Fatalf("the engine lacks %s (%v): run `make test-deps` (scripts/test-docker.sh)", Image, err)
	}
	return e
}
