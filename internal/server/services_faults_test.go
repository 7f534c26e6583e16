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
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/store"
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

// replicasAndRecord splits the runs named name into the service's
// replicas and the record of its failure (nil: none).
func replicasAndRecord(t testing.TB, h *harness, name string) (replicas []api.Run, record *api.Run) {
	t.Helper()
	for _, r := range runsNamed(t, h, name) {
		if r.Reason == string(lifecycle.ReasonRetryLimit) {
			if record != nil {
				t.Errorf("two records of the service's failure: %d and %d", record.ID, r.ID)
			}
			record = &r
			continue
		}
		replicas = append(replicas, r)
	}
	return replicas, record
}

// setBackoff shortens h's crash-loop backoff.
func setBackoff(h *harness, d time.Duration) {
	h.srv.svcInit()
	h.srv.svc.mu.Lock()
	h.srv.svc.backoff = d
	h.srv.svc.mu.Unlock()
}

// TestServiceCrashLoop: a replica that exits at once is replaced after
// a wait that doubles (1 s, 2 s, 4 s, 8 s; here from 200 ms), each ended
// replica's history saying when the next starts, and at the fifth end in
// a row with none ready the service fails: no sixth replica, the gateway
// no longer knows it, the last replica's history says why, and the
// service's end has a record of its own: a run of its name, failed
// retry_limit_exceeded, that `berth ps` shows and a restart keeps. A
// restart of the server in the middle of the loop does not start the
// count again (it is stored with the service).
func TestServiceCrashLoop(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	backoff := 200 * time.Millisecond
	setBackoff(h, backoff)
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	const conf = "type: service\nname: crash\nport: 8000\nauth: false\ncommands: [\"exit 3\"]\n"
	applyService(t, h, conf)
	waitForLong(t, "two replicas to end", func() bool {
		reps, _ := replicasAndRecord(t, h, "crash")
		return len(reps) >= 2 && reps[1].Status.Finished()
	})
	addr := h.http.Listener.Addr().String()
	h.close()
	h = newHarnessAt(t, dir, addr)
	setBackoff(h, backoff)
	waitForLong(t, "the service to fail", func() bool {
		_, rec := replicasAndRecord(t, h, "crash")
		return rec != nil
	})
	time.Sleep(3 * serviceTick)
	runs, rec := replicasAndRecord(t, h, "crash")
	if len(runs) != maxReplicaFailures {
		t.Errorf("%d replicas, want %d (the restart kept the count; none after the service failed)", len(runs), maxReplicaFailures)
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
	// The record, as the API, `berth ps` (the last run when none is
	// active) and a restart show it.
	checkRecord := func(h *harness) {
		t.Helper()
		r, err := h.c.Run(context.Background(), strconv.FormatInt(rec.ID, 10))
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != api.StatusFailed || r.Reason != "retry_limit_exceeded" || r.FinishedAt == nil || r.ID <= runs[len(runs)-1].ID {
			t.Errorf("the service's record: %s %s finished %v (ID %d), want failed retry_limit_exceeded after its replicas", r.Status, r.Reason, r.FinishedAt, r.ID)
		}
		if ev := eventsOf(t, h, r.ID); !strings.Contains(ev, "failed: service crash failed: 5 replicas in a row ended before one was ready") {
			t.Errorf("the record's history:\n%s", ev)
		}
		last, err := h.c.Runs(context.Background(), client.ListOptions{All: true, Limit: 1})
		if err != nil || len(last) != 1 || last[0].ID != rec.ID {
			t.Errorf("the last run = %v, %v: want the service's record %d", last, err, rec.ID)
		}
	}
	checkRecord(h)
	h.close()
	h = newHarnessAt(t, dir, addr)
	checkRecord(h)
	time.Sleep(2 * serviceTick)
	if reps, _ := replicasAndRecord(t, h, "crash"); len(reps) != maxReplicaFailures {
		t.Errorf("%d replicas after a restart, want %d: a failed service stays failed", len(reps), maxReplicaFailures)
	}
	// An apply starts it again.
	setBackoff(h, backoff)
	if r := applyService(t, h, conf); r.ID == rec.ID {
		t.Errorf("apply answered the failed record %d", r.ID)
	}
	stopServiceAtEnd(t, h, "crash")
	waitForLong(t, "a new replica", func() bool {
		reps, _ := replicasAndRecord(t, h, "crash")
		return len(reps) > maxReplicaFailures
	})
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

// TestServiceScaleSurvivesRestart: a service the autoscaler scaled up
// keeps its replicas across a restart of the server: the count and the
// time of the last scaling are stored, and the request rate, which the
// restart loses, is not read as no traffic (no scaling down before a
// whole window of it was seen), though scale_down_delay passed long ago.
func TestServiceScaleSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	startAgent(t, h, agentOpts{name: "n1", cpus: 4})
	port := freePort(t)
	conf := webService("busy", port, "v1", t.TempDir(), "auth: false\nreplicas: 1..2\nscaling: {metric: rps, target: 1, scale_up_delay: 0s, scale_down_delay: 1s}")
	applyService(t, h, conf)
	waitForLong(t, "a replica", func() bool { return len(activeReplicas(t, h, "busy")) == 1 })
	// Traffic: 200 requests in the window (3.3/s for a target of 1).
	h.srv.svc.mu.Lock()
	for _, info := range h.srv.svc.byKey {
		for range 200 {
			info.hits.add(time.Now())
		}
	}
	h.srv.svc.mu.Unlock()
	h.srv.wakeServices()
	waitForLong(t, "the service to scale up to 2", func() bool { return len(activeReplicas(t, h, "busy")) == 2 })
	row := func(h *harness) *store.Service {
		t.Helper()
		var got *store.Service
		waitForLong(t, "the scaling to be stored", func() bool {
			rows, err := h.st.ListServices(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got = nil
			for _, r := range rows {
				if r.Name == "busy" {
					got = r
				}
			}
			return got != nil && got.Wanted == 2
		})
		return got
	}
	before := row(h)
	time.Sleep(1500 * time.Millisecond) // past scale_down_delay
	addr := h.http.Listener.Addr().String()
	h.close()
	h = newHarnessAt(t, dir, addr)
	stopServiceAtEnd(t, h, "busy")
	time.Sleep(3 * time.Second) // passes enough, all past scale_down_delay
	if n := len(activeReplicas(t, h, "busy")); n != 2 {
		t.Errorf("%d replicas 3 s after a restart, want 2 (a restart is no drop in traffic)", n)
	}
	after := row(h)
	if after.Wanted != 2 || !after.ScaledAt.Equal(before.ScaledAt) {
		t.Errorf("after the restart: wanted %d scaled at %v, want 2 scaled at %v (as before)", after.Wanted, after.ScaledAt, before.ScaledAt)
	}
	h.srv.svc.mu.Lock()
	for _, info := range h.srv.svc.byKey {
		if !info.scaledAt.Equal(before.ScaledAt) {
			t.Errorf("the autoscaler's last scaling after the restart: %v, want %v (stored)", info.scaledAt, before.ScaledAt)
		}
	}
	h.srv.svc.mu.Unlock()
}
