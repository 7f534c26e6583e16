package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFilterSortsByPriceAndMatches(t *testing.T) {
	gpu := func(mem Bytes, n int) *GPU { return &GPU{Model: "H100", Memory: mem, Count: n} }
	offers := []Offer{
		{Backend: "docker", Instance: "big", CPUs: 8, Memory: 16 << 30, Price: 0.4},
		{Backend: "docker", Instance: "small", CPUs: 1, Memory: 512 << 20, Price: 0.01},
		{Backend: "aws", Instance: "p5", CPUs: 96, Memory: 1 << 40, GPU: gpu(80<<30, 8), Price: 98, Spot: true},
		{Backend: "aws", Instance: "g5", CPUs: 8, Memory: 32 << 30, GPU: gpu(24<<30, 1), Price: 1.2, Zone: "us-east-1a"},
	}
	yes := true
	names := func(os []Offer) []string {
		var s []string
		for _, o := range os {
			s = append(s, o.Instance)
		}
		return s
	}
	for name, tc := range map[string]struct {
		q    Query
		want []string
	}{
		"all, cheapest first":          {Query{}, []string{"small", "big", "g5", "p5"}},
		"cpus":                         {Query{CPUs: Range{Min: 2}}, []string{"big", "g5", "p5"}},
		"gpu memory 40GB..80GB, 4..8":  {Query{GPUs: Range{Min: 4, Max: 8}, GPUMemory: Range{Min: 40 << 30, Max: 80 << 30}}, []string{"p5"}},
		"cpus min 1":                   {Query{GPUs: Range{Max: 0}, CPUs: Range{Min: 1}}, []string{"small", "big", "g5", "p5"}},
		"spot":                         {Query{Spot: &yes}, []string{"p5"}},
		"max price":                    {Query{MaxPrice: 1.5}, []string{"small", "big", "g5"}},
		"backend":                      {Query{Backends: []string{"docker"}}, []string{"small", "big"}},
		"gpu min":                      {Query{GPUs: Range{Min: 1}}, []string{"g5", "p5"}},
		"instance types":               {Query{Instances: []string{"p5", "BIG"}}, []string{"big", "p5"}},
		"zone: offers without one out": {Query{Zones: []string{"us-east-1a"}}, []string{"g5"}},
		"types and zone":               {Query{Instances: []string{"small"}, Zones: []string{"us-east-1a"}}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, names(Filter(offers, tc.q))); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestReconcileNeverLeaksOrDoubles(t *testing.T) {
	recs := []Record{
		{"created-before-crash", RecordCreating},  // provider has it: adopt
		{"crashed-before-create", RecordCreating}, // provider lacks it: gone
		{"running", RecordActive},
		{"vanished", RecordActive},
		{"killed", RecordActive},
		{"ending", RecordTerminating},
		{"ended", RecordTerminating},
		{"old", RecordGone},
		{"in-flight", RecordCreating},
	}
	ins := []Instance{
		{Key: "created-before-crash", State: StateRunning},
		{Key: "running", State: StateRunning},
		{Key: "killed", State: StateStopped},
		{Key: "ending", State: StateRunning},
		{Key: "old", State: StateRunning},      // a record says gone: a leak
		{Key: "stranger", State: StateRunning}, // no record at all: a leak
		{Key: "in-flight", State: StateProvisioning},
	}
	want := []Action{
		{Key: "created-before-crash", Do: "adopt", Record: true},
		{Key: "crashed-before-create", Do: "gone", Record: true},
		{Key: "vanished", Do: "gone", Record: true},
		{Key: "killed", Do: "terminate", Record: true},
		{Key: "ending", Do: "terminate", Record: true},
		{Key: "ended", Do: "gone", Record: true},
		{Key: "old", Do: "terminate"},
		{Key: "stranger", Do: "terminate"},
	}
	got := Reconcile(recs, ins, map[string]bool{"in-flight": true})
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
