package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// The step relay: steps come in order to the ranks they name, polls wait
// for them, signals reach the ranks of their step, output and exits come
// back, steps are recorded, and the run's end closes them.
func TestStepRelay(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(*Config) {})
	h.srv.stepPollWait.Store(int64(300 * time.Millisecond))
	ctx := context.Background()
	// Three nodes, none there: the run stays pending, and active.
	r := submit(t, h, "type: task\nnodes: 3\ncommands: [\"true\"]\n")
	ref := strconv.FormatInt(r.ID, 10)

	// Nothing yet: the poll waits, then answers none.
	start := time.Now()
	if w, err := h.c.NextWork(ctx, ref, 1, -1, 0); err != nil || w != nil {
		t.Fatalf("NextWork with no step: %v, %v", w, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("the poll answered after %s, want it to wait", d)
	}

	// A poll waiting when the step comes gets it at once.
	got := make(chan *api.StepWork, 1)
	go func() {
		w, err := h.c.NextWork(ctx, ref, 2, -1, 0)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(50 * time.Millisecond)
	s0, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"echo", "a"}, Nodes: []int{0, 1, 2}, Here: []int{0}})
	if err != nil || s0.ID != 0 {
		t.Fatalf("first step: %+v, %v", s0, err)
	}
	if w := <-got; w == nil || len(w.Steps) != 1 || w.Steps[0].ID != 0 || w.Steps[0].Argv[1] != "a" {
		t.Fatalf("waiting poll got %+v", w)
	}
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"echo", "b"}, Nodes: []int{2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"echo", "c"}}); err != nil { // all nodes
		t.Fatal(err)
	}
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"x"}, Nodes: []int{3}}); err == nil {
		t.Errorf("a step on rank 3 of a 3-node run was accepted")
	}
	// In order, per rank: rank 1 skips step 1; rank 0 runs step 0 in srun.
	for _, c := range []struct {
		rank, after int
		want        []int
	}{{1, 0, []int{2}}, {2, 0, []int{1, 2}}, {2, 1, []int{2}}, {0, -1, []int{2}}} {
		w, err := h.c.NextWork(ctx, ref, c.rank, c.after, 0)
		var ids []int
		if w != nil {
			for _, st := range w.Steps {
				ids = append(ids, st.ID)
			}
		}
		if err != nil || !equalInts(ids, c.want) {
			t.Errorf("rank %d after %d: steps %v, %v; want %v", c.rank, c.after, ids, err, c.want)
		}
	}
	// A signal reaches the ranks its step runs on, once.
	if err := h.c.StepSignal(ctx, ref, 1, 10); err != nil {
		t.Fatal(err)
	}
	if w, err := h.c.NextWork(ctx, ref, 2, 2, 0); err != nil || w == nil || len(w.Signals) != 1 || w.Signals[0].Signal != 10 || w.Signals[0].Step != 1 {
		t.Errorf("rank 2's signals: %+v, %v", w, err)
	}
	if w, err := h.c.NextWork(ctx, ref, 1, 2, 0); err != nil || w != nil {
		t.Errorf("rank 1 got %+v, %v for a step it does not run", w, err)
	}

	// Output and exits come back by offsets, stdout and stderr apart; the
	// status waits for news.
	done := make(chan *api.StepStatus, 1)
	go func() {
		st, err := h.c.StepStatus(ctx, ref, 0, nil, nil, false)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	time.Sleep(50 * time.Millisecond)
	if ack, err := h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 1}, []byte("hello\n")); err != nil || ack.Have != 6 || ack.Read != 0 {
		t.Fatalf("output: %+v, %v", ack, err)
	}
	st := <-done
	if st == nil || len(st.Ranks) != 2 || string(st.Ranks[0].Data) != "hello\n" || st.Ranks[0].Next != 6 || st.Ranks[0].Exited {
		t.Fatalf("status after output: %+v", st)
	}
	// A resend of what the server has is skipped; a gap is refused.
	if ack, _ := h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 1, At: 0}, []byte("hello\nworld\n")); ack.Have != 12 {
		t.Errorf("overlapping output: have %d, want 12", ack.Have)
	}
	if ack, _ := h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 1, At: 20}, []byte("gap")); ack.Have != 12 {
		t.Errorf("output after a gap: have %d, want 12 (nothing taken)", ack.Have)
	}
	_, _ = h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 2}, []byte("oops\n"))
	_ = h.c.StepExit(ctx, ref, 0, 1, api.StepExit{Code: 0, Out: 12, Err: 5})
	_ = h.c.StepExit(ctx, ref, 0, 2, api.StepExit{Code: 3})
	st, err = h.c.StepStatus(ctx, ref, 0, map[int]int64{1: 6}, nil, false)
	if err != nil || string(st.Ranks[0].Data) != "world\n" || string(st.Ranks[0].Err) != "oops\n" || !st.Ranks[0].Exited || !st.Ranks[1].Exited || st.Ranks[1].Code != 3 {
		t.Fatalf("status after exits: %+v, %v", st, err)
	}
	// What srun has read (it asks from there next) is what the host may
	// forget.
	_, _ = h.c.StepStatus(ctx, ref, 0, map[int]int64{1: 12}, map[int]int64{1: 5}, false)
	if ack, _ := h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 1, At: 12}, nil); ack.Read != 12 {
		t.Errorf("read after srun took all: %d, want 12", ack.Read)
	}
	// An exit counts only once its output is through.
	_ = h.c.StepExit(ctx, ref, 2, 2, api.StepExit{Code: 0, Out: 3})
	if st, _ := h.c.StepStatus(ctx, ref, 2, nil, nil, false); st.Ranks[2].Exited {
		t.Errorf("rank 2 exited before its 3 bytes of output came: %+v", st.Ranks[2])
	}
	if _, err := h.c.StepOutput(ctx, ref, 1, 1, client.OutputOptions{FD: 1}, []byte("x")); err == nil {
		t.Errorf("output of rank 1 for a step of rank 2 only was accepted")
	}
	// Step 0 is over on its dispatched nodes; srun reports node 0's.
	if err := h.c.StepExit(ctx, ref, 0, 0, api.StepExit{Code: 0}); err != nil {
		t.Fatal(err)
	}
	steps, err := h.c.Steps(ctx, []int64{r.ID})
	if err != nil || len(steps) != 3 {
		t.Fatalf("recorded steps: %+v, %v", steps, err)
	}
	if s := steps[0]; s.Status != "failed" || s.ExitCode == nil || *s.ExitCode != 3 || s.Nodes != 3 || s.Name != "echo" {
		t.Errorf("step 0 recorded as %+v", s)
	}
	if steps[1].Status != "running" {
		t.Errorf("step 1 recorded as %+v", steps[1])
	}

	// srun says it is alive: the step is not reaped as abandoned.
	seen := func() time.Time {
		h.srv.steps.mu.Lock()
		defer h.srv.steps.mu.Unlock()
		return h.srv.steps.runs[r.ID].steps[1].seen
	}
	before := seen()
	time.Sleep(10 * time.Millisecond)
	if err := h.c.StepAlive(ctx, ref, 1); err != nil || !seen().After(before) {
		t.Errorf("alive: %v; seen %v, was %v", err, seen(), before)
	}
	if err := h.c.StepAlive(ctx, ref, 99); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("alive of no step: %v", err)
	}

	// Another user's run is not theirs to step into.
	bob := h.userClient(t, "bob")
	if _, err := bob.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"id"}}); err == nil || !strings.Contains(err.Error(), "another user's") {
		t.Errorf("bob's step in admin's run: %v", err)
	}

	// The run ends: a waiting poll learns it, the steps are closed.
	ended := make(chan error, 1)
	go func() {
		_, err := h.c.NextWork(ctx, ref, 1, 1000, 1000)
		ended <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := h.c.Stop(ctx, ref, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, client.ErrRunEnded) {
			t.Errorf("poll at the run's end: %v, want ErrRunEnded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the poll did not end with the run")
	}
	if _, err := h.c.StepStatus(ctx, ref, 1, nil, nil, false); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("status of a step of an ended run: %v", err)
	}
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"true"}}); err == nil {
		t.Errorf("a step of an ended run was accepted")
	}
	waitFor(t, "the steps closed", func() bool {
		steps, _ := h.c.Steps(ctx, []int64{r.ID})
		return len(steps) == 3 && steps[1].Status == "stopped" && steps[2].Status == "stopped"
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A restart of the server keeps the steps (their numbering, exits) and
// loses no output: it asks the hosts for what srun has not read.
func TestStepRelaySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := newHarnessAt(t, dir, addr)
	ctx := context.Background()
	r := submit(t, h, "type: task\nnodes: 2\ncommands: [\"true\"]\n")
	ref := strconv.FormatInt(r.ID, 10)
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"cat"}, Nodes: []int{0, 1}}); err != nil {
		t.Fatal(err)
	}
	_, _ = h.c.StepOutput(ctx, ref, 0, 0, client.OutputOptions{FD: 1}, []byte("abc"))
	_, _ = h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 1}, []byte("12345"))
	if err := h.c.StepExit(ctx, ref, 0, 0, api.StepExit{Code: 0, Out: 3}); err != nil {
		t.Fatal(err)
	}
	// srun read 2 bytes of rank 1's output, then the server restarts.
	st, _ := h.c.StepStatus(ctx, ref, 0, map[int]int64{0: 3, 1: 3}, nil, false)
	_ = st
	h.close()
	h = newHarnessAt(t, dir, addr)
	h.srv.stepPollWait.Store(int64(200 * time.Millisecond))

	// srun asks from where it was: nothing yet, the server knows nothing.
	st, err = h.c.StepStatus(ctx, ref, 0, map[int]int64{0: 3, 1: 3}, nil, false)
	if err != nil {
		t.Fatalf("status after a restart: %v", err)
	}
	if !st.Ranks[0].Exited || st.Ranks[1].Exited || len(st.Ranks[1].Data) != 0 {
		t.Fatalf("after a restart: %+v", st)
	}
	// The host's next output is answered "send from your oldest byte".
	ack, err := h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 1, At: 5}, []byte("678"))
	if err != nil || ack.Have != -1 || ack.Read != 3 {
		t.Fatalf("output after a restart: %+v, %v; want have -1 read 3", ack, err)
	}
	// It sends again from what srun had read (3) on.
	if ack, _ = h.c.StepOutput(ctx, ref, 0, 1, client.OutputOptions{FD: 1, At: 3, Start: true}, []byte("45678")); ack.Have != 8 {
		t.Fatalf("resend: have %d, want 8", ack.Have)
	}
	st, _ = h.c.StepStatus(ctx, ref, 0, map[int]int64{0: 3, 1: 3}, nil, false)
	if string(st.Ranks[1].Data) != "45678" || st.Ranks[1].Next != 8 {
		t.Errorf("srun got %q next %d after the restart, want \"45678\" 8", st.Ranks[1].Data, st.Ranks[1].Next)
	}
	// The numbering goes on.
	s1, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"true"}})
	if err != nil || s1.ID != 1 {
		t.Errorf("the step after a restart: %+v, %v; want ID 1", s1, err)
	}
}

