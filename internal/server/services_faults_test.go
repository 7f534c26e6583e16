package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// runsNamed are every run named name, oldest first.
func runsNamed(t testing.TB, h *harness, name string) []api.Run {
	t.Helper()
	runs, err := h.c.Runs(context.Background(), client.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Run
	for _, r := range runs {
		if r.Name == name {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b api.Run) int { return int(a.ID - b.ID) })
	return out
}

// eventsOf is run id's history, a line an event.
func eventsOf(t testing.TB, h *harness, id int64) string {
	t.Helper()
	r, err := h.c.Run(context.Background(), strconv.FormatInt(id, 10))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range r.Events {
		fmt.Fprintf(&b, "%s: %s\n", e.Type, e.Message)
	}
	return b.String()
}

// TestServiceCrashLoop: a replica that exits at once is replaced after
// a wait that doubles (1 s, 2 s, 4 s, 8 s; here from 200 ms), each ended
// replica's history saying when the next starts, and at the fifth end in
// a row with none ready the service fails: no sixth replica, the gateway
// no longer knows it, and the last replica's history says why.
func TestServiceCrashLoop(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.srv.svcInit()
	h.srv.svc.mu.Lock()
	backoff := 200 * time.Millisecond
	h.srv.svc.backoff = backoff
	h.srv.svc.mu.Unlock()
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	applyService(t, h, "type: service\nname: crash\nport: 8000\nauth: false\ncommands: [\"exit 3\"]\n")
	waitForLong(t, "the service to fail", func() bool {
		runs := runsNamed(t, h, "crash")
		return len(runs) >= maxReplicaFailures && strings.Contains(eventsOf(t, h, runs[len(runs)-1].ID), "service crash failed")
	})
	time.Sleep(3 * serviceTick)
	runs := runsNamed(t, h, "crash")
	if len(runs) != maxReplicaFailures {
		t.Errorf("%d replicas, want %d (none after the service failed)", len(runs), maxReplicaFailures)
	}
	for i, r := range runs {
		if r.Status != api.StatusFailed {
			t.Errorf("replica %d: %s, want failed", r.ID, r.Status)
		}
		ev := eventsOf(t, h, r.ID)
		want := fmt.Sprintf("%d in a row; the next starts in %s", i+1, backoff<<i)
		if i == len(runs)-1 {
			want = fmt.Sprintf("service crash failed: %d replicas in a row ended before one was ready (the last: failed exited_with_error, exit 3)", maxReplicaFailures)
		}
		if !strings.Contains(ev, want) {
			t.Errorf("replica %d's history lacks %q:\n%s", r.ID, want, ev)
		}
		// The backoff held: each replica was submitted at least its wait
		// after the one before ended.
		if i > 0 && runs[i-1].FinishedAt != nil && r.SubmittedAt.Sub(*runs[i-1].FinishedAt) < backoff<<(i-1)-100*time.Millisecond {
			t.Errorf("replica %d submitted %s after the last ended, want at least %s", r.ID, r.SubmittedAt.Sub(*runs[i-1].FinishedAt), backoff<<(i-1))
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	if code, body, _ := gatewayGet(hc, h.http.URL+"/proxy/services/main/crash", "", "/"); code != http.StatusNotFound {
		t.Errorf("the failed service through the gateway: %d %q, want 404", code, body)
	}
	// An apply starts it again.
	applyService(t, h, "type: service\nname: crash\nport: 8000\nauth: false\ncommands: [\"exit 3\"]\n")
	stopServiceAtEnd(t, h, "crash")
	waitForLong(t, "a new replica", func() bool { return len(runsNamed(t, h, "crash")) > maxReplicaFailures })
}

// TestServiceStopReplicaAndScaleDown: `berth stop ID` of one replica
// stops it alone, and the service replaces it (the other goes on);
// then a service at 2 replicas re-applied as 1..2 with scaling and no
// traffic to speak of goes to 1 once scale_down_delay has passed, not
// before, draining the replica it stops: a client sending all along sees
// no failure.
func TestServiceStopReplicaAndScaleDown(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 4})
	dir := t.TempDir()
	port := freePort(t)
	applyService(t, h, webService("web", port, "v1", dir, "replicas: 2"))
	stopServiceAtEnd(t, h, "web")
	hc := &http.Client{Timeout: 60 * time.Second}
	base := h.http.URL + "/proxy/services/main/web"
	seen := map[string]bool{}
	waitForLong(t, "both replicas to answer", func() bool {
		if code, body, err := gatewayGet(hc, base, testToken, "/"); err == nil && code == http.StatusOK {
			seen[strings.Fields(body)[1]] = true
		}
		return len(seen) == 2
	})

	// A client sends all along, a request each 20 ms (far under the
	// target: one replica will do).
	var mu sync.Mutex
	var failures []string
	sent := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			code, body, err := gatewayGet(hc, base, testToken, "/x")
			mu.Lock()
			sent++
			if err != nil || code != http.StatusOK {
				failures = append(failures, fmt.Sprintf("%d %q %v", code, body, err))
			}
			mu.Unlock()
		}
	}()

	before := activeReplicas(t, h, "web")
	if len(before) != 2 {
		t.Fatalf("%d replicas, want 2", len(before))
	}
	victim, other := before[0].ID, before[1].ID
	if _, err := h.c.Stop(context.Background(), strconv.FormatInt(victim, 10), false); err != nil {
		t.Fatal(err)
	}
	waitForLong(t, "the stopped replica to be replaced", func() bool {
		now := activeReplicas(t, h, "web")
		ids := []int64{}
		for _, r := range now {
			ids = append(ids, r.ID)
		}
		return len(now) == 2 && !slices.Contains(ids, victim) && slices.Contains(ids, other)
	})
	if ev := eventsOf(t, h, victim); !strings.Contains(ev, "replica stopped by its user; drained, and another replaces it") {
		t.Errorf("the stopped replica's history:\n%s", ev)
	}
	waitForLong(t, "the new replica to be ready", func() bool {
		h.srv.svc.mu.Lock()
		defer h.srv.svc.mu.Unlock()
		n := 0
		for _, info := range h.srv.svc.byKey {
			for _, rep := range info.replica {
				if rep.ready {
					n++
				}
			}
		}
		return n == 2
	})

	applyService(t, h, webService("web", port, "v1", dir, "replicas: 1..2\nscaling: {metric: rps, target: 100, scale_down_delay: 4s}"))
	time.Sleep(time.Second)
	if n := len(activeReplicas(t, h, "web")); n != 2 {
		t.Errorf("%d replicas a second after the apply, want 2 (scale_down_delay is 4s)", n)
	}
	waitForLong(t, "the service to scale down to 1", func() bool { return len(activeReplicas(t, h, "web")) == 1 })
	time.Sleep(2 * serviceTick)
	close(stop)
	<-done
	if n := len(activeReplicas(t, h, "web")); n != 1 {
		t.Errorf("%d replicas after the scale-down, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed while a replica was stopped and the service scaled down; first: %s", len(failures), sent, failures[0])
	}
	t.Logf("%d requests while a replica was replaced and the service scaled down", sent)
}
