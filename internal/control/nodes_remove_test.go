package control

import (
	"errors"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

// TestRemoveNode: a node that holds a job is not removed, nor one whose
// agent is connected (unless the server says it stopped it); once free
// and away it leaves the cluster, the Cycle and the store, while the
// job's record keeps its name.
func TestRemoveNode(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	s.node("n2", 4)
	id := s.submit(t, "type: task\nresources: {cpu: 4}\ncommands: [\"true\"]\n")
	s.pass(t)
	on := s.run(id).Nodes
	if len(on) != 1 {
		t.Fatalf("run placed on %v, want one node", on)
	}
	busy, free := on[0], "n1"
	if busy == "n1" {
		free = "n2"
	}
	if _, err := s.feed(RemoveNodeInput{Node: busy, Online: true}); !errors.Is(err, ErrNodeBusy) || !errors.Is(err, ErrConflict) {
		t.Errorf("removing %s, which holds a job: %v, want ErrNodeBusy", busy, err)
	}
	if _, err := s.feed(RemoveNodeInput{Node: free}); !errors.Is(err, ErrConflict) {
		t.Errorf("removing %s, whose agent is connected: %v, want a conflict", free, err)
	}
	if _, err := s.feed(RemoveNodeInput{Node: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing an unknown node: %v, want ErrNotFound", err)
	}
	ns := s.nodes[free]
	if _, err := s.feed(DisconnectInput{Node: free, Epoch: ns.epoch}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step(s.now, RemoveNodeInput{Node: free, Why: "test"}); err != nil {
		t.Fatalf("removing %s, free and away: %v", free, err)
	}
	var deleted []string
	for _, c := range s.Take().Commits {
		deleted = append(deleted, c.Batch.DeleteNodes...)
	}
	if len(deleted) != 1 || deleted[0] != free {
		t.Errorf("the store is told to delete %v, want [%s]", deleted, free)
	}
	for _, n := range s.Nodes() {
		if n.Name == free {
			t.Errorf("node %s still listed: %+v", free, n)
		}
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check after the removal: %v", err)
	}
	// The node's job ends; the node can go, and the run keeps its name.
	js := s.jobsLocked(s.runs[id])[0]
	if _, err := s.feed(ReportInput{Node: busy, Events: []api.AgentEvent{{JobID: js.rec.ID, Type: "started", Time: s.now}, {JobID: js.rec.ID, Type: "exited", Time: s.now}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.feed(RemoveNodeInput{Node: busy, Online: true}); err != nil {
		t.Fatalf("removing %s once its job ended: %v", busy, err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(s.Nodes()) != 0 {
		t.Errorf("nodes left: %+v", s.Nodes())
	}
}