// An attach stream joins srun's end to the host's: bytes flow both ways.
func TestStepAttach(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	r := submit(t, h, "type: task\nnodes: 2\ncommands: [\"true\"]\n")
	ref := strconv.FormatInt(r.ID, 10)
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"cat"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Attach(ctx, ref, 0, 0, "client"); err == nil {
		t.Errorf("attach to a step without an attached task was accepted")
	}
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"bash"}, PTY: true}); err != nil {
		t.Fatal(err)
	}
	hostc := make(chan error, 1)
	go func() {
		conn, err := h.c.Attach(ctx, ref, 1, 0, "host")
		if err != nil {
			hostc <- err
			return
		}
		defer conn.Close()
		typ, p, err := client.ReadFrame(conn)
		if err == nil && (typ != api.FrameStdin || string(p) != "ping") {
			err = errors.New("host got " + string(typ) + " " + string(p))
		}
		if err == nil {
			err = client.WriteFrame(conn, api.FrameStdout, []byte("pong"))
		}
		hostc <- err
	}()
	conn, err := h.c.Attach(ctx, ref, 1, 0, "client")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := client.WriteFrame(conn, api.FrameStdin, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	typ, p, err := client.ReadFrame(conn)
	if err != nil || typ != api.FrameStdout || !bytes.Equal(p, []byte("pong")) {
		t.Errorf("client got %c %q %v", typ, p, err)
	}
	if err := <-hostc; err != nil {
		t.Error(err)
	}
	// The host closed: the client's end closes too.
	if _, _, err := client.ReadFrame(conn); err == nil {
		t.Errorf("the client's end is still open after the host left")
	}
}

