package server

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/store"
)

// Prometheus metrics (GET /metrics, docs/metrics.md). Two kinds:
//
//   - Events are counted as they happen, by the server's own loops: a
//     scheduling pass (scheduleOnce), a store transaction (committer), an
//     HTTP request (instrument). Each costs a histogram observation.
//   - The cluster's state (runs, queue, nodes, resources, usage, the
//     agents' samples) is read at each scrape by a collector
//     (prom_collect.go): one walk under the server's lock that copies
//     numbers (control.Figures), then the series are made and encoded
//     without it. Nothing is kept up to date between scrapes.
//
// Durations are measured on the wall clock (time.Now), not the server's
// Clock: they are how long the computer took, which virtual time does not
// tell.

// MetricsOptions are what berth server's --metrics-* flags set.
type MetricsOptions struct {
	// PerRun adds the per-job series of the agents' samples, labelled
	// with their run's ID and name (--metrics-per-run). Off, samples are
	// summed per node: a series per run would grow without bound as runs
	// come and go.
	PerRun bool
	// Token is a bearer token that may scrape besides the admins' tokens
	// (--metrics-token; "": only those).
	Token string
	// Public lets any client scrape (--metrics-public). Otherwise a
	// client on the server's host (loopback, not forwarded by a proxy)
	// or one with the token or an admin's may.
	Public bool
	// Version is the build's version (berth_build_info).
	Version string
}

// Metrics are a server's Prometheus metrics: its registry and the
// instruments its loops observe. One serves one server (Config.Metrics);
// a nil *Metrics observes nothing, and the server has no /metrics.
type Metrics struct {
	opts  MetricsOptions
	reg   *prometheus.Registry
	since time.Time // runs that started before are not observed (a restart)

	bindOnce sync.Once
	bound    *Server

	passSeconds   *prometheus.HistogramVec
	passExamined  *prometheus.HistogramVec
	commitSeconds prometheus.Histogram
	commitBatches prometheus.Histogram
	storeWritable prometheus.Gauge
	startLatency  prometheus.Histogram
	ended         *prometheus.CounterVec
	httpRequests  *prometheus.CounterVec
	httpSeconds   *prometheus.HistogramVec

	// started are the runs whose start was observed (or that started
	// before this process), until they end: a run's record is written
	// many times once it started, its start is counted once. Only the
	// committer reads and writes it.
	started map[int64]bool
}

// waitBuckets bound the submit-to-start latencies and the ages of the
// waiting runs: a second to a week.
var waitBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200, 604800}

