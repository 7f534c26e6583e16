package store

import (
	"context"
	"errors"
	"testing"
	"time"
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
		scaled := time.Unix(1700000000, 123)
		if err := s.SetServiceScale(ctx, p, "web", 4, scaled); err != nil {
			t.Fatal(err)
		}
		if err := s.SetServiceScale(ctx, p, "none", 1, scaled); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetServiceScale of no service: %v, want ErrNotFound", err)
		}
		notBefore, seen := time.Unix(1700000100, 456), time.Unix(1700000050, 789)
		if err := s.SetServiceBackoff(ctx, p, "web", 3, notBefore, seen); err != nil {
			t.Fatal(err)
		}
		if err := s.SetServiceBackoff(ctx, p, "none", 1, notBefore, seen); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetServiceBackoff of no service: %v, want ErrNotFound", err)
		}
		got, err := s.ListServices(ctx)
		if err != nil || len(got) != 1 {
			t.Fatalf("ListServices = %v, %v", got, err)
		}
		if x := got[0]; x.Name != "web" || x.UserID != 2 || string(x.Spec) != `{"a":2}` || x.Wanted != 4 || x.CreatedAt.IsZero() ||
			!x.ScaledAt.Equal(scaled) || x.Fails != 3 || !x.NotBefore.Equal(notBefore) || !x.EndsSeen.Equal(seen) {
			t.Errorf("service = %+v", x)
		}
		// An apply (put) is a scaling event and starts the crash-loop
		// count again.
		before := time.Now()
		if err := s.PutService(ctx, &Service{ProjectID: p, Name: "web", UserID: 2, Spec: []byte(`{"a":3}`), Wanted: 4}); err != nil {
			t.Fatal(err)
		}
		got, _ = s.ListServices(ctx)
		if x := got[0]; x.Fails != 0 || !x.NotBefore.IsZero() || x.ScaledAt.Before(before.Add(-time.Second)) || x.EndsSeen.Before(before.Add(-time.Second)) {
			t.Errorf("after a put: %+v, want no fails, no backoff, scaled and ends seen now", x)
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
