package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/spec"
)

func TestBackendFleetAndDockerProvider(t *testing.T) {
	p, err := Parse("policy.yml", []byte(`
providers:
  docker:
    image: local/busybox:ci
    shapes:
      - {name: small, cpus: 1, memory: 512MB, price: 0.01}
      - {name: large, cpus: 4, memory: 4GB, price: 0.08, spot: true}
fleets:
  cloud:
    backend:
      backends: [docker]
      nodes: 0..3
      resources: {cpu: 1.., memory: 256MB..8GB}
      max_price: 0.5
      idle_duration: 30s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Docker{Image: "local/busybox:ci", Shapes: []Shape{{"small", 1, 512 << 20, 0.01, false}, {"large", 4, 4 << 30, 0.08, true}}}
	if d := cmp.Diff(want, p.Docker); d != "" {
		t.Errorf("docker (-want +got)\n%s", d)
	}
	wantF := &BackendFleet{Backends: []string{"docker"}, Min: 0, Max: 3, Target: 0, CPUs: Span{1, 0}, Memory: Span{256 << 20, 8 << 30},
		SpotPolicy: "on-demand", MaxPrice: 0.5, IdleDuration: 30 * time.Second}
	if d := cmp.Diff(wantF, p.Fleets["cloud"].Backend); d != "" {
		t.Errorf("fleet (-want +got)\n%s", d)
	}
}

func TestBackendFleetErrorsNameTheField(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"no provider": {"fleets:\n  f:\n    backend:\n      backends: [docker]\n      nodes: 0..2\n",
			"policy.yml:4:18: fleets.f.backend.backends[0]: backend docker is not configured"},
		"no max": {"providers:\n  docker:\n    image: i\n    shapes: [{name: s, cpus: 1, memory: 1GB}]\nfleets:\n  f:\n    backend:\n      backends: [docker]\n",
			"fleets.f.backend.nodes: a backend fleet needs a maximum"},
		"bad shape": {"providers:\n  docker:\n    image: i\n    shapes: [{name: s, cpus: 0, memory: 1GB}]\n",
			"providers.docker.shapes[0].cpus: must be 1 or more"},
		"bad spot": {"providers:\n  docker:\n    image: i\n    shapes: [{name: s, cpus: 1, memory: 1GB}]\nfleets:\n  f:\n    backend:\n      backends: [docker]\n      nodes: ..2\n      spot_policy: maybe\n",
			"fleets.f.backend.spot_policy: want spot, on-demand or auto"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("policy.yml", []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestBackendFleetOfAFleetFile(t *testing.T) {
	p, err := Parse("policy.yml", []byte("providers:\n  docker:\n    image: i\n    shapes: [{name: s, cpus: 1, memory: 1GB}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := spec.ParseFleet("fleet.yml", []byte(`type: fleet
name: gpu
nodes: 1..4
backends: [docker]
resources: {cpu: 2.., memory: 1GB..4GB}
spot_policy: auto
max_price: 0.3
idle_duration: 90s
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.BackendFleetOf(f)
	if err != nil {
		t.Fatal(err)
	}
	want := &BackendFleet{Backends: []string{"docker"}, Min: 1, Target: 1, Max: 4, CPUs: Span{2, 0}, Memory: Span{1 << 30, 4 << 30},
		SpotPolicy: "auto", MaxPrice: 0.3, IdleDuration: 90 * time.Second}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	f.Backends = []string{"aws"}
	if _, err := p.BackendFleetOf(f); err == nil || !strings.Contains(err.Error(), `"aws" is not configured`) {
		t.Errorf("an unconfigured backend: %v", err)
	}
}
