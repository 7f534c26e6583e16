package client

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// Several servers (issue 19): a client, an agent, may be given the URLs of
// all the replicas, comma-separated ("http://a:3000,http://b:3000", in
// --server, BERTH_URL or the configuration file). Requests go to the one
// that answered last; one that cannot be reached, or a follower that
// cannot reach its leader (it says so with HeaderRetryOther), is passed
// over for the next, the request sent again there. Only requests that
// never reached a server are sent again, so none is done twice.

// HeaderRetryOther, on a 503, says that the request reached no leader and
// may be sent to another replica.
const HeaderRetryOther = "X-Berth-Retry-Other"

// SplitURLs returns the URLs of a comma-separated list, trimmed, without
// trailing slashes, the empty ones left out.
func SplitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Failover is a RoundTripper over rt that sends each request to the
// current one of urls (its scheme and host; the request's path is kept),
// moving on to the next as said above. With fewer than two URLs it is rt.
func Failover(urls []string, rt http.RoundTripper) http.RoundTripper {
	if len(urls) < 2 {
		return rt
	}
	f := &failover{rt: rt}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			continue
		}
		f.hosts = append(f.hosts, u)
	}
	if len(f.hosts) < 2 {
		return rt
	}
	return f
}

type failover struct {
	rt    http.RoundTripper
	hosts []*url.URL
	cur   atomic.Int32
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	n := int32(len(f.hosts))
	start := f.cur.Load()
	var lastErr error
	// held is the last follower's 503: the answer when no replica leads.
	var held *http.Response
	for i := int32(0); i < n; i++ {
		k := (start + i) % n
		r := req.Clone(req.Context())
		r.URL.Scheme, r.URL.Host, r.Host = f.hosts[k].Scheme, f.hosts[k].Host, ""
		if i > 0 && req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				break // a body that cannot be sent again
			}
			b, err := req.GetBody()
			if err != nil {
				break
			}
			r.Body = b
		}
		resp, err := f.rt.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(HeaderRetryOther) != "" {
			if held != nil {
				held.Body.Close()
			}
			held = resp
			continue
		}
		if err == nil {
			if held != nil {
				held.Body.Close()
			}
			f.cur.Store(k)
			return resp, nil
		}
		if !unreached(err) || req.Context().Err() != nil {
			if held != nil {
				held.Body.Close()
			}
			return nil, err
		}
		lastErr = err
	}
	if held != nil {
		return held, nil
	}
	return nil, lastErr
}

// unreached tells whether err means the request never reached a server:
// the connection could not be made.
func unreached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
