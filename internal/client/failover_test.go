package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

// A client given three replicas' URLs passes over one that cannot be
// reached and a follower with no leader (503 with HeaderRetryOther), sends
// the submission's body again to the leader, and keeps to the leader
// afterwards; with no leader anywhere it answers the follower's 503.
func TestFailover(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	var followerHits, leaderHits atomic.Int64
	leading := atomic.Bool{}
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followerHits.Add(1)
		w.Header().Set(HeaderRetryOther, "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"follower: no leader yet: retry"}`))
	}))
	defer follower.Close()
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !leading.Load() {
			follower.Config.Handler.ServeHTTP(w, r)
			return
		}
		leaderHits.Add(1)
		var body strings.Builder
		buf := make([]byte, 512)
		for {
			n, err := r.Body.Read(buf)
			body.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if !strings.Contains(body.String(), `"spec"`) {
			http.Error(w, "no body", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":7,"name":"x"}`))
	}))
	defer leader.Close()
	c := New(strings.Join([]string{dead, follower.URL, leader.URL}, ", "), "tok")
	ctx := context.Background()

	_, err = c.Submit(ctx, api.SubmitRequest{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "no leader") {
		t.Fatalf("submit with no leader: %v; want the follower's 503", err)
	}
	leading.Store(true)
	run, err := c.Submit(ctx, api.SubmitRequest{})
	if err != nil || run.ID != 7 {
		t.Fatalf("submit with a leader: %+v, %v", run, err)
	}
	f0 := followerHits.Load()
	if _, err := c.Submit(ctx, api.SubmitRequest{}); err != nil {
		t.Fatal(err)
	}
	if followerHits.Load() != f0 || leaderHits.Load() != 2 {
		t.Errorf("after the leader answered, the next request went to the follower (%d hits) or not to the leader (%d)", followerHits.Load()-f0, leaderHits.Load())
	}
}
