package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// The gateway (issue 16): /proxy/services/PROJECT/NAME/... goes to one of
// the service's ready replicas, over a tunnel to the replica's port
// (tunnel.go), pooled by an http.Transport as any upstream connection
// would be. A replica is picked by fewest requests in flight, round robin
// among equals. A request that got no answer from its replica (the tunnel
// did not open: stopped, gone, port closed; or the connection closed
// before a response: its process died) is sent to another when it is
// idempotent (GET, HEAD, OPTIONS, PUT, DELETE) and its body is small
// enough to be kept (retryBody); a replica being drained gets no new
// request and is stopped when its last one ends (services.go).

const (
	// gatewayWait bounds how long a request waits for a ready replica
	// (scale-from-zero, a service still starting).
	gatewayWait = 2 * time.Minute
	// retryBody is the largest request body kept for a retry.
	retryBody = 64 << 10
	// gatewayTries is how many replicas a request tries.
	gatewayTries = 3
)

// dialError is a tunnel that did not open: the request never left.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// tunnelConn is a tunnel as a net.Conn, reading through the tunnel's
// buffered reader.
type tunnelConn struct {
	net.Conn
	rd io.Reader
}

func (c *tunnelConn) Read(p []byte) (int, error) { return c.rd.Read(p) }

// gatewayTransport is the gateway's connection pool: host "rRUN:PORT".
func (s *Server) gatewayTransport() *http.Transport {
	s.gwOnce.Do(func() {
		s.gwTransport = &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				host, p, _ := net.SplitHostPort(addr)
				run, err1 := strconv.ParseInt(strings.TrimPrefix(host, "r"), 10, 64)
				port, err2 := strconv.Atoi(p)
				if err1 != nil || err2 != nil {
					return nil, &dialError{fmt.Errorf("gateway: bad upstream %q", addr)}
				}
				t, err := s.openTunnel(ctx, run, 0, port)
				if err != nil {
					return nil, &dialError{err}
				}
				return &tunnelConn{Conn: t.conn, rd: t.rd}, nil
			},
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}
	})
	return s.gwTransport
}

// svcCtxKey carries the request's service to the round tripper.
type svcCtxKey struct{}

// gwRequest is what the round tripper needs of a request.
type gwRequest struct {
	info *svcInfo
	body []byte // kept for a retry (nil: none kept)
	kept bool
}

// handleGateway serves /proxy/services/{project}/{name}/...
func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request) {
	project, name := r.PathValue("project"), r.PathValue("name")
	s.serveService(w, r, project, name, "/proxy/services/"+project+"/"+name)
}

// serveService passes r to service name of project; prefix is the path
// the gateway answers it under ("" on the service's own host:
// gateway_domain.go).
func (s *Server) serveService(w http.ResponseWriter, r *http.Request, project, name, prefix string) {
	info, err := s.gatewayService(r, project, name)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.toHTTPS(w, r, info) { // gateway_tls.go
		return
	}
	s.svc.mu.Lock()
	strip := info.task.StripsPrefix()
	limits := info.limits
	s.svc.mu.Unlock()
	rel := "/" + strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
	if ok, wait, rl := limits.allow(rel, r, time.Now()); !ok { // gateway_limits.go
		tooMany(w, project+"/"+name, rl, wait)
		return
	}
	path := func(in string) string {
		if !strip || prefix == "" {
			return in
		}
		return "/" + strings.TrimPrefix(strings.TrimPrefix(in, prefix), "/")
	}
	s.proxyService(w, r, info, project+"/"+name, prefix, path, nil, false)
}