// A step whose srun stops asking for its output is killed on its nodes,
// once; a step srun follows, or runs alone, is not.
func TestStepReap(t *testing.T) {
	var r stepRelay
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	idle := stepIdle(25 * time.Second)
	followed := api.StepRequest{Argv: []string{"sleep", "1000"}}
	if err := stepNodes(&followed, 2); err != nil {
		t.Fatal(err)
	}
	alone := api.StepRequest{Argv: []string{"true"}, Here: []int{0}}
	if err := stepNodes(&alone, 1); err != nil {
		t.Fatal(err)
	}
	a := r.add(1, followed, []string{"n1", "n2"}, t0)
	r.add(1, alone, []string{"n1"}, t0)
	b := r.add(1, followed, []string{"n1", "n2"}, t0)
	// srun follows step b; a's srun is gone.
	if _, _, _, err := r.status(1, b.rec.StepID, nil, nil, false, t0.Add(idle)); err != nil {
		t.Fatal(err)
	}
	if n := r.reap(t0.Add(idle), idle); n != 0 {
		t.Errorf("reaped %d steps at the bound, want none", n)
	}
	if n := r.reap(t0.Add(idle+time.Second), idle); n != 1 {
		t.Fatalf("reaped %d steps, want 1 (the unfollowed one)", n)
	}
	w, _ := r.work(1, 1, 100, 0)
	if w == nil || len(w.Signals) != 1 || w.Signals[0].Step != a.rec.StepID || w.Signals[0].Signal != 9 {
		t.Errorf("the hosts' work after the reap: %+v, want SIGKILL for step %d", w, a.rec.StepID)
	}
	if n := r.reap(t0.Add(2*idle+time.Second), idle); n != 1 {
		t.Errorf("a second reap killed %d steps, want 1 (b, no longer followed; a only once)", n)
	}
}

