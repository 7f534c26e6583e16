package control

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// TestServiceFailedRecord: a failed service's record is a run of its
// configuration made and ended failed in one batch (its jobs too, never
// on a node), its history saying why; it holds nothing, leaves memory,
// and a pass places nothing. A configuration that is not a service is
// refused and changes nothing.
func TestServiceFailedRecord(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	tk, err := spec.Parse("svc.yml", []byte("type: service\nname: web\nport: 8000\ncommands: [\"exit 3\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(tk)
	in := ServiceFailedInput{Submit: SubmitInput{UserID: 1, User: "admin", ProjectID: 1, Project: "main", Task: tk, Body: body},
		Reason: lifecycle.ReasonRetryLimit, Message: "service web failed: 5 replicas in a row"}
	r, err := s.Step(s.now, in)
	if err != nil {
		t.Fatal(err)
	}
	rec := r.(store.Run)
	if rec.Status != string(lifecycle.StatusFailed) || rec.Reason != string(lifecycle.ReasonRetryLimit) || rec.FinishedAt.IsZero() || rec.Name != "web" {
		t.Errorf("record = %s %s finished %v name %q, want failed retry_limit_exceeded, finished, web", rec.Status, rec.Reason, rec.FinishedAt, rec.Name)
	}
	commits := s.Take().Commits
	if len(commits) != 1 {
		t.Fatalf("%d batches, want 1 (made and ended together)", len(commits))
	}
	b := commits[0].Batch
	last := b.Runs[len(b.Runs)-1]
	if last.ID != rec.ID || last.Status != string(lifecycle.StatusFailed) {
		t.Errorf("the batch's last word on the run: %+v", last)
	}
	if len(b.Jobs) == 0 {
		t.Fatal("no job in the batch")
	}
	for _, j := range b.Jobs {
		if j.Node != "" {
			t.Errorf("job %d on node %q, want none", j.ID, j.Node)
		}
	}
	if j := b.Jobs[len(b.Jobs)-1]; j.Status != string(lifecycle.StatusFailed) || j.Reason != string(lifecycle.ReasonRetryLimit) {
		t.Errorf("its job ends %s %s, want failed retry_limit_exceeded", j.Status, j.Reason)
	}
	found := false
	for _, e := range b.Events {
		found = found || e.RunID == rec.ID && e.Type == "failed" && e.Message == in.Message
	}
	if !found {
		t.Errorf("no history line saying why in %+v", b.Events)
	}
	if v := s.run(rec.ID); v.Status != "ended" {
		t.Errorf("the record in memory: %+v, want gone", v)
	}
	if p, _ := s.feed(PassInput{}); p.(*Pass) != nil {
		t.Errorf("a pass after the record has something to schedule: %+v", p)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	task, _ := spec.Parse("t.yml", []byte("type: task\ncommands: [\"true\"]\n"))
	in.Submit.Task = task
	if _, err := s.Step(s.now, in); !errors.Is(err, ErrInvalid) {
		t.Errorf("a task's record: %v, want ErrInvalid", err)
	}
	if c := s.Take().Commits; len(c) != 0 {
		t.Errorf("a refused record emitted %d batches", len(c))
	}
}
