package server

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// The step relay: steps come in order to the ranks they name, polls wait
// for them, output and exits come back, and the run's end drops them.
func TestStepRelay(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(*Config) {})
	h.srv.stepPollWait = 300 * time.Millisecond
	ctx := context.Background()
	// Two nodes, none there: the run stays pending, and active.
	r := submit(t, h, "type: task\nnodes: 3\ncommands: [\"true\"]\n")
	ref := strconv.FormatInt(r.ID, 10)

	// Nothing yet: the poll waits, then answers none.
	start := time.Now()
	if st, err := h.c.NextStep(ctx, ref, 1, -1, ""); err != nil || st != nil {
		t.Fatalf("NextStep with no step: %v, %v", st, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("the poll answered after %s, want it to wait", d)
	}

	// A poll waiting when the step comes gets it at once.
	got := make(chan *api.StepAssignment, 1)
	go func() {
		st, err := h.c.NextStep(ctx, ref, 2, -1, "")
		if err != nil {
			t.Error(err)
		}
		got <- st
	}()
	time.Sleep(50 * time.Millisecond)
	s0, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"echo", "a"}, Ranks: []int{1, 2}})
	if err != nil || s0.ID != 0 {
		t.Fatalf("first step: %+v, %v", s0, err)
	}
	if st := <-got; st == nil || st.ID != 0 || st.Argv[1] != "a" || st.Epoch != s0.Epoch {
		t.Fatalf("waiting poll got %+v", st)
	}
	s1, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"echo", "b"}, Ranks: []int{2}})
	if err != nil || s1.ID != 1 {
		t.Fatalf("second step: %+v, %v", s1, err)
	}
	s2, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"echo", "c"}}) // all ranks
	if err != nil || s2.ID != 2 {
		t.Fatalf("third step: %+v, %v", s2, err)
	}
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"x"}, Ranks: []int{3}}); err == nil {
		t.Errorf("a step on rank 3 of a 3-node run was accepted")
	}
	// In order, per rank: rank 1 skips step 1.
	for _, c := range []struct{ rank, after, want int }{{1, 0, 2}, {2, 0, 1}, {2, 1, 2}, {0, -1, 2}} {
		st, err := h.c.NextStep(ctx, ref, c.rank, c.after, s0.Epoch)
		if err != nil || st == nil || st.ID != c.want {
			t.Errorf("rank %d after %d: %+v, %v; want step %d", c.rank, c.after, st, err, c.want)
		}
	}
	// Another epoch (the server restarted): from the start again.
	if st, err := h.c.NextStep(ctx, ref, 2, 5, "old"); err != nil || st == nil || st.ID != 0 {
		t.Errorf("a stale epoch: %+v, %v; want step 0", st, err)
	}

	// Output and exits come back by offsets; the status waits for news.
	done := make(chan *api.StepStatus, 1)
	go func() {
		st, err := h.c.StepStatus(ctx, ref, 0, map[int]int64{1: 0, 2: 0})
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	time.Sleep(50 * time.Millisecond)
	if err := h.c.StepOutput(ctx, ref, 0, 1, []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	st := <-done
	if st == nil || len(st.Ranks) != 2 || string(st.Ranks[0].Data) != "hello\n" || st.Ranks[0].Next != 6 || st.Ranks[0].Exited {
		t.Fatalf("status after output: %+v", st)
	}
	_ = h.c.StepOutput(ctx, ref, 0, 1, []byte("world\n"))
	_ = h.c.StepExit(ctx, ref, 0, 1, 0)
	_ = h.c.StepExit(ctx, ref, 0, 2, 3)
	st, err = h.c.StepStatus(ctx, ref, 0, map[int]int64{1: 6})
	if err != nil || string(st.Ranks[0].Data) != "world\n" || !st.Ranks[0].Exited || !st.Ranks[1].Exited || st.Ranks[1].Code != 3 {
		t.Fatalf("status after exits: %+v, %v", st, err)
	}
	if err := h.c.StepOutput(ctx, ref, 1, 1, []byte("x")); err == nil {
		t.Errorf("output of rank 1 for a step of rank 2 only was accepted")
	}

	// Bounded: a rank's output stops at the cap with a marker.
	big := bytes.Repeat([]byte("y"), 600<<10)
	for i := 0; i < 3; i++ {
		if err := h.c.StepOutput(ctx, ref, 2, 0, big); err != nil {
			t.Fatal(err)
		}
	}
	st, err = h.c.StepStatus(ctx, ref, 2, map[int]int64{0: 0})
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Ranks[0].Data; len(d) != stepOutputCap+len(stepTruncated) || !strings.HasSuffix(string(d), stepTruncated) {
		t.Errorf("capped output: %d bytes, ends %q", len(d), d[max(len(d)-80, 0):])
	}
	// Bounded: at most maxStepsPerRun steps are kept.
	for i := 0; i < maxStepsPerRun+10; i++ {
		if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"true"}, Ranks: []int{0}}); err != nil {
			t.Fatal(err)
		}
	}
	h.srv.steps.mu.Lock()
	kept := len(h.srv.steps.runs[r.ID].steps)
	h.srv.steps.mu.Unlock()
	if kept != maxStepsPerRun {
		t.Errorf("%d steps kept, want %d", kept, maxStepsPerRun)
	}

	// The run ends: a waiting poll learns it, and the steps are dropped.
	ended := make(chan error, 1)
	go func() {
		_, err := h.c.NextStep(ctx, ref, 1, 1000, s0.Epoch)
		ended <- err
	}()
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
	h.srv.steps.sweep(h.srv.runActive)
	h.srv.steps.mu.Lock()
	_, left := h.srv.steps.runs[r.ID]
	h.srv.steps.mu.Unlock()
	if left {
		t.Errorf("the ended run's steps are still kept")
	}
	if _, err := h.c.StepStatus(ctx, ref, 0, nil); !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), "no such step") {
		t.Errorf("status of a dropped step: %v", err)
	}
	if _, err := h.c.CreateStep(ctx, ref, api.StepRequest{Argv: []string{"true"}}); err == nil {
		t.Errorf("a step of an ended run was accepted")
	}
}
