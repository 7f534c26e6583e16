package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
)

// The metrics endpoint over the transcripts' server (no HTTP listener, no
// agents, virtual time): the series a scrape reads are what the test made.

// promEnv is a transcript environment whose server has metrics.
func promEnv(t testing.TB, opts MetricsOptions) *transcriptEnv {
	t.Helper()
	e := newTranscriptEnv(t)
	e.stopServer()
	e.st.record = false
	ctx, cancel := context.WithCancel(context.Background())
	m := NewMetrics(opts)
	// The virtual clock is in the past: count every start it makes.
	m.since = time.Time{}
	srv, err := New(ctx, Config{Store: e.st, Clock: e.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StopGrace: 10 * time.Second, Metrics: m})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.committer(ctx) }()
	e.srv, e.stop = srv, func() { cancel(); <-done }
	return e
}

// scrape reads e's metrics as a client on the server's host does.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// series finds the sample of fams' family name with exactly these labels
// (name=value pairs); nil: none.
func series(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		ok := true
		for i := 0; i < len(labels); i += 2 {
			if !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
				ok = false
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

// value is a gauge's or counter's value; NaN when the series is absent.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	m := series(fams, name, labels...)
	switch {
	case m == nil:
		return math.NaN()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return math.NaN()
}

// run does the transcript commands, which must not fail.
func run(t *testing.T, e *transcriptEnv, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if out := e.do(t, c); strings.HasPrefix(out, "error:") {
			t.Fatalf("%s: %s", c, out)
		}
	}
}

// placedOn is the node job k of run name is placed on.
func placedOn(t *testing.T, e *transcriptEnv, name string) string {
	t.Helper()
	e.srv.mu.Lock()
	defer e.srv.unlock()
	_, jobs, ok := e.srv.ActiveRun(e.runs[name])
	if !ok || jobs[0].Node == "" {
		t.Fatalf("run %s is not placed", name)
	}
	return jobs[0].Node
}

func TestPromClusterSeries(t *testing.T) {
	e := promEnv(t, MetricsOptions{Version: "test"})
	h := e.srv.Handler()
	run(t, e, "node n1 cpus=4 mem=16GB gpus=2 fleet=a", "submit r1 cpus=1 gpus=1", "submit r2 cpus=1", "submit r3 cpus=1", "schedule")
	fams := scrape(t, h)
	// One full pass (a node came) over the three runs.
	if m := series(fams, "berth_scheduler_pass_examined_runs", "kind", "full"); m == nil || m.Histogram.GetSampleCount() != 1 || m.Histogram.GetSampleSum() != 3 {
		t.Errorf("examined runs of the first pass: %v", m)
	}
	if m := series(fams, "berth_scheduler_pass_duration_seconds", "kind", "full"); m == nil || m.Histogram.GetSampleCount() != 1 {
		t.Errorf("pass durations: %v", m)
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		run(t, e, "agent "+placedOn(t, e, r)+" started "+r+".0")
	}
	run(t, e, "node n2 cpus=2 fleet=b", "node n3 cpus=2 fleet=b", "away n3", "submit big cpus=4", "submit hold held",
		"schedule", "tick 1m", "agent n1 exited r3.0", "tick 1m")
	if _, err := e.srv.do(control.HealthInput{Node: "n2", Health: api.NodeHealth{Status: api.HealthWarning, Reason: "hot"}}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	fams = scrape(t, h)

	want := map[string]struct {
		labels []string
		value  float64
	}{
		"running":     {[]string{"berth_runs", "status", "running", "project", "main"}, 2},
		"submitted":   {[]string{"berth_runs", "status", "submitted", "project", "main"}, 2},
		"pulling":     {[]string{"berth_runs", "status", "pulling", "project", "main"}, 0},
		"ended":       {[]string{"berth_runs_ended_total", "status", "done"}, 1},
		"resources":   {[]string{"berth_pending_runs", "reason", "Resources", "fleet", ""}, 1},
		"held":        {[]string{"berth_pending_runs", "reason", "JobHeldUser", "fleet", ""}, 1},
		"oldest":      {[]string{"berth_pending_oldest_age_seconds"}, 120},
		"busy":        {[]string{"berth_nodes", "fleet", "a", "state", "busy", "health", "ok"}, 1},
		"warning":     {[]string{"berth_nodes", "fleet", "b", "state", "idle", "health", "warning"}, 1},
		"offline":     {[]string{"berth_nodes", "fleet", "b", "state", "offline", "health", "ok"}, 1},
		"cpus a":      {[]string{"berth_fleet_cpus", "fleet", "a"}, 4},
		"cpus b":      {[]string{"berth_fleet_cpus", "fleet", "b"}, 4},
		"alloc a":     {[]string{"berth_fleet_cpus_allocated", "fleet", "a"}, 2},
		"alloc b":     {[]string{"berth_fleet_cpus_allocated", "fleet", "b"}, 0},
		"memory a":    {[]string{"berth_fleet_memory_bytes", "fleet", "a"}, 16 << 30},
		"gpus":        {[]string{"berth_fleet_gpus", "fleet", "a", "model", "H100"}, 2},
		"gpus alloc":  {[]string{"berth_fleet_gpus_allocated", "fleet", "a", "model", "H100"}, 1},
		"usage":       {[]string{"berth_fairshare_usage_cpu_seconds", "project", "main", "user", "admin"}, 60},
		"build":       {[]string{"berth_build_info", "version", "test"}, 1},
		"node jobs 0": {[]string{"berth_node_jobs_cpus_used", "node", "n2"}, 0},
	}
	for name, w := range want {
		got := value(fams, w.labels[0], w.labels[1:]...)
		if math.Abs(got-w.value) > 1e-3*max(1, w.value) {
			t.Errorf("%s: %s = %v, want %v", name, w.labels, got, w.value)
		}
	}
	// Two runs wait, each submitted two minutes ago (the virtual clock).
	if m := series(fams, "berth_pending_age_seconds"); m == nil || m.Histogram.GetSampleCount() != 2 || m.Histogram.GetSampleSum() != 240 {
		t.Errorf("queue ages: %v", m)
	} else {
		for _, b := range m.Histogram.Bucket {
			if want := uint64(0); b.GetUpperBound() >= 120 {
				if want = 2; b.GetCumulativeCount() != want {
					t.Errorf("queue ages: %d at most %vs, want %d", b.GetCumulativeCount(), b.GetUpperBound(), want)
				}
			} else if b.GetCumulativeCount() != want {
				t.Errorf("queue ages: %d at most %vs, want %d", b.GetCumulativeCount(), b.GetUpperBound(), want)
			}
		}
	}
	// Three runs started (at once on the virtual clock), each once.
	if m := series(fams, "berth_run_start_latency_seconds"); m == nil || m.Histogram.GetSampleCount() != 3 || m.Histogram.GetSampleSum() != 0 {
		t.Errorf("start latencies: %v", m)
	}
	if m := series(fams, "berth_store_commit_duration_seconds"); m == nil || m.Histogram.GetSampleCount() == 0 {
		t.Errorf("commit durations: %v", m)
	}
	if m := series(fams, "berth_store_commit_batches"); m == nil || m.Histogram.GetSampleSum() < float64(m.Histogram.GetSampleCount()) {
		t.Errorf("commit batches: %v", m)
	}
	if v := value(fams, "berth_http_requests_total", "route", "GET /metrics", "code", "200"); v != 1 {
		t.Errorf("the first scrape counted %v times", v)
	}
	for _, f := range []string{"go_goroutines", "process_cpu_seconds_total", "berth_http_request_duration_seconds"} {
		if fams[f] == nil {
			t.Errorf("no %s", f)
		}
	}
	// Bounded cardinality: no run is named in a label without
	// --metrics-per-run.
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "run" || l.GetName() == "run_id" || strings.HasPrefix(l.GetValue(), "r1") {
					t.Errorf("%s names a run: %v", name, m)
				}
			}
		}
	}
}

