package store

import (
	"context"
	"errors"
	"testing"
)

// A fleet is created, read, listed, its state recorded, replaced (keeping
// its creator) and deleted, on both databases; its sealed key comes back
// byte for byte.
func TestFleets(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		key := []byte{0, 1, 2, 255, 254}
		f := &Fleet{Name: "lab", ProjectID: 3, Spec: `{"type":"fleet"}`, Status: "provisioning", SSHKey: key,
			ServerURL: "http://10.0.0.1:8080", Hosts: `[]`, CreatedBy: 7}
		if err := s.PutFleet(ctx, f); err != nil {
			t.Fatal(err)
		}
		if err := s.PutFleet(ctx, &Fleet{Name: "aaa", ProjectID: 1, Spec: "{}", Status: "active", ServerURL: "u", Hosts: "[]", CreatedBy: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetFleetState(ctx, "lab", "active", `[{"host":"a"}]`); err != nil {
			t.Fatal(err)
		}
		if err := s.SetFleetState(ctx, "nope", "active", `[]`); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetFleetState of a missing fleet: %v, want ErrNotFound", err)
		}
		s = open() // what was committed is read back after a reopen
		got, err := s.GetFleet(ctx, "lab")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != "active" || got.Hosts != `[{"host":"a"}]` || string(got.SSHKey) != string(key) || got.ProjectID != 3 ||
			got.CreatedBy != 7 || got.ServerURL != f.ServerURL || got.Spec != f.Spec || got.CreatedAt.IsZero() {
			t.Errorf("GetFleet = %+v", got)
		}
		if err := s.PutFleet(ctx, &Fleet{Name: "lab", ProjectID: 3, Spec: `{"type":"fleet","name":"lab"}`, Status: "provisioning",
			ServerURL: "u2", Hosts: `[]`, CreatedBy: 99}); err != nil {
			t.Fatal(err)
		}
		all, err := s.ListFleets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[0].Name != "aaa" || all[1].Name != "lab" || all[1].CreatedBy != 7 || all[1].SSHKey != nil || all[1].ServerURL != "u2" {
			t.Errorf("ListFleets = %+v %+v", all[0], all[len(all)-1])
		}
		if err := s.DeleteFleet(ctx, "lab"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetFleet(ctx, "lab"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetFleet after delete: %v, want ErrNotFound", err)
		}
		if err := s.DeleteFleet(ctx, "lab"); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteFleet again: %v, want ErrNotFound", err)
		}
	})
}
