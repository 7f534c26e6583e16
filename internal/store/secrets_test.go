package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// Secrets are per project: put creates or replaces (value and SetBy, the
// creation time kept), get and list answer what was put, delete removes
// one and answers ErrNotFound the second time.
func TestSecrets(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		p1, err := s.EnsureProject(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		p2, err := s.EnsureProject(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		bin := []byte{0, 1, 2, 0xff, 'x'} // ciphertexts are bytes, not text
		for _, x := range []*Secret{{ProjectID: p1, Name: "tok", Value: bin, SetBy: 1}, {ProjectID: p2, Name: "tok", Value: []byte("p2"), SetBy: 2},
			{ProjectID: p1, Name: "a", Value: []byte("a1"), SetBy: 1}} {
			if err := s.PutSecret(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.GetSecret(ctx, p1, "tok")
		if err != nil || !bytes.Equal(got.Value, bin) || got.SetBy != 1 || got.CreatedAt.IsZero() {
			t.Fatalf("GetSecret = %+v, %v", got, err)
		}
		created := got.CreatedAt
		if err := s.PutSecret(ctx, &Secret{ProjectID: p1, Name: "tok", Value: []byte("new"), SetBy: 3}); err != nil {
			t.Fatal(err)
		}
		got, err = s.GetSecret(ctx, p1, "tok")
		if err != nil || string(got.Value) != "new" || got.SetBy != 3 || !got.CreatedAt.Equal(created) || got.UpdatedAt.Before(created) {
			t.Fatalf("after a replace: %+v, %v", got, err)
		}
		list, err := s.ListSecrets(ctx, p1)
		if err != nil || len(list) != 2 || list[0].Name != "a" || list[1].Name != "tok" {
			t.Fatalf("ListSecrets(p1) = %v, %v", list, err)
		}
		all, err := s.ListSecrets(ctx, 0)
		if err != nil || len(all) != 3 {
			t.Fatalf("ListSecrets(0) = %v, %v", all, err)
		}
		if err := s.DeleteSecret(ctx, p1, "tok"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSecret(ctx, p1, "tok"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		if _, err := s.GetSecret(ctx, p1, "tok"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if got, err := s.GetSecret(ctx, p2, "tok"); err != nil || string(got.Value) != "p2" {
			t.Fatalf("the other project's secret: %+v, %v", got, err)
		}
	})
}