// A cancelled step says so to srun once, queues SIGTERM for its hosts,
// and ends as stopped whatever its tasks' statuses.
func TestStepCancel(t *testing.T) {
	var r stepRelay
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	local := api.StepRequest{Argv: []string{"sleep", "60"}, Here: []int{0}}
	if err := stepNodes(&local, 1); err != nil {
		t.Fatal(err)
	}
	st := r.add(1, local, []string{"n1"}, now)
	// srun alone runs it: a status waits (nothing to follow) until a cancel.
	if _, news, _, _ := r.status(1, st.rec.StepID, nil, nil, false, now); news {
		t.Errorf("a local step's status answered at once before a cancel")
	}
	if err := r.cancel(1, st.rec.StepID); err != nil {
		t.Fatal(err)
	}
	got, news, _, _ := r.status(1, st.rec.StepID, nil, nil, false, now)
	if !news || !got.Cancelled {
		t.Errorf("after the cancel: news %v, %+v", news, got)
	}
	if _, news, _, _ := r.status(1, st.rec.StepID, nil, nil, true, now); news {
		t.Errorf("the cancel is news again to a srun that knows it")
	}
	if w, _ := r.work(1, 0, -1, 0); w != nil {
		t.Errorf("a step srun runs alone sent work to a host: %+v", w)
	}
	rec, err := r.exit(1, st.rec.StepID, 0, api.StepExit{Code: 143}, now)
	if err != nil || rec.Status != "stopped" {
		t.Errorf("the cancelled step ended as %+v, %v; want stopped", rec, err)
	}
	if err := r.cancel(1, st.rec.StepID); !errors.Is(err, ErrNotFound) {
		t.Errorf("cancel of an ended step: %v", err)
	}
}

// A run keeps at most maxStepsPerRun steps in memory: ended ones go
// first; running ones are never dropped.
func TestStepRelayBound(t *testing.T) {
	var r stepRelay
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	req := api.StepRequest{Argv: []string{"true"}}
	if err := stepNodes(&req, 1); err != nil {
		t.Fatal(err)
	}
	running := r.add(1, req, []string{"n1"}, now)
	for i := 0; i < maxStepsPerRun+10; i++ {
		st := r.add(1, req, []string{"n1"}, now)
		if _, err := r.exit(1, st.rec.StepID, 0, api.StepExit{}, now); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	kept, first := len(r.runs[1].steps), r.runs[1].steps[running.rec.StepID]
	r.mu.Unlock()
	if kept != maxStepsPerRun || first == nil {
		t.Errorf("%d steps kept (the running one kept: %v), want %d and it", kept, first != nil, maxStepsPerRun)
	}
}
