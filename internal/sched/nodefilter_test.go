package sched

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// --nodelist, --exclude and --constraint narrow the nodes a run may use:
// it starts on an allowed node even when another is first, waits for
// Resources when the allowed ones are busy, and never fits
// (ReqNodeNotAvail) when no node is allowed; a run without a filter is
// not judged by the miss of a run with one (dominates).
func TestNodeFilters(t *testing.T) {
	feat := func(n Node, f ...string) Node { n.Features = f; return n }
	nodes := []Node{feat(aNode("n1", 2, 8*gb), "ib"), feat(aNode("n2", 2, 8*gb), "ib", "a100"), aNode("n3", 2, 8*gb)}
	with := func(p Pending, f func(*Request)) Pending { p.Request = p.req(); f(p.Request); return p }
	tests := map[string]struct {
		pending    []Pending
		wantStarts map[int64][]string
		wantReason map[int64]string
	}{
		"nodelist": {
			pending:    []Pending{with(aRun(1, 1), func(r *Request) { r.Nodes = []string{"n3"} })},
			wantStarts: map[int64][]string{1: {"n3"}},
		},
		"exclude": {
			pending:    []Pending{with(aRun(1, 2), func(r *Request) { r.Exclude = []string{"n1", "n2"} })},
			wantStarts: map[int64][]string{1: {"n3"}},
		},
		"every feature": {
			pending:    []Pending{with(aRun(1, 1), func(r *Request) { r.Features = []string{"a100", "ib"} })},
			wantStarts: map[int64][]string{1: {"n2"}},
		},
		"two nodes with a feature": {
			pending:    []Pending{with(aRun(1, 2).nodes(2), func(r *Request) { r.Features = []string{"ib"} })},
			wantStarts: map[int64][]string{1: {"n1", "n2"}},
		},
		"no such feature": {
			pending:    []Pending{with(aRun(1, 1), func(r *Request) { r.Features = []string{"gpu"} })},
			wantReason: map[int64]string{1: ReasonNoNode},
		},
		"the allowed node busy, another run goes elsewhere": {
			pending: []Pending{
				aRun(1, 2).prio(90),
				with(aRun(2, 2).prio(80), func(r *Request) { r.Nodes = []string{"n1"} }),
				aRun(3, 2).prio(70),
			},
			wantStarts: map[int64][]string{1: {"n1"}, 3: {"n2"}},
			wantReason: map[int64]string{2: ReasonResources},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Nodes: nodes, Pending: tc.pending}
			got := Schedule(snap, t0)
			starts := map[int64][]string{}
			for _, s := range got.Starts {
				for _, p := range s.Placements {
					starts[s.RunID] = append(starts[s.RunID], p.Node)
				}
			}
			if tc.wantStarts == nil {
				tc.wantStarts = map[int64][]string{}
			}
			if tc.wantReason == nil {
				tc.wantReason = map[int64]string{}
			}
			if d := cmp.Diff(tc.wantStarts, starts); d != "" {
				t.Errorf("starts (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantReason, got.Reasons); d != "" {
				t.Errorf("reasons (-want +got):\n%s", d)
			}
		})
	}
}

// Nodes in network segments (placement: cluster): a multi-node run's jobs
// go to nodes of one segment, skipping the first-fit node of another; a run
// no segment can hold does not start across two; one-node runs are not
// affected.
func TestSegments(t *testing.T) {
	seg := func(n Node, s string) Node { n.Features = []string{SegmentFeature + s}; return n }
	nodes := []Node{seg(aNode("n1", 2, 8*gb), "a"), seg(aNode("n2", 2, 8*gb), "b"), seg(aNode("n3", 2, 8*gb), "a")}
	tests := map[string]struct {
		pending    []Pending
		wantStarts map[int64][]string
	}{
		"two nodes of one segment":           {pending: []Pending{aRun(1, 2).nodes(2)}, wantStarts: map[int64][]string{1: {"n1", "n3"}}},
		"three nodes: no segment holds them": {pending: []Pending{aRun(1, 2).nodes(3)}, wantStarts: map[int64][]string{}},
		"one node: the first":                {pending: []Pending{aRun(1, 2)}, wantStarts: map[int64][]string{1: {"n1"}}},
		"segment a busy: b alone cannot hold two": {
			pending:    []Pending{aRun(1, 2).prio(90), aRun(2, 2).nodes(2).prio(80)},
			wantStarts: map[int64][]string{1: {"n1"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Schedule(Snapshot{Nodes: nodes, Pending: tc.pending}, t0)
			starts := map[int64][]string{}
			for _, s := range got.Starts {
				for _, p := range s.Placements {
					starts[s.RunID] = append(starts[s.RunID], p.Node)
				}
			}
			if d := cmp.Diff(tc.wantStarts, starts); d != "" {
				t.Errorf("starts (-want +got):\n%s", d)
			}
		})
	}
	// Never fits: three nodes in segments of two and one is refused at
	// once (ReqNodeNotAvail), not left waiting for resources; without
	// segments three nodes would hold it.
	never := Schedule(Snapshot{Nodes: nodes, Pending: []Pending{aRun(1, 2).nodes(3), aRun(2, 2).nodes(2)}}, t0)
	if got := never.Reasons[1]; got != ReasonNoNode {
		t.Errorf("a 3-node run no segment holds: reason %q, want %q", got, ReasonNoNode)
	}
	if len(never.Starts) != 1 || never.Starts[0].RunID != 2 {
		t.Errorf("the 2-node run behind it: starts %+v, want it started", never.Starts)
	}
	if !Fits(nodes, *aRun(1, 2).Request, 2, false) || Fits(nodes, *aRun(1, 2).Request, 3, false) {
		t.Error("Fits: two nodes of segment a fit, three nodes in no one segment do not")
	}
	// Without segments the same two-node run takes the first two nodes.
	plain := []Node{aNode("n1", 2, 8*gb), aNode("n2", 2, 8*gb), aNode("n3", 2, 8*gb)}
	got := Schedule(Snapshot{Nodes: plain, Pending: []Pending{aRun(1, 2).nodes(2)}}, t0)
	if len(got.Starts) != 1 || got.Starts[0].Placements[1].Node != "n2" {
		t.Errorf("without segments: %+v", got.Starts)
	}
}
