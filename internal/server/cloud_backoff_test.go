package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/provider/docker"
	"github.com/berth-hq/berth/internal/sched"
)

// Failed creations wait 1 s, 2 s, 4 s… (at most 5 minutes) before the
// next; a sibling's failure in the same wait does not lengthen it; a
// success starts over; only a new message is news for the log.
func TestCreateBackoff(t *testing.T) {
	var c cloudState
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	boom := errors.New("boom")
	if !c.noteCreate("f", boom, t0) {
		t.Error("a first failure is news")
	}
	if !c.backingOff("f", t0.Add(999*time.Millisecond)) || c.backingOff("f", t0.Add(time.Second)) || c.backingOff("g", t0) {
		t.Error("after one failure the fleet waits 1 s, and only it")
	}
	if c.noteCreate("f", boom, t0.Add(500*time.Millisecond)) {
		t.Error("the same message again is not news")
	}
	if !c.backingOff("f", t0.Add(999*time.Millisecond)) || c.backingOff("f", t0.Add(time.Second)) {
		t.Error("a sibling's failure during the wait lengthened it")
	}
	at := t0.Add(time.Second)
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		c.noteCreate("f", boom, at)
		if !c.backingOff("f", at.Add(want-time.Millisecond)) || c.backingOff("f", at.Add(want)) {
			t.Fatalf("failure %d: want a wait of %v", i+2, want)
		}
		at = at.Add(want)
	}
	if msg, _, retry := c.lastError("f"); msg != "boom" || !retry.Equal(at) {
		t.Errorf("last error %q, retry at %v, want boom at %v", msg, retry, at)
	}
	if !c.noteCreate("f", errors.New("other"), at) {
		t.Error("a new message is news")
	}
	if backoffDelay(30) != maxCreateBackoff || backoffDelay(10) != maxCreateBackoff || backoffDelay(9) != 256*time.Second {
		t.Errorf("cap: %v %v %v", backoffDelay(30), backoffDelay(10), backoffDelay(9))
	}
	c.noteCreate("f", nil, at)
	if c.backingOff("f", at) {
		t.Error("a success did not end the wait")
	}
	if msg, _, _ := c.lastError("f"); msg != "" {
		t.Errorf("after a success the last error is %q", msg)
	}
}

// A fleet's instance_types and availability_zones reach the offers it
// creates from: with the request's resources, they choose the shape.
func TestFleetQueryFiltersOffers(t *testing.T) {
	offers := []provider.Offer{
		{Backend: "docker", Region: "local", Instance: "small", CPUs: 1, Memory: 1 << 30, Price: 0.01, Zone: "a"},
		{Backend: "docker", Region: "local", Instance: "medium", CPUs: 2, Memory: 2 << 30, Price: 0.02, Zone: "b"},
		{Backend: "docker", Region: "local", Instance: "large", CPUs: 4, Memory: 4 << 30, Price: 0.04},
	}
	names := func(bf *policy.BackendFleet, req sched.Request) []string {
		var out []string
		for _, o := range provider.Filter(offers, fleetQuery(bf, req)) {
			out = append(out, o.Instance)
		}
		return out
	}
	for name, tc := range map[string]struct {
		bf   *policy.BackendFleet
		req  sched.Request
		want []string
	}{
		"any":                     {&policy.BackendFleet{}, sched.Request{}, []string{"small", "medium", "large"}},
		"types":                   {&policy.BackendFleet{InstanceTypes: []string{"large", "medium"}}, sched.Request{}, []string{"medium", "large"}},
		"types and resources":     {&policy.BackendFleet{InstanceTypes: []string{"small", "medium"}}, sched.Request{CPUs: 3}, nil},
		"zone":                    {&policy.BackendFleet{Zones: []string{"b"}}, sched.Request{}, []string{"medium"}},
		"zones, unzoned left out": {&policy.BackendFleet{Zones: []string{"a", "b"}}, sched.Request{CPUs: 1}, []string{"small", "medium"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := names(tc.bf, tc.req); !slices.Equal(got, tc.want) {
				t.Errorf("offers %v, want %v", got, tc.want)
			}
		})
	}
}

// A backend fleet whose provider cannot create its instances (here the
// real Docker provider without a berth binary to mount) is tried again
// after 1 s, then 2 s, not at every autoscale (every 100 ms here), and
// GET /fleets/NAME shows the last failure once.
func TestBackendFleetCreationBacksOff(t *testing.T) {
	containertest.Engine(t)
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	owner := "backoff" + hex.EncodeToString(rb[:])
	ctx := context.Background()
	p, err := docker.New(ctx, docker.Config{Owner: owner, Image: containertest.Image,
		Shapes: []docker.Shape{{Name: "small", CPUs: 1, Memory: 256 << 20, Price: 0.01}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Cleanup(cctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		p.Close()
	})
	rules, err := policy.Parse("policy.yml", []byte("providers:\n  docker:\n    image: "+containertest.Image+"\n    shapes: [{name: small, cpus: 1, memory: 256MB}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) {
		c.Rules, c.Providers, c.CloudEvery = rules, []provider.Provider{p}, 100*time.Millisecond
	})
	h.srv.SetCloudURL(h.http.URL)
	if _, err := h.c.ApplyFleet(ctx, api.FleetApplyRequest{Spec: fleetSpec(t, "type: fleet\nname: broken\nnodes: 1\n")}); err != nil {
		t.Fatal(err)
	}
	var recs []api.Instance
	var fl *api.Fleet
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if fl, err = h.c.Fleet(ctx, "broken"); err != nil {
			t.Fatal(err)
		}
		recs = recs[:0]
		all, err := h.st.ListInstances(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		// The failed ones (a later creation may be under way).
		for _, r := range all {
			if r.State == string(provider.RecordGone) {
				recs = append(recs, api.Instance{Key: r.Key, State: r.State, Detail: r.Detail, CreatedAt: r.CreatedAt})
			}
		}
		if len(recs) >= 3 && fl.LastError != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("three failed creations never happened: %+v, fleet %+v", recs, fl)
		}
	}
	slices.SortFunc(recs, func(a, b api.Instance) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for i, want := range []time.Duration{time.Second, 2 * time.Second} {
		if gap := recs[i+1].CreatedAt.Sub(recs[i].CreatedAt); gap < want-50*time.Millisecond {
			t.Errorf("creation %d came %v after the one before, want at least %v", i+2, gap, want)
		}
	}
	for _, r := range recs {
		if !strings.Contains(r.Detail, "no berth binary") {
			t.Errorf("record %+v, want gone: create failed", r)
		}
	}
	if e := fl.LastError; !strings.Contains(e.Message, "no berth binary to mount") || !e.RetryAt.After(e.At) {
		t.Errorf("last error %+v", e)
	}
	fmt.Fprintf(testWriter{t}, "creations at %v, %v, %v\n", recs[0].CreatedAt.Format(time.StampMilli), recs[1].CreatedAt.Format(time.StampMilli), recs[2].CreatedAt.Format(time.StampMilli))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