// proxyService passes r to a replica of info at the path path(r's),
// with body as its body where read is set (else r's own).
func (s *Server) proxyService(w http.ResponseWriter, r *http.Request, info *svcInfo, label, prefix string, path func(string) string, body []byte, read bool) {
	gr := &gwRequest{info: info}
	if read {
		gr.body, gr.kept = body, len(body) <= retryBody && idempotent(r.Method)
		if !gr.kept {
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
	} else if idempotent(r.Method) && (r.Body == nil || r.Body == http.NoBody || (r.ContentLength >= 0 && r.ContentLength <= retryBody)) {
		if r.Body != nil && r.Body != http.NoBody {
			b, err := io.ReadAll(io.LimitReader(r.Body, retryBody+1))
			if err != nil {
				writeError(w, fmt.Errorf("%w: reading the request: %v", ErrInvalid, err))
				return
			}
			gr.body = b
		}
		gr.kept = len(gr.body) <= retryBody
	}
	s.svc.mu.Lock()
	s.gatewayHitLocked(info, time.Now()) // services_wake.go
	auth := info.task.AuthRequired()
	s.svc.mu.Unlock()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "replica"
			pr.Out.URL.Path, pr.Out.URL.RawPath = path(pr.In.URL.Path), ""
			pr.SetXForwarded()
			if prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
			}
			pr.Out.Host = pr.In.Host
			if auth {
				pr.Out.Header.Del("Authorization") // Berth's token, not the service's
			}
		},
		Transport:     s.gatewayRoundTripper(),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			status := http.StatusBadGateway
			if errors.Is(err, ErrUnavailable) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, fmt.Sprintf("berth gateway: service %s: %v", label, err), status)
		},
	}
	r = r.WithContext(context.WithValue(r.Context(), svcCtxKey{}, gr))
	rp.ServeHTTP(w, r)
}

// gatewayService finds the service and checks the caller's token where
// the service asks for one.
func (s *Server) gatewayService(r *http.Request, project, name string) (*svcInfo, error) {
	notFound := fmt.Errorf("%w: service %s/%s not found", ErrNotFound, project, name)
	p, err := s.store.ProjectByName(r.Context(), project)
	if err != nil {
		return nil, notFound
	}
	s.svcInit()
	s.svc.mu.Lock()
	info := s.svc.byKey[svcKey{p.ID, name}]
	auth := info != nil && info.task != nil && info.task.AuthRequired()
	ok := info != nil && info.row != nil
	s.svc.mu.Unlock()
	if !ok {
		return nil, notFound
	}
	if auth {
		pr, err := s.authenticate(r)
		if err == nil {
			err = pr.userOnly()
		}
		if err != nil {
			return nil, err
		}
		if !s.mayRead(pr.user, p.ID) {
			return nil, notFound
		}
	}
	return info, nil
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

type gatewayRT struct{ s *Server }

func (s *Server) gatewayRoundTripper() http.RoundTripper { return gatewayRT{s} }

func (g gatewayRT) RoundTrip(req *http.Request) (*http.Response, error) {
	s := g.s
	gr, _ := req.Context().Value(svcCtxKey{}).(*gwRequest)
	if gr == nil {
		return nil, errors.New("gateway: no service")
	}
	var last error
	for try := 0; try < gatewayTries; try++ {
		rep, err := s.pickReplica(req.Context(), gr.info)
		if err != nil {
			return nil, err
		}
		out := req.Clone(req.Context())
		out.URL.Host = fmt.Sprintf("r%d:%d", rep.run, rep.port)
		if gr.kept {
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(gr.body)), int64(len(gr.body))
			if len(gr.body) == 0 {
				out.Body = http.NoBody
			}
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gr.body)), nil }
		}
		resp, err := s.gatewayTransport().RoundTrip(out)
		if err == nil {
			resp.Body = &releaseBody{ReadCloser: resp.Body, done: func() { s.releaseReplica(rep) }}
			return resp, nil
		}
		s.releaseReplica(rep)
		last = err
		if !gr.kept || req.Context().Err() != nil {
			return nil, err
		}
		// No answer from it (the tunnel did not open, or the connection
		// closed before a response: its process died): an idempotent
		// request goes to another, and this replica is not ready until a
		// probe says so again.
		s.svc.mu.Lock()
		rep.ready, rep.okRow = false, 0
		s.svc.mu.Unlock()
		s.wakeServices() // a pass probes it again soon
	}
	return nil, last
}

