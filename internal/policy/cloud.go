package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// Providers and backend fleets (issue 17). An administrator declares in the
// policy file what lends machines (providers) and which fleets grow and
// shrink with demand (a fleet's backend block); a `type: fleet` file with
// the same fields makes the same BackendFleet.

// ProvidersConf are the providers the server may create instances with.
type ProvidersConf struct {
	Docker *DockerConf `yaml:"docker"`
}

// DockerConf is Docker as a cloud (internal/provider/docker).
type DockerConf struct {
	Owner   string      `yaml:"owner"`
	Image   string      `yaml:"image"`
	Binary  string      `yaml:"binary"`
	Network string      `yaml:"network"`
	Shapes  []ShapeConf `yaml:"shapes"`
}

// ShapeConf is one offer of the Docker provider.
type ShapeConf struct {
	Name   string  `yaml:"name"`
	CPUs   int     `yaml:"cpus"`
	Memory string  `yaml:"memory"`
	Price  float64 `yaml:"price"`
	Spot   bool    `yaml:"spot"`
	Zone   string  `yaml:"zone"`
}

// BackendFleetConf makes a fleet's nodes come from providers.
type BackendFleetConf struct {
	Backends     []string          `yaml:"backends"`
	Regions      []string          `yaml:"regions"`
	Nodes        string            `yaml:"nodes"` // "N", "N..M" or "..M"
	Min          *int              `yaml:"min"`
	Max          *int              `yaml:"max"`
	Target       *int              `yaml:"target"`
	Resources    map[string]string `yaml:"resources"` // cpu, memory: "N..M"
	SpotPolicy   string            `yaml:"spot_policy"`
	MaxPrice     float64           `yaml:"max_price"`
	IdleDuration string            `yaml:"idle_duration"`
	// InstanceTypes and AvailabilityZones narrow the offers (dstack's
	// instance_types, availability_zones).
	InstanceTypes     []string `yaml:"instance_types"`
	AvailabilityZones []string `yaml:"availability_zones"`
}

// Docker is the checked Docker provider's configuration.
type Docker struct {
	// Owner labels what the server creates (default: derived from its
	// database, so stable across restarts).
	Owner                  string
	Image, Binary, Network string
	Shapes                 []Shape
}

// Shape is one Docker offer.
type Shape struct {
	Name   string
	CPUs   int
	Memory int64
	Price  float64
	Spot   bool
	Zone   string // an availability-zone label ("" none)
}

// Span is an inclusive range; Max 0 is unbounded.
type Span struct{ Min, Max int64 }

// BackendFleet is a fleet whose nodes a provider lends on demand.
type BackendFleet struct {
	Backends, Regions []string
	Min, Max, Target  int
	CPUs, Memory      Span   // per node; zero: any
	SpotPolicy        string // spot, on-demand (default), auto
	MaxPrice          float64
	// IdleDuration: a node idle this long is terminated (down to Min);
	// zero: 5 minutes, as dstack.
	IdleDuration time.Duration
	// What a `type: fleet` file adds (the policy file's fleets have none):
	// Segment is the network segment of `placement: cluster` (its nodes
	// get the segment feature), Env the agent's environment (NAME=VALUE).
	Segment string
	Env     []string
	Blocks  spec.Blocks // 0: not split
	// Project is the project that owns a fleet from a `type: fleet` file:
	// the autoscaler creates its nodes for that project's runs only. The
	// policy file's fleets have none: they serve every project.
	Project string
	// InstanceTypes and Zones narrow the offers to those instance types
	// and availability zones (empty: any).
	InstanceTypes, Zones []string
}

// DefaultIdle is a backend fleet's idle_duration when it sets none.
const DefaultIdle = 5 * time.Minute

