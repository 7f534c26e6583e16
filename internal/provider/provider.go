package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Errors callers check with errors.Is.
var (
	// ErrNotFound: no instance (or volume) has that key or name.
	ErrNotFound = errors.New("provider: not found")
	// ErrNoOffer: nothing the provider lends matches.
	ErrNoOffer = errors.New("provider: no offer matches")
)

// Bytes is a size in bytes.
type Bytes int64

// GPU is one kind of accelerator in an offer.
type GPU struct {
	Model  string `json:"model"`
	Memory Bytes  `json:"memory"`
	Count  int    `json:"count"`
}

// Offer is one kind of machine a provider lends, at a price.
type Offer struct {
	Backend string `json:"backend"` // the provider's name: "docker", "aws"…
	Region  string `json:"region"`  // "local" for Docker
	// Zone is the availability zone within Region ("" : the provider has
	// none; a Docker shape's zone label).
	Zone     string  `json:"zone,omitempty"`
	Instance string  `json:"instance"` // the provider's name for the shape
	CPUs     int     `json:"cpus"`
	Memory   Bytes   `json:"memory"`
	GPU      *GPU    `json:"gpu,omitempty"`
	Disk     Bytes   `json:"disk,omitempty"` // 0: not stated
	Price    float64 `json:"price"`          // per hour, in the provider's currency
	Spot     bool    `json:"spot"`
}

// Range is an inclusive bound; a zero Max is unbounded.
type Range struct{ Min, Max int64 }

// Has reports whether v lies in r.
func (r Range) Has(v int64) bool { return v >= r.Min && (r.Max == 0 || v <= r.Max) }

// Query is what a caller needs; the zero Query matches every offer.
type Query struct {
	CPUs      Range
	Memory    Range // bytes
	GPUs      Range // count; Min 0 and Max 0 with GPUMemory zero: no condition
	GPUMemory Range // bytes per GPU
	GPUModel  string
	Spot      *bool   // nil: either
	MaxPrice  float64 // 0: any
	Backends  []string
	Regions   []string
	// Instances are the instance types allowed (a fleet's
	// instance_types); empty: any. Zones are the availability zones
	// allowed (availability_zones); an offer with no zone matches none.
	Instances []string
	Zones     []string
}

// Match reports whether o satisfies q.
func (q Query) Match(o Offer) bool {
	if !q.CPUs.Has(int64(o.CPUs)) || !q.Memory.Has(int64(o.Memory)) {
		return false
	}
	n, mem, model := int64(0), int64(0), ""
	if o.GPU != nil {
		n, mem, model = int64(o.GPU.Count), int64(o.GPU.Memory), o.GPU.Model
	}
	if !q.GPUs.Has(n) {
		return false
	}
	if (q.GPUMemory != Range{}) && (n == 0 || !q.GPUMemory.Has(mem)) {
		return false
	}
	if q.GPUModel != "" && !strings.EqualFold(q.GPUModel, model) {
		return false
	}
	if q.Spot != nil && *q.Spot != o.Spot {
		return false
	}
	if q.MaxPrice > 0 && o.Price > q.MaxPrice {
		return false
	}
	if len(q.Zones) > 0 && (o.Zone == "" || !oneOf(q.Zones, o.Zone)) {
		return false
	}
	return oneOf(q.Backends, o.Backend) && oneOf(q.Regions, o.Region) && oneOf(q.Instances, o.Instance)
}

func oneOf(set []string, v string) bool {
	if len(set) == 0 {
		return true
	}
	for _, s := range set {
		if strings.EqualFold(s, v) {
			return true
		}
	}
	return false
}

