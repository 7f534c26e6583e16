package server

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// A service's rate_limits (issue 16), as dstack's gateway (nginx's
// limit_req with nodelay) applies them: a request is counted by the limit
// whose prefix is the longest that its path (the service's own path, after
// /proxy/services/PROJECT/NAME or on the service's host) starts with; each
// limit counts per key, the client's IP address (the connection's, not a
// forwarded header) or a header's value (requests without the header count
// together, under an empty key). A key may send rps requests a second on
// average and burst more at once; past that the gateway answers 429 Too Many
// Requests with Retry-After, and the request never reaches a replica. The
// count is the generic cell rate algorithm: per key one time, the
// theoretical arrival time of its next request.

// limiterSweep is how many keys a limiter holds before it forgets those
// whose time has passed (they would be allowed anyway).
const limiterSweep = 10_000

type limitKey struct {
	rule int
	key  string
}

// limiter holds a service's rate limits and their keys' times.
type limiter struct {
	mu    sync.Mutex
	rules []spec.RateLimit
	tat   map[limitKey]time.Time
}

func newLimiter(rules []spec.RateLimit) *limiter {
	if len(rules) == 0 {
		return nil
	}
	return &limiter{rules: rules, tat: map[limitKey]time.Time{}}
}

// rule is the index of the limit that counts path (-1: none).
func (l *limiter) rule(path string) int {
	best, bestLen := -1, -1
	for i, rl := range l.rules {
		p := rl.Prefix
		if p == "" {
			p = "/"
		}
		if strings.HasPrefix(path, p) && len(p) > bestLen {
			best, bestLen = i, len(p)
		}
	}
	return best
}

// allow counts a request to path from r at now: false and how long to
// wait when its key is over its limit.
func (l *limiter) allow(path string, r *http.Request, now time.Time) (bool, time.Duration, spec.RateLimit) {
	if l == nil {
		return true, 0, spec.RateLimit{}
	}
	i := l.rule(path)
	if i < 0 {
		return true, 0, spec.RateLimit{}
	}
	rl := l.rules[i]
	k := limitKey{rule: i}
	if rl.Key != nil && rl.Key.Type == "header" {
		k.key = r.Header.Get(rl.Key.Header)
	} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		k.key = host
	} else {
		k.key = r.RemoteAddr
	}
	interval := time.Duration(float64(time.Second) / rl.RPS)
	tolerance := time.Duration(rl.Burst) * interval
	l.mu.Lock()
	defer l.mu.Unlock()
	tat := l.tat[k]
	if tat.Before(now) {
		tat = now
	}
	if wait := tat.Sub(now) - tolerance; wait > 0 {
		return false, wait, rl
	}
	if len(l.tat) >= limiterSweep {
		for key, t := range l.tat {
			if t.Before(now) {
				delete(l.tat, key)
			}
		}
	}
	l.tat[k] = tat.Add(interval)
	return true, 0, rl
}

// tooMany answers a request over its rate limit.
func tooMany(w http.ResponseWriter, label string, rl spec.RateLimit, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	prefix := rl.Prefix
	if prefix == "" {
		prefix = "/"
	}
	http.Error(w, fmt.Sprintf("berth gateway: service %s: rate limit exceeded (%g requests a second, burst %d, under %s); retry in %d s",
		label, rl.RPS, rl.Burst, prefix, max(secs, 1)), http.StatusTooManyRequests)
}

// admitService refuses what a service asks of the gateway that this
// server cannot give: `https: true` without a certificate (berth server
// --gateway-tls-cert/--gateway-tls-key: gateway_tls.go), before anything
// is made.
func (s *Server) admitService(t *spec.Task) error {
	if !t.IsService() {
		return nil
	}
	if t.HTTPS == "true" && !s.gatewayTLS() {
		return fmt.Errorf("%w: https: true: this server serves plain HTTP (it was started without --gateway-tls-cert and --gateway-tls-key); write `https: auto` (the scheme the server is reached by: put a TLS proxy in front of it for HTTPS) or `https: false`, or start the server with a certificate", ErrInvalid)
	}
	return nil
}
