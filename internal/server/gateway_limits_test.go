package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// TestLimiter: dstack's example limits: /api/auth/ at 1 request a second
// with no burst, the rest at 4 with bursts of 9; per client address, or
// per header value; the longest prefix counts; time refills.
func TestLimiter(t *testing.T) {
	l := newLimiter([]spec.RateLimit{
		{Prefix: "/api/auth/", RPS: 1},
		{RPS: 4, Burst: 9},
		{Prefix: "/keyed/", RPS: 1, Key: &spec.RateLimitKey{Type: "header", Header: "X-Key"}},
	})
	now := time.Unix(1000, 0)
	req := func(addr, key string) *http.Request {
		r := &http.Request{RemoteAddr: addr, Header: http.Header{}}
		if key != "" {
			r.Header.Set("X-Key", key)
		}
		return r
	}
	a, b := req("10.0.0.1:5000", ""), req("10.0.0.2:6000", "")
	count := func(path string, r *http.Request, at time.Time) (n int, wait time.Duration) {
		for {
			ok, w, _ := l.allow(path, r, at)
			if !ok {
				return n, w
			}
			n++
		}
	}
	if n, wait := count("/api/auth/login", a, now); n != 1 || wait != time.Second {
		t.Errorf("/api/auth/: %d at once, then wait %s; want 1, 1s", n, wait)
	}
	if n, wait := count("/v1/chat", a, now); n != 10 || wait != 250*time.Millisecond {
		t.Errorf("/ at 4 rps burst 9: %d at once, then wait %s; want 10, 250ms", n, wait)
	}
	if n, _ := count("/v1/chat", b, now); n != 10 {
		t.Errorf("another client: %d at once, want its own 10", n)
	}
	if n, _ := count("/v1/chat", a, now.Add(time.Second)); n != 4 {
		t.Errorf("a second later: %d, want 4 more", n)
	}
	// By header: the same address with two keys counts twice; no header
	// is one key of its own.
	for _, k := range []string{"k1", "k2", ""} {
		if n, _ := count("/keyed/x", req("10.0.0.3:1", k), now); n != 1 {
			t.Errorf("key %q: %d, want 1", k, n)
		}
	}
	var none *limiter
	if ok, _, _ := none.allow("/", a, now); !ok {
		t.Errorf("no limits refused a request")
	}
}