// Filter keeps the offers that match q, cheapest first (then fewest CPUs,
// least memory, name), as `berth offer` prints them.
func Filter(offers []Offer, q Query) []Offer {
	var out []Offer
	for _, o := range offers {
		if q.Match(o) {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Price != b.Price:
			return a.Price < b.Price
		case a.CPUs != b.CPUs:
			return a.CPUs < b.CPUs
		case a.Memory != b.Memory:
			return a.Memory < b.Memory
		case a.Backend != b.Backend:
			return a.Backend < b.Backend
		}
		return a.Instance < b.Instance
	})
	return out
}

// Bootstrap is what a new instance needs to join the cluster: it runs
// `berth agent --server ServerURL` with Token (a node credential made for
// this instance only), named NodeName, in Fleet.
type Bootstrap struct {
	ServerURL string
	Token     string
	NodeName  string
	Fleet     string
	// Features are the agent's node features (--features): a fleet file's
	// placement, and the volumes attached with Volumes. Env is more of its
	// environment (NAME=VALUE): a fleet file's env.
	Features []string
	Env      []string
	// Blocks is the agent's --blocks ("" : not split; N or auto).
	Blocks string
	// Volumes are network volumes (by provider name) to attach at creation,
	// mounted at Path (providers that can attach later may ignore them here).
	Volumes []VolumeMount
}

// VolumeMount is a network volume at a path on the instance.
type VolumeMount struct {
	Volume string `json:"volume"` // the provider's name of the volume
	Path   string `json:"path"`
}

// State is an instance's condition as the provider sees it.
type State string

const (
	StateProvisioning State = "provisioning" // created, not yet running
	StateRunning      State = "running"
	// StateStopped: the instance exists but no longer runs (a spot
	// instance taken back, a container killed from outside). Berth treats
	// it as an interruption and terminates it.
	StateStopped State = "stopped"
)

// Instance is one machine a provider lent, known by the caller's key.
type Instance struct {
	Key   string `json:"key"`   // the idempotency key given to Create
	ID    string `json:"id"`    // the provider's own id
	Offer Offer  `json:"offer"` // what it was created as
	State State  `json:"state"`
	// Detail is the provider's own words for State (an exit code, a
	// termination notice), for messages.
	Detail string `json:"detail,omitempty"`
}

// Volume is a network volume.
type Volume struct {
	Name    string `json:"name"` // the provider's name
	Backend string `json:"backend"`
	Region  string `json:"region"`
	Size    Bytes  `json:"size,omitempty"` // 0: grows as needed (Docker)
}

// Provider lends machines and volumes. Every method is safe to call
// concurrently; every one may be retried.
type Provider interface {
	// Name is the backend's name in offers and fleet specs ("docker").
	Name() string
	// Offers lists what can be created now (callers filter with Query).
	Offers(ctx context.Context) ([]Offer, error)
	// Create makes an instance of offer that boots with b, under key. A
	// second Create with a key that exists returns that instance and
	// creates nothing. It returns once the provider has accepted the
	// request; the instance may still be provisioning.
	Create(ctx context.Context, key string, offer Offer, b Bootstrap) (Instance, error)
	// Get returns the instance with key (ErrNotFound if there is none).
	Get(ctx context.Context, key string) (Instance, error)
	// List returns every instance this server created (and not yet
	// terminated), to reconcile records against.
	List(ctx context.Context) ([]Instance, error)
	// Terminate destroys the instance; one already gone is not an error.
	Terminate(ctx context.Context, key string) error
	// CreateVolume makes a network volume (or returns the one of that name).
	CreateVolume(ctx context.Context, name string, size Bytes) (Volume, error)
	// DeleteVolume destroys it; one already gone is not an error.
	DeleteVolume(ctx context.Context, name string) error
	// Volumes lists this server's volumes.
	Volumes(ctx context.Context) ([]Volume, error)
}

// Find returns the provider named backend among ps.
func Find(ps []Provider, backend string) (Provider, error) {
	for _, p := range ps {
		if p.Name() == backend {
			return p, nil
		}
	}
	return nil, fmt.Errorf("provider: no backend %q is configured", backend)
}
