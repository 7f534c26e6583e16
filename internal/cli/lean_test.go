package cli

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The lean build of the Slurm commands must link none of the packages
// whose start-up it exists to avoid (lean.go).
func TestLeanBuildLinksNoRoles(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "list", "-tags", "slim", "-deps", "github.com/berth-hq/berth/cmd/berth").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -tags slim: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list gave %d packages: %q", len(deps), out)
	}
	banned := []string{"github.com/berth-hq/berth/internal/server", "github.com/berth-hq/berth/internal/agent",
		"github.com/berth-hq/berth/internal/store", "github.com/berth-hq/berth/internal/control", "github.com/berth-hq/berth/internal/roles",
		"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/prometheus/client_golang",
		"github.com/containerd", "github.com/distribution/reference", "golang.org/x/crypto/ssh", "google.golang.org/protobuf"}
	for _, d := range deps {
		for _, b := range banned {
			if d == b || strings.HasPrefix(d, b+"/") {
				t.Errorf("the lean build links %s", d)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/berth-hq/berth/internal/slurm\n") {
		t.Errorf("the lean build lacks the Slurm package:\n%s", out)
	}
}