// The same metrics in OpenMetrics when the scraper asks for them; a route
// that does not exist is counted as unmatched.
func TestPromOpenMetrics(t *testing.T) {
	e := promEnv(t, MetricsOptions{})
	h := e.srv.Handler()
	req := httptest.NewRequest("GET", "/nothing", nil)
	h.ServeHTTP(httptest.NewRecorder(), req)
	req = httptest.NewRequest("GET", "/metrics", nil)
	req.RemoteAddr = "[::1]:40000"
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	body := w.Body.String()
	if ct := w.Header().Get("Content-Type"); w.Code != http.StatusOK || !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("%d %s", w.Code, ct)
	}
	for _, want := range []string{"\n# TYPE berth_http_requests counter\n", "\n# TYPE berth_pending_age_seconds histogram\n",
		"berth_http_requests_total{code=\"404\",route=\"unmatched\"} 1.0\n", "berth_pending_oldest_age_seconds 0.0\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
	if !strings.HasSuffix(body, "# EOF\n") {
		t.Errorf("OpenMetrics without # EOF: ...%s", body[max(0, len(body)-200):])
	}
}

func TestPromAccess(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		opts   MetricsOptions
		remote string
		token  string
		header [2]string
		want   int
	}{
		"loopback":                   {remote: "127.0.0.1:5000", want: 200},
		"loopback v6":                {remote: "[::1]:5000", want: 200},
		"remote":                     {remote: "192.0.2.7:5000", want: 401},
		"remote, scrape token":       {opts: MetricsOptions{Token: "scrape"}, remote: "192.0.2.7:5000", token: "scrape", want: 200},
		"remote, wrong token":        {opts: MetricsOptions{Token: "scrape"}, remote: "192.0.2.7:5000", token: "scrap", want: 401},
		"remote, admin's token":      {remote: "192.0.2.7:5000", token: "admin-token", want: 200},
		"remote, a user's token":     {remote: "192.0.2.7:5000", token: "user-token", want: 403},
		"forwarded by a local proxy": {remote: "127.0.0.1:5000", header: [2]string{"X-Forwarded-For", "192.0.2.7"}, want: 401},
		"public":                     {opts: MetricsOptions{Public: true}, remote: "192.0.2.7:5000", want: 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := promEnv(t, tc.opts)
			if err := e.srv.store.AddToken(ctx, e.admin.ID, HashToken("admin-token"), "admin"); err != nil {
				t.Fatal(err)
			}
			uid, err := e.st.EnsureUser(ctx, "bob", false)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.srv.store.AddToken(ctx, uid, HashToken("user-token"), "bob"); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.RemoteAddr = tc.remote
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.header[0] != "" {
				req.Header.Set(tc.header[0], tc.header[1])
			}
			w := httptest.NewRecorder()
			e.srv.Handler().ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Errorf("%d %s, want %d", w.Code, w.Body, tc.want)
			}
		})
	}
	// A server without metrics has no /metrics.
	e := newTranscriptEnv(t)
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	w := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusNotFound {
		t.Errorf("without metrics: %d", w.Code)
	}
}