func (c *checker) cloud(f *File, p *Policy) {
	if d := f.Providers.Docker; d != nil {
		at := "$.providers.docker"
		out := &Docker{Owner: d.Owner, Image: d.Image, Binary: d.Binary, Network: d.Network}
		if out.Image == "" {
			c.fail(at+".image", "required: the image instances run (e.g. local/busybox:ci)")
		}
		seen := map[string]bool{}
		for i, s := range d.Shapes {
			sat := fmt.Sprintf("%s.shapes[%d]", at, i)
			if s.Name == "" || seen[s.Name] {
				c.fail(sat+".name", "each shape needs a name of its own, got %q", s.Name)
			}
			seen[s.Name] = true
			if s.CPUs < 1 {
				c.fail(sat+".cpus", "must be 1 or more, got %d", s.CPUs)
			}
			mem, err := spec.ParseBytes(s.Memory)
			if err != nil || mem < 6<<20 {
				c.fail(sat+".memory", "want a size of at least 6MB (e.g. 512MB), got %q", s.Memory)
			}
			if s.Price < 0 {
				c.fail(sat+".price", "must be 0 or more, got %g", s.Price)
			}
			out.Shapes = append(out.Shapes, Shape{Name: s.Name, CPUs: s.CPUs, Memory: int64(mem), Price: s.Price, Spot: s.Spot, Zone: s.Zone})
		}
		if len(out.Shapes) == 0 {
			c.fail(at+".shapes", "at least one shape is needed: its offers")
		}
		p.Docker = out
	}
	for _, name := range sorted(f.Fleets) {
		b := f.Fleets[name].Backend
		if b == nil {
			continue
		}
		at := "$.fleets." + name + ".backend"
		bf := &BackendFleet{Backends: b.Backends, Regions: b.Regions, SpotPolicy: b.SpotPolicy, MaxPrice: b.MaxPrice, IdleDuration: DefaultIdle}
		for i, be := range b.Backends {
			if be != "docker" {
				c.fail(fmt.Sprintf("%s.backends[%d]", at, i), "unknown backend %q (this server has: docker)", be)
			} else if p.Docker == nil {
				c.fail(fmt.Sprintf("%s.backends[%d]", at, i), "backend docker is not configured (providers.docker)")
			}
		}
		if len(b.Backends) == 0 {
			c.fail(at+".backends", "name at least one backend (docker)")
		}
		if b.Nodes != "" {
			lo, hi, ok := parseSpan(b.Nodes)
			if !ok || (hi == 0 && !strings.Contains(b.Nodes, "..")) {
				c.fail(at+".nodes", "want N, N..M or ..M, got %q", b.Nodes)
			}
			bf.Min, bf.Max, bf.Target = int(lo), int(hi), int(lo)
			if !strings.Contains(b.Nodes, "..") {
				bf.Max = int(lo)
			}
		}
		for _, v := range []struct {
			p   *int
			dst *int
			f   string
		}{{b.Min, &bf.Min, "min"}, {b.Max, &bf.Max, "max"}, {b.Target, &bf.Target, "target"}} {
			if v.p != nil {
				if *v.p < 0 {
					c.fail(at+"."+v.f, "must be 0 or more, got %d", *v.p)
				}
				*v.dst = *v.p
			}
		}
		if bf.Max == 0 {
			c.fail(at+".nodes", "a backend fleet needs a maximum (nodes: 0..8 or max: 8)")
		}
		if bf.Min > bf.Max || bf.Target < bf.Min || bf.Target > bf.Max {
			c.fail(at+".nodes", "need min <= target <= max, got %d, %d, %d", bf.Min, bf.Target, bf.Max)
		}
		for k, v := range b.Resources {
			lo, hi, ok := parseSpanWith(v, k == "memory")
			switch {
			case k != "cpu" && k != "memory":
				c.fail(at+".resources."+k, "unknown resource (cpu, memory)")
			case !ok:
				c.fail(at+".resources."+k, "want N, N.. or N..M, got %q", v)
			case k == "cpu":
				bf.CPUs = Span{lo, hi}
			default:
				bf.Memory = Span{lo, hi}
			}
		}
		switch b.SpotPolicy {
		case "":
			bf.SpotPolicy = "on-demand"
		case "spot", "on-demand", "auto":
		default:
			c.fail(at+".spot_policy", "want spot, on-demand or auto, got %q", b.SpotPolicy)
		}
		if b.MaxPrice < 0 {
			c.fail(at+".max_price", "must be 0 or more, got %g", b.MaxPrice)
		}
		if b.IdleDuration != "" {
			bf.IdleDuration = c.duration(b.IdleDuration, at+".idle_duration")
		}
		bf.InstanceTypes, bf.Zones = b.InstanceTypes, b.AvailabilityZones
		if err := p.checkOfferFilters(bf); err != nil {
			c.fail(at+"."+err.field, "%s", err.msg)
		}
		fl := p.Fleets[name]
		fl.Backend = bf
		p.Fleets[name] = fl
	}
}

// parseSpan reads "N", "N..", "..M" or "N..M" (counts).
func parseSpan(s string) (lo, hi int64, ok bool) { return parseSpanWith(s, false) }

