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

// A removed node's row is deleted (after the batch's upserts), and stays
// deleted after a reopen; the others are kept.
func TestNodeDelete(t *testing.T) { forEachStore(t, testNodeDelete) }

func testNodeDelete(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	a := &Node{Name: "a", Info: []byte(`{"name":"a"}`), RegisteredAt: ts(0), LastSeen: ts(1)}
	b := &Node{Name: "b", Info: []byte(`{"name":"b"}`), RegisteredAt: ts(0), LastSeen: ts(1)}
	if err := s.Apply(ctx, &Batch{Nodes: []*Node{a, b}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, &Batch{Nodes: []*Node{b}, DeleteNodes: []string{"b", "never-there"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open()
	got, err := s.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*Node{a}, got); diff != "" {
		t.Errorf("nodes after the delete and a reopen (-want +got):\n%s", diff)
	}
}