// The agents' samples of running jobs: summed per node and per GPU by
// default, per job with --metrics-per-run; a job whose samples stopped
// coming drops out.
func TestPromJobSamples(t *testing.T) {
	tests := map[string]struct{ perRun bool }{"per node": {false}, "per run": {true}}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := promEnv(t, MetricsOptions{PerRun: tc.perRun})
			h := e.srv.Handler()
			run(t, e, "node n1 cpus=4 mem=16GB gpus=2", "submit train cpus=2 gpus=1", "submit idle cpus=1", "schedule",
				"agent n1 started train.0", "agent n1 started idle.0")
			e.srv.mu.Lock()
			_, jobs, _ := e.srv.ActiveRun(e.runs["train"])
			_, idle, _ := e.srv.ActiveRun(e.runs["idle"])
			e.srv.unlock()
			half, quarter := 50.0, 25.0
			e.srv.jm.add([]sample{
				{run: e.runs["train"], s: api.JobSample{JobID: jobs[0].ID, Time: e.clock.Now(), CPUPercent: &half, CPUSeconds: 12, MemoryUsed: 1 << 30,
					MemoryPeak: 2 << 30, MemoryLimit: 4 << 30, GPUs: []api.GPUSample{{Index: 1, UUID: "GPU-bbb", Util: 97, MemoryUsed: 10 << 30, MemoryTotal: 80 << 30}}}},
				{run: e.runs["idle"], s: api.JobSample{JobID: idle[0].ID, Time: e.clock.Now(), CPUPercent: &quarter, MemoryUsed: 1 << 20}},
			}, e.clock.Now())
			fams := scrape(t, h)
			if v := value(fams, "berth_node_jobs_cpus_used", "node", "n1"); v != 1.25 {
				t.Errorf("CPUs busy on n1: %v, want 1.25 (half of 2, a quarter of 1)", v)
			}
			if v := value(fams, "berth_node_jobs_memory_used_bytes", "node", "n1"); v != 1<<30+1<<20 {
				t.Errorf("memory used on n1: %v", v)
			}
			gpu := []string{"Hostname", "n1", "gpu", "1", "UUID", "GPU-bbb", "modelName", "H100"}
			if tc.perRun {
				gpu = append(gpu, "run_id", itoa(e.runs["train"]), "run", "train", "job", "0")
			}
			if v := value(fams, "berth_gpu_utilization_ratio", gpu...); v != 0.97 {
				t.Errorf("GPU utilization %v of %v in %v", v, gpu, fams["berth_gpu_utilization_ratio"])
			}
			if v := value(fams, "berth_gpu_memory_used_bytes", gpu...); v != 10<<30 {
				t.Errorf("GPU memory used %v", v)
			}
			job := []string{"run_id", itoa(e.runs["train"]), "run", "train", "job", "0", "node", "n1", "project", "main", "user", "admin"}
			perJob := map[string]float64{"berth_job_cpu_utilization_ratio": 0.5, "berth_job_cpu_seconds_total": 12, "berth_job_memory_used_bytes": 1 << 30,
				"berth_job_memory_peak_bytes": 2 << 30, "berth_job_memory_limit_bytes": 4 << 30}
			for name, want := range perJob {
				switch got := value(fams, name, job...); {
				case tc.perRun && got != want:
					t.Errorf("%s = %v, want %v", name, got, want)
				case !tc.perRun && fams[name] != nil:
					t.Errorf("%s without --metrics-per-run: %v", name, fams[name])
				}
			}
			// Past a minute without samples, the jobs' figures go.
			run(t, e, "tick 61s")
			fams = scrape(t, h)
			if v := value(fams, "berth_node_jobs_cpus_used", "node", "n1"); v != 0 || fams["berth_gpu_utilization_ratio"] != nil {
				t.Errorf("stale samples: %v CPUs busy, %v", v, fams["berth_gpu_utilization_ratio"])
			}
		})
	}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// Once a project's runs are gone, its series stay at 0 (a query for them
