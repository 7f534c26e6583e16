package control

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
)

// A node's report is checked against what the cluster assigned it: an
// event about a job another node holds, and a log frame whose size does
// not match its data or that starts past the log's end, are refused (and
// named, for the server to log); the rest of the report is taken, and a
// resend of a frame already held is dropped without a word.
func TestReportCheckedAgainstAssignments(t *testing.T) {
	s := newPassServer(t)
	s.node("n1", 4)
	s.node("n2", 4)
	id := s.submit(t, "type: task\nresources: {cpu: 4}\ncommands: [\"true\"]\n")
	s.pass(t)
	rs := s.runs[id]
	if rs == nil || len(rs.jobs) != 1 || rs.jobs[0].rec.Node == "" {
		t.Fatalf("run %d not placed", id)
	}
	js := rs.jobs[0]
	owner, other := js.rec.Node, "n1"
	if owner == "n1" {
		other = "n2"
	}
	frame := func(off int64, data string) api.AgentEvent {
		return api.AgentEvent{JobID: js.rec.ID, Type: "log", Offset: off, Size: api.LogFrameHeader + int64(len(data)), Stream: "stdout", Data: []byte(data)}
	}
	report := func(node string, evs ...api.AgentEvent) Report {
		t.Helper()
		r, err := s.feed(ReportInput{Node: node, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		return r.(Report)
	}
	kinds := func(r Report) []string {
		var out []string
		for _, x := range r.Refused {
			k := "invalid"
			if errors.Is(x.Err, ErrForbidden) {
				k = "forbidden"
			}
			out = append(out, x.Event.Type+" "+k)
		}
		return out
	}

	// Another node reports the job started, logged and done: all refused,
	// nothing changed, nothing acknowledged.
	r := report(other, api.AgentEvent{JobID: js.rec.ID, Type: "started", Time: s.now}, frame(0, "forged\n"),
		api.AgentEvent{JobID: js.rec.ID, Type: "exited", Time: s.now})
	if diff := cmp.Diff([]string{"started forbidden", "log forbidden", "exited forbidden"}, kinds(r)); diff != "" {
		t.Errorf("another node's report, refused (-want +got):\n%s", diff)
	}
	if len(r.Ack.Closed) != 0 || len(r.Ack.LogSize) != 0 {
		t.Errorf("another node's report acknowledged: %+v", r.Ack)
	}
	if js.rec.Status != string(api.StatusProvisioning) || js.rec.LogSize != 0 || s.runs[id] == nil {
		t.Fatalf("another node's report changed the job: %s, log %d", js.rec.Status, js.rec.LogSize)
	}

	// Its own node: a frame lying about its size, and one past the end,
	// are refused; the good frame beside them is taken.
	lying := frame(0, "x")
	lying.Size = 1 << 20
	r = report(owner, api.AgentEvent{JobID: js.rec.ID, Type: "started", Time: s.now}, lying, frame(0, "hello\n"), frame(500, "gap\n"))
	if diff := cmp.Diff([]string{"log invalid", "log invalid"}, kinds(r)); diff != "" {
		t.Errorf("bad frames, refused (-want +got):\n%s", diff)
	}
	want := api.LogFrameHeader + int64(len("hello\n"))
	if js.rec.LogSize != want || r.Ack.LogSize[js.rec.ID] != want || js.rec.Status != string(api.StatusRunning) {
		t.Errorf("the honest part: status %s, log %d, ack %v; want running, %d", js.rec.Status, js.rec.LogSize, r.Ack.LogSize, want)
	}

	// A resend of the frame already held: dropped, not refused.
	r = report(owner, frame(0, "hello\n"))
	if len(r.Refused) != 0 || js.rec.LogSize != want {
		t.Errorf("a resend: refused %v, log %d; want nothing refused, %d", kinds(r), js.rec.LogSize, want)
	}

	// A job the cluster has closed: the agent may forget it.
	r = report(owner, api.AgentEvent{JobID: 999999, Type: "exited", Time: s.now})
	if len(r.Refused) != 0 || len(r.Ack.Closed) != 1 {
		t.Errorf("an unknown job's exit: refused %v, closed %v; want it closed", kinds(r), r.Ack.Closed)
	}
}