// NewMetrics makes the metrics a server records and serves, with the Go
// runtime's and the process's.
func NewMetrics(opts MetricsOptions) *Metrics {
	m := &Metrics{opts: opts, reg: prometheus.NewRegistry(), since: time.Now(), started: map[int64]bool{}}
	m.passSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_scheduler_pass_duration_seconds",
		Help:    "Scheduling passes by kind (full: every waiting run; incremental: those new or changed since the last pass): from taking the state to applying the plan.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"kind"})
	m.passExamined = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_scheduler_pass_examined_runs",
		Help:    "Waiting runs a scheduling pass considered (its candidates, at most --sched-depth), by kind of pass.",
		Buckets: prometheus.ExponentialBuckets(1, 10, 7)}, []string{"kind"})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "berth_store_commit_duration_seconds",
		Help: "Store transactions: the time to write one (group commit).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	m.commitBatches = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "berth_store_commit_batches",
		Help: "Changes (queued batches) a store transaction carried.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	m.startLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "berth_run_start_latency_seconds",
		Help: "Runs that started since the server did: from submission to the first job's start.", Buckets: waitBuckets})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_runs_ended_total",
		Help: "Runs that ended since the server started, by final status (done, failed, terminated, aborted); an array counts as its tasks."}, []string{"status"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_http_requests_total",
		Help: "HTTP requests answered, by route (the API's pattern, e.g. \"GET /api/v1/runs/{ref}\"; unmatched: none) and status code."}, []string{"route", "code"})
	m.httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_http_request_duration_seconds",
		Help:    "HTTP requests by route: the time to answer (streams: their whole life).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"route"})
	m.storeWritable = prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_store_writable",
		Help: "1 while the store takes writes; 0 while it is full or read-only (changes are refused with 503 until it takes them again)."})
	m.storeWritable.Set(1)
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_build_info", Help: "The server's build: always 1.",
		ConstLabels: prometheus.Labels{"version": opts.Version}})
	build.Set(1)
	m.reg.MustRegister(m.passSeconds, m.passExamined, m.commitSeconds, m.commitBatches, m.storeWritable, m.startLatency, m.ended,
		m.httpRequests, m.httpSeconds, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// bind makes m collect s's state at each scrape.
func (m *Metrics) bind(s *Server) {
	m.bindOnce.Do(func() {
		m.bound = s
		m.reg.MustRegister(newClusterCollector(s, m.opts.PerRun))
	})
	if m.bound != s {
		panic("server: one Metrics serves one server")
	}
}

// passed records a scheduling pass that took d.
func (m *Metrics) passed(p *control.Pass, d time.Duration) {
	if m == nil {
		return
	}
	kind := "incremental"
	if p.Full() {
		kind = "full"
	}
	m.passSeconds.WithLabelValues(kind).Observe(d.Seconds())
	m.passExamined.WithLabelValues(kind).Observe(float64(p.Examined()))
}

// committed records a store transaction of b, merged from n queued
// batches, that took d; and the runs its records show started or ended.
// Only the committer calls it.
// storeFull records whether the store is out of room (or read-only).
func (m *Metrics) storeFull(full bool) {
	if m == nil {
		return
	}
	if full {
		m.storeWritable.Set(0)
	} else {
		m.storeWritable.Set(1)
	}
}

func (m *Metrics) committed(b *store.Batch, n int, d time.Duration) {
	if m == nil || b.Empty() {
		return
	}
	m.commitSeconds.Observe(d.Seconds())
	m.commitBatches.Observe(float64(n))
	for _, r := range b.Runs {
		final := lifecycle.Status(r.Status).Finished()
		if !r.StartedAt.IsZero() && !m.started[r.ID] {
			// First seen started: an array's own record is not a run of
			// its own, and a run that started before this process did was
			// counted by the one before.
			if !r.StartedAt.Before(m.since) && !control.IsArrayRun(r) {
				m.startLatency.Observe(max(r.StartedAt.Sub(r.SubmittedAt).Seconds(), 0))
			}
			m.started[r.ID] = true
		}
		if final {
			if !control.IsArrayRun(r) {
				m.ended.WithLabelValues(r.Status).Inc()
			}
			delete(m.started, r.ID)
		}
	}
	for _, c := range b.Schedules {
		// A schedule is a record, not a run row, but counts as a run
		// that ended when it is stopped, as before it had a record.
		if lifecycle.Status(c.Status).Finished() {
			m.ended.WithLabelValues(c.Status).Inc()
		}
	}
}

// metricsHandler serves the metrics to the clients that may scrape, in
// the Prometheus text format or OpenMetrics as the client asks.
func (s *Server) metricsHandler() http.Handler {
	m := s.cfg.Metrics
	if m == nil {
		return http.NotFoundHandler()
	}
	m.bind(s)
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError,
		ErrorLog: promLog{s}, MaxRequestsInFlight: 4})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.mayScrape(r); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// promLog is promhttp's error log.
type promLog struct{ s *Server }

func (l promLog) Println(v ...any) { l.s.log.Error("metrics", "err", fmt.Sprint(v...)) }

// mayScrape says whether r may read the metrics: anyone when they are
// public, else a client on this host, the scrape token or an admin's.
func (s *Server) mayScrape(r *http.Request) error {
	o := s.cfg.Metrics.opts
	if o.Public || fromLoopback(r) {
		return nil
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return fmt.Errorf("%w: metrics: scrape from the server's host, or with a bearer token (--metrics-token, or an admin's)", ErrUnauthorized)
	}
	if o.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(o.Token)) == 1 {
		return nil
	}
	u, err := s.user(r.Context(), token)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: unknown token", ErrUnauthorized)
	case err != nil:
		return err
	case !u.Admin:
		return fmt.Errorf("%w: metrics: only the scrape token (--metrics-token) or an admin's may scrape", ErrForbidden)
	}
	return nil
}

// fromLoopback says whether r comes from this host itself: a loopback
// address, and no proxy's header saying it forwards someone else's.
func fromLoopback(r *http.Request) bool {
	if r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// instrument counts next's requests by route and status code.
func (m *Metrics) instrument(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		// The mux set the pattern it chose on r (none: 404, 405).
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		m.httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		m.httpSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusWriter notes the status code a handler answers. It flushes and
// hijacks as the writer it wraps does (the agents' streams, logs that
// follow, attach), and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.code == 0 {
		w.code = http.StatusSwitchingProtocols // attach answers 101 on the connection
	}
	return c, rw, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
