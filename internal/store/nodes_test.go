package store

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A node's drain state is written with the node and read back after a
// reopen; writing the node again without one clears it.
func TestNodeDrainPersists(t *testing.T) { forEachStore(t, testNodeDrainPersists) }

func testNodeDrainPersists(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	n := &Node{Name: "n1", Info: []byte(`{"name":"n1"}`), RegisteredAt: ts(0), LastSeen: ts(5), Drain: []byte(`{"manual":{"reason":"disk"}}`)}
	if err := s.Apply(ctx, &Batch{Nodes: []*Node{n}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open()
	got, err := s.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*Node{n}, got); diff != "" {
		t.Errorf("nodes after reopen (-want +got):\n%s", diff)
	}
	n.Drain = nil
	if err := s.Apply(ctx, &Batch{Nodes: []*Node{n}}); err != nil {
		t.Fatal(err)
	}
	if got, err = s.ListNodes(ctx); err != nil || got[0].Drain != nil {
		t.Errorf("drain after clearing = %q, %v; want none", got[0].Drain, err)
	}
}
