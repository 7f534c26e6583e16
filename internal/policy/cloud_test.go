package policy

import (
	"slices"
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
	want := &Docker{Image: "local/busybox:ci", Shapes: []Shape{{"small", 1, 512 << 20, 0.01, false, ""}, {"large", 4, 4 << 30, 0.08, true, ""}}}
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

// instance_types and availability_zones narrow a fleet's offers; a name no
// provider offers is refused with the field and what there is, in the
// policy file and in a fleet file alike.
func TestBackendFleetOfferFilters(t *testing.T) {
	base := "providers:\n  docker:\n    image: i\n    shapes:\n      - {name: s, cpus: 1, memory: 1GB, zone: a}\n      - {name: m, cpus: 2, memory: 2GB, zone: b}\n      - {name: l, cpus: 4, memory: 4GB}\n"
	p, err := Parse("policy.yml", []byte(base+"fleets:\n  f:\n    backend: {backends: [docker], nodes: ..2, instance_types: [s, m], availability_zones: [b]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if bf := p.Fleets["f"].Backend; !slices.Equal(bf.InstanceTypes, []string{"s", "m"}) || !slices.Equal(bf.Zones, []string{"b"}) {
		t.Errorf("filters: %+v", bf)
	}
	if p.Docker.Shapes[0].Zone != "a" || p.Docker.Shapes[2].Zone != "" {
		t.Errorf("shapes' zones: %+v", p.Docker.Shapes)
	}
	for name, tc := range map[string]struct{ fleet, want string }{
		"type": {"instance_types: [xl]", `fleets.f.backend.instance_types: no provider offers "xl" (docker's shapes: s, m, l)`},
		"zone": {"availability_zones: [c]", `fleets.f.backend.availability_zones: no provider offers zone "c" (docker's zones: a, b)`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("policy.yml", []byte(base+"fleets:\n  f:\n    backend: {backends: [docker], nodes: ..2, "+tc.fleet+"}\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
			f, err := spec.ParseFleet("fleet.yml", []byte("type: fleet\nname: gg\nnodes: 0..2\n"+tc.fleet+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			field := tc.want[len("fleets.f.backend."):]
			if _, err := p.BackendFleetOf(f); err == nil || !strings.Contains(err.Error(), "fleet gg: "+field) {
				t.Errorf("fleet file: %v, want %q", err, field)
			}
		})
	}
}