// releaseBody releases its replica once, when the body is closed.
type releaseBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// pickReplica takes a ready replica of info (fewest in flight, round
// robin among equals), waiting up to gatewayWait for one; a service
// scaled to zero is started.
func (s *Server) pickReplica(ctx context.Context, info *svcInfo) (*replica, error) {
	timer := time.NewTimer(gatewayWait)
	defer timer.Stop()
	for {
		s.svc.mu.Lock()
		var best *replica
		n := len(info.replica)
		for i := 0; i < n; i++ {
			rep := info.replica[(info.rr+i)%n]
			if rep.ready && !rep.draining && (best == nil || rep.inflight < best.inflight) {
				best = rep
			}
		}
		if best != nil {
			info.rr++
			best.inflight++
			s.svc.mu.Unlock()
			return best, nil
		}
		wake := false
		if info.row != nil && info.row.Wanted == 0 && info.task.ReplicaRange().Max > 0 {
			info.row.Wanted = 1
			info.scaledAt = time.Now()
			info.saveScale = true // written by the pass this wakes
			wake = true
		}
		gone := info.row == nil
		ready := s.svc.ready
		s.svc.mu.Unlock()
		if gone {
			return nil, fmt.Errorf("%w: the service was stopped", ErrUnavailable)
		}
		if wake {
			s.log.Info("service scaled from zero", "service", info.key.name)
			s.wakeServices()
		}
		select {
		case <-ready:
		case <-timer.C:
			return nil, fmt.Errorf("%w: no replica became ready in %s", ErrUnavailable, gatewayWait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *Server) releaseReplica(rep *replica) {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	rep.inflight--
	if rep.draining && rep.inflight == 0 && rep.idle != nil {
		select {
		case <-rep.idle:
		default:
			close(rep.idle)
		}
	}
}

// probeReplicas starts the probes that are due.
func (s *Server) probeReplicas() {
	now := time.Now()
	type due struct {
		rep   *replica
		probe *spec.Probe
	}
	var todo []due
	s.svc.mu.Lock()
	for _, info := range s.svc.byKey {
		if info.task == nil {
			continue
		}
		var pr *spec.Probe
		interval := noProbeInterval
		if len(info.task.Probes) > 0 {
			pr = &info.task.Probes[0]
			interval = spec.DefaultProbeInterval.Std()
			if pr.Interval != nil {
				interval = pr.Interval.Std()
			}
		}
		for _, rep := range info.replica {
			every := interval
			if pr == nil && rep.ready {
				// Ready without a probe: its port is checked as often as
				// a probe would be (a request that cannot reach it takes
				// it out at once).
				every = spec.DefaultProbeInterval.Std()
			}
			rep.every = every
			switch {
			case rep.probing || rep.draining:
				// Its probe, when done, sets its next.
			case now.Sub(rep.probedAt) >= every:
				rep.probing = true
				todo = append(todo, due{rep, pr})
			default:
				s.wakeAtLocked(rep.probedAt.Add(every))
			}
		}
	}
	s.svc.mu.Unlock()
	for _, d := range todo {
		go s.probe(d.rep, d.probe)
	}
}

// probe checks one replica: its probe answers 2xx, or without one, its
// port takes a connection.
func (s *Server) probe(rep *replica, pr *spec.Probe) {
	timeout, after := spec.DefaultProbeTimeout.Std(), 1
	if pr != nil {
		if pr.Timeout != nil {
			timeout = pr.Timeout.Std()
		}
		after = max(pr.ReadyAfter, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ok := false
	if pr == nil {
		if t, err := s.openTunnel(ctx, rep.run, 0, rep.port); err == nil {
			t.conn.Close()
			ok = true
		}
	} else {
		method := strings.ToUpper(pr.Method)
		if method == "" {
			method = http.MethodGet
		}
		url := fmt.Sprintf("http://r%d:%d%s", rep.run, rep.port, pr.URL)
		if pr.URL == "" {
			url += "/"
		}
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err == nil {
			resp, err := s.gatewayTransport().RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				ok = resp.StatusCode >= 200 && resp.StatusCode < 300
			}
		}
	}
	s.svc.mu.Lock()
	rep.probing, rep.probedAt = false, time.Now()
	became, lost := false, false
	if ok {
		rep.okRow++
		if !rep.ready && rep.okRow >= after {
			rep.ready, became = true, true
		}
	} else {
		lost = rep.ready
		rep.okRow, rep.ready = 0, false
	}
	if !rep.draining && s.svc.reps[rep.run] == rep {
		s.wakeAtLocked(rep.probedAt.Add(rep.every)) // its next probe
	}
	if became {
		close(s.svc.ready)
		s.svc.ready = make(chan struct{})
		if info := s.svc.byKey[rep.key]; info != nil {
			if info.fails != 0 || !info.notBefore.IsZero() {
				info.fails, info.notBefore = 0, time.Time{} // a crash loop is over
				info.saveBackoff = true
			}
		}
	}
	s.svc.mu.Unlock()
	if became {
		s.log.Info("service replica ready", "service", rep.key.name, "run_id", rep.run)
	}
	if became || lost {
		s.wakeServices()
	}
}
