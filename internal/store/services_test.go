package store

import (
	"context"
	"errors"
	"testing"
)

// Services: put creates or replaces (spec, owner, wanted), the wanted
// count moves alone, list answers every one, delete removes one and
// answers ErrNotFound the second time.
func TestServices(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		p, err := s.EnsureProject(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutService(ctx, &Service{ProjectID: p, Name: "web", UserID: 1, Spec: []byte(`{"a":1}`), Wanted: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutService(ctx, &Service{ProjectID: p, Name: "web", UserID: 2, Spec: []byte(`{"a":2}`), Wanted: 3}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetServiceWanted(ctx, p, "web", 4); err != nil {
			t.Fatal(err)
		}
		if err := s.SetServiceWanted(ctx, p, "none", 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetServiceWanted of no service: %v, want ErrNotFound", err)
		}
		got, err := s.ListServices(ctx)
		if err != nil || len(got) != 1 {
			t.Fatalf("ListServices = %v, %v", got, err)
		}
		if x := got[0]; x.Name != "web" || x.UserID != 2 || string(x.Spec) != `{"a":2}` || x.Wanted != 4 || x.CreatedAt.IsZero() {
			t.Errorf("service = %+v", x)
		}
		if err := s.DeleteService(ctx, p, "web"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteService(ctx, p, "web"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete: %v, want ErrNotFound", err)
		}
		if got, _ := s.ListServices(ctx); len(got) != 0 {
			t.Errorf("after delete: %v", got)
		}
	})
}
