package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/spec"
)

// berth fleet's backend table says a fleet's last failed creation once,
// under the table, not per instance or per try.
func TestBackendFleetsPrintLastErrorOnce(t *testing.T) {
	max := 3
	at := time.Date(2026, 1, 1, 7, 11, 2, 0, time.Local)
	fleets := []api.Fleet{
		{Name: "dyn", Project: "main", Status: "active", Spec: &spec.Fleet{Nodes: &spec.FleetNodes{Min: 1, Target: 1, Max: &max}},
			Instances: []api.Instance{{Node: "dyn-1", State: "active", Offer: provider.Offer{Backend: "docker", Instance: "small"}}, {Node: "dyn-2", State: "creating", Offer: provider.Offer{Backend: "docker", Instance: "small"}}},
			LastError: &api.CreateError{Message: "docker provider: no berth binary to mount", At: at, RetryAt: at.Add(2 * time.Second)}},
		{Name: "ok", Project: "main", Status: "active", Spec: &spec.Fleet{Nodes: &spec.FleetNodes{Max: &max}}},
	}
	var b strings.Builder
	if err := printBackendFleets(&b, fleets); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := "Fleet dyn: creating an instance failed at 07:11:02 (next try at 07:11:04): docker provider: no berth binary to mount\n"
	if strings.Count(out, "creating an instance failed") != 1 || !strings.Contains(out, want) {
		t.Errorf("want the last error once, as %q:\n%s", want, out)
	}
}
