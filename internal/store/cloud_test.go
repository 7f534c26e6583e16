package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestInstancesAndVolumes(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		a := &Instance{Key: "srv-gpu-1", Fleet: "gpu", Backend: "docker", Offer: `{"instance":"small"}`, Node: "gpu-1", State: "creating"}
		if err := s.CreateInstance(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateInstance(ctx, &Instance{Key: "srv-gpu-1", Fleet: "x", State: "creating"}); !errors.Is(err, ErrExists) {
			t.Fatalf("a second record of one key: %v, want ErrExists", err)
		}
		if err := s.CreateInstance(ctx, &Instance{Key: "srv-gpu-2", Fleet: "gpu", Backend: "docker", Offer: "{}", Node: "gpu-2", State: "creating"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetInstanceState(ctx, "srv-gpu-1", "active", ""); err != nil {
			t.Fatal(err)
		}
		if err := s.SetInstanceState(ctx, "srv-gpu-2", "gone", "never created"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetInstanceState(ctx, "nope", "gone", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("state of a missing instance: %v", err)
		}
		live, err := s.ListInstances(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) != 1 || live[0].Key != "srv-gpu-1" || live[0].State != "active" || live[0].Node != "gpu-1" || live[0].Offer != `{"instance":"small"}` {
			t.Fatalf("live instances: %+v", live)
		}
		// The records survive a restart.
		s.Close()
		s = open()
		defer s.Close()
		all, err := s.ListInstances(ctx, true)
		if err != nil || len(all) != 2 || all[1].Detail != "never created" {
			t.Fatalf("all instances after reopening: %+v, %v", all, err)
		}

		if err := s.PutVolume(ctx, &Volume{ProjectID: 1, Name: "data", Backend: "docker", ProviderName: "p-data", State: "ready"}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutVolume(ctx, &Volume{ProjectID: 1, Name: "data", Backend: "docker", ProviderName: "p-data", State: "deleting",
			Region: "local", External: true, Detail: "busy", AutoCleanup: 3600, LastUsed: time.Unix(1700000000, 5).UTC()}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutVolume(ctx, &Volume{ProjectID: 2, Name: "scratch", Backend: "local", Node: "n1", Path: "/srv/scratch", State: "ready"}); err != nil {
			t.Fatal(err)
		}
		vs, err := s.ListVolumes(ctx, 1)
		if err != nil || len(vs) != 1 || vs[0].State != "deleting" || vs[0].Region != "local" || !vs[0].External || vs[0].Detail != "busy" || vs[0].AutoCleanup != 3600 ||
			!vs[0].LastUsed.Equal(time.Unix(1700000000, 5)) {
			t.Fatalf("project 1's volumes: %+v, %v", vs, err)
		}
		if vs, _ := s.ListVolumes(ctx, 0); len(vs) != 2 || vs[1].Node != "n1" || vs[1].Path != "/srv/scratch" || !vs[1].LastUsed.IsZero() {
			t.Fatalf("every volume: %+v", vs)
		}
		if err := s.DeleteVolume(ctx, 1, "data"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteVolume(ctx, 1, "data"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleting twice: %v", err)
		}
	})
}