func parseSpanWith(s string, bytes bool) (lo, hi int64, ok bool) {
	num := func(v string) (int64, bool) {
		if v == "" {
			return 0, true
		}
		if bytes {
			b, err := spec.ParseBytes(v)
			return int64(b), err == nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil && n >= 0
	}
	a, b, rng := strings.Cut(strings.TrimSpace(s), "..")
	lo, ok1 := num(a)
	if !rng {
		return lo, lo, ok1 && a != ""
	}
	hi, ok2 := num(b)
	return lo, hi, ok1 && ok2 && (hi == 0 || lo <= hi)
}

// BackendFleetOf makes a `type: fleet` file's backend fields (nodes,
// resources, backends, regions, spot_policy, max_price, idle_duration or
// its older name termination_idle_time, placement, env)
// the autoscaler's BackendFleet, checked against the providers this
// policy configures. An SSH fleet (no nodes) is nil, nil.
func (p *Policy) BackendFleetOf(f *spec.Fleet) (*BackendFleet, error) {
	if f == nil || f.Nodes == nil {
		return nil, nil
	}
	bf := &BackendFleet{Backends: f.Backends, Regions: f.Regions, SpotPolicy: f.SpotPolicy, Min: f.Nodes.Min, Target: f.Nodes.Target, IdleDuration: DefaultIdle}
	if bf.SpotPolicy == "" {
		bf.SpotPolicy = "on-demand"
	}
	if f.Nodes.Max == nil {
		return nil, fmt.Errorf("policy: fleet %s: nodes: a backend fleet needs a maximum (e.g. 0..8)", f.Name)
	}
	bf.Max = *f.Nodes.Max
	if len(bf.Backends) == 0 {
		bf.Backends = []string{"docker"}
	}
	for _, b := range bf.Backends {
		if b != "docker" || p.Docker == nil {
			return nil, fmt.Errorf("policy: fleet %s: backends: %q is not configured on this server (providers: in the policy file; this version has docker)", f.Name, b)
		}
	}
	if f.MaxPrice != nil {
		bf.MaxPrice = *f.MaxPrice
	}
	if f.Placement == "cluster" {
		bf.Segment = "fleet-" + f.Name
	}
	bf.Blocks = f.Blocks
	bf.InstanceTypes, bf.Zones = f.InstanceTypes, f.AvailabilityZones
	if err := p.checkOfferFilters(bf); err != nil {
		return nil, fmt.Errorf("policy: fleet %s: %s: %s", f.Name, err.field, err.msg)
	}
	for _, v := range f.Env {
		if !v.PassThrough {
			bf.Env = append(bf.Env, v.Name+"="+v.Value)
		}
	}
	d := f.IdleDuration
	if d == nil {
		// dstack's older name for idle_duration.
		d = f.TerminationIdleTime
	}
	if d != nil {
		if *d == spec.DurationOff {
			bf.IdleDuration = time.Duration(1<<63 - 1)
		} else {
			bf.IdleDuration = d.Std()
		}
	}
	if r := f.Resources; r != nil {
		if r.CPU != nil {
			bf.CPUs = Span{Min: int64(r.CPU.Count.Min)}
			if r.CPU.Count.Max != nil {
				bf.CPUs.Max = int64(*r.CPU.Count.Max)
			}
		}
		if r.Memory != nil {
			bf.Memory = Span{Min: int64(r.Memory.Min)}
			if r.Memory.Max != nil {
				bf.Memory.Max = int64(*r.Memory.Max)
			}
		}
	}
	return bf, nil
}

// filterError is a fleet's instance_types or availability_zones naming
// what no provider offers.
type filterError struct{ field, msg string }

// checkOfferFilters refuses instance types and zones that no configured
// provider offers: a typo would otherwise leave the fleet with no offer.
func (p *Policy) checkOfferFilters(bf *BackendFleet) *filterError {
	if p.Docker == nil {
		return nil
	}
	var names, zones []string
	for _, s := range p.Docker.Shapes {
		names = append(names, s.Name)
		if s.Zone != "" && !slices.Contains(zones, s.Zone) {
			zones = append(zones, s.Zone)
		}
	}
	for _, t := range bf.InstanceTypes {
		if !slices.Contains(names, t) {
			return &filterError{"instance_types", fmt.Sprintf("no provider offers %q (docker's shapes: %s)", t, strings.Join(names, ", "))}
		}
	}
	for _, z := range bf.Zones {
		if !slices.Contains(zones, z) {
			have := strings.Join(zones, ", ")
			if have == "" {
				have = "none: give shapes a zone in providers.docker.shapes"
			}
			return &filterError{"availability_zones", fmt.Sprintf("no provider offers zone %q (docker's zones: %s)", z, have)}
		}
	}
	return nil
}