// finds 0, not nothing), and the ends are counted.
func TestPromRunsGone(t *testing.T) {
	e := promEnv(t, MetricsOptions{})
	h := e.srv.Handler()
	run(t, e, "submit lone cpus=1")
	if v := value(scrape(t, h), "berth_runs", "status", "submitted", "project", "main"); v != 1 {
		t.Fatalf("berth_runs{status=submitted} = %v", v)
	}
	run(t, e, "stop lone abort")
	fams := scrape(t, h)
	if v := value(fams, "berth_runs", "status", "submitted", "project", "main"); v != 0 {
		t.Errorf("berth_runs{status=submitted} = %v after the run's end, want 0", v)
	}
	if v := value(fams, "berth_runs_ended_total", "status", "aborted"); v != 1 {
		t.Errorf("berth_runs_ended_total{status=aborted} = %v", v)
	}
	if m := series(fams, "berth_pending_age_seconds"); m == nil || m.Histogram.GetSampleCount() != 0 {
		t.Errorf("queue ages of an empty queue: %v", m)
	}
}

// The counting wrapper flushes and hijacks as the writer it wraps does
// (the agents' streams and logs flush, attach hijacks), and counts them.
func TestPromInstrumentStreams(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /flush", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the wrapped writer is no Flusher")
		}
		w.Write([]byte("a"))
		w.(http.Flusher).Flush()
	})
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		rw.Flush()
	})
	hs := httptest.NewServer(m.instrument(mux))
	defer hs.Close()
	for _, path := range []string{"/flush", "/hijack", "/none"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A hijacked request is counted once its handler returns, which the
	// client cannot see: look until it is, for a while.
	want := map[string]float64{"GET /flush 200": 1, "GET /hijack 101": 1, "unmatched 404": 1}
	counted := func() map[string]float64 {
		fams, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			if f.GetName() != "berth_http_requests_total" {
				continue
			}
			for _, s := range f.Metric {
				var route, code string
				for _, l := range s.Label {
					switch l.GetName() {
					case "route":
						route = l.GetValue()
					case "code":
						code = l.GetValue()
					}
				}
				got[route+" "+code] = s.Counter.GetValue()
			}
		}
		return got
	}
	got := counted()
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); got = counted() {
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests counted (-want +got):\n%s", diff)
	}
}
