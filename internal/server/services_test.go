package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// webService is a service whose replicas answer "VERSION PORT PATH" over
// HTTP/1.1 (keep-alive) on $PORT, and write their PID to dir/pid-PORT.
func webService(name string, port int, version, dir, extra string) string {
	return fmt.Sprintf(`
type: service
name: %s
port: %d
env: [VERSION=%s]
%s
commands:
  - |
    python3 - <<'EOF'
    import os, http.server
    port = int(os.environ["PORT"])
    open(os.path.join(%q, "pid-%%d" %% port), "w").write(str(os.getpid()))
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def do_GET(self):
            b = ("%%s %%d %%s" %% (os.environ["VERSION"], port, self.path)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)
        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            data = self.rfile.read(n)
            b = ("%%s %%d %%s %%d %%s" %% (os.environ["VERSION"], port, self.path, len(data), self.headers.get("Authorization", "-"))).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)
        def log_message(self, *a):
            pass
    http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
    EOF
`, name, port, version, extra, dir)
}

// applyService submits a service configuration.
func applyService(t *testing.T, h *harness, yaml string) *api.Run {
	t.Helper()
	r, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(t, yaml)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stopServiceAtEnd stops the service before the harness goes, and waits
// for its replicas to end.
func stopServiceAtEnd(t *testing.T, h *harness, name string) {
	t.Cleanup(func() {
		if _, err := h.c.Stop(context.Background(), name, true); err != nil && !errors.Is(err, client.ErrNotFound) {
			t.Logf("stop service %s: %v", name, err)
		}
		waitForLong(t, "the replicas of "+name+" to end", func() bool { return len(activeReplicas(t, h, name)) == 0 })
	})
}

func waitForLong(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// activeReplicas are the active runs named name.
func activeReplicas(t testing.TB, h *harness, name string) []api.Run {
	t.Helper()
	runs, err := h.c.Runs(context.Background(), client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Run
	for _, r := range runs {
		if r.Name == name && !r.Status.Finished() {
			out = append(out, r)
		}
	}
	return out
}

// gatewayGet sends GET path through the gateway with token ("" none).
func gatewayGet(hc *http.Client, base, token, path string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestServiceGateway: a service of two replicas answers through the
// gateway, from both; a request without a project member's token is
// refused; a replica killed from outside is replaced, and requests go on
// succeeding meanwhile.
func TestServiceGateway(t *testing.T) {
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
		code, body, err := gatewayGet(hc, base, testToken, "/hello?x=1")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET through the gateway: %d %q %v", code, body, err)
		}
		f := strings.Fields(body)
		if len(f) != 3 || f[0] != "v1" || f[2] != "/hello?x=1" {
			t.Fatalf("answer %q, want v1 PORT /hello?x=1 (the prefix stripped)", body)
		}
		seen[f[1]] = true
		return len(seen) == 2
	})
	if n := len(activeReplicas(t, h, "web")); n != 2 {
		t.Errorf("%d active replicas, want 2", n)
	}

	for _, tok := range []string{"", "not-a-token"} {
		if code, body, _ := gatewayGet(hc, base, tok, "/"); code != http.StatusUnauthorized {
			t.Errorf("token %q: %d %q, want 401", tok, code, body)
		}
	}
	if code, _, _ := gatewayGet(hc, h.http.URL+"/proxy/services/main/nosuch", testToken, "/"); code != http.StatusNotFound {
		t.Errorf("an unknown service: %d, want 404", code)
	}

	// Kill one replica's server from outside: its run fails, another
	// takes its place.
	before := activeReplicas(t, h, "web")
	pidText, err := os.ReadFile(filepath.Join(dir, "pid-"+strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	replaced := func() bool {
		now := activeReplicas(t, h, "web")
		if len(now) != 2 {
			return false
		}
		for _, r := range now {
			if r.ID != before[0].ID && r.ID != before[1].ID {
				return true
			}
		}
		return false
	}
	waitForLong(t, "the killed replica to be replaced", func() bool {
		if code, body, err := gatewayGet(hc, base, testToken, "/"); err != nil || code != http.StatusOK {
			t.Fatalf("GET while a replica is replaced: %d %q %v", code, body, err)
		}
		return replaced()
	})
}

// TestServiceRollingUpdate: applying a changed service while a client
// sends requests without pause replaces every replica, a new one ready
// before an old one stops, and not one request fails.
func TestServiceRollingUpdate(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 4})
	dir := t.TempDir()
	port := freePort(t)
	applyService(t, h, webService("web", port, "v1", dir, "replicas: 2"))
	stopServiceAtEnd(t, h, "web")
	hc := &http.Client{Timeout: 60 * time.Second}
	base := h.http.URL + "/proxy/services/main/web"
	waitForLong(t, "the service to answer", func() bool {
		code, _, _ := gatewayGet(hc, base, testToken, "/")
		return code == http.StatusOK
	})

	var ok, v2 atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := gatewayGet(hc, base, testToken, "/x")
				if err != nil || code != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %q %v", code, body, err))
					mu.Unlock()
					continue
				}
				ok.Add(1)
				if strings.HasPrefix(body, "v2 ") {
					v2.Add(1)
				}
			}
		}()
	}
	old := activeReplicas(t, h, "web")
	applyService(t, h, webService("web", port, "v2", dir, "replicas: 2"))
	waitForLong(t, "every old replica to end", func() bool {
		for _, r := range activeReplicas(t, h, "web") {
			for _, o := range old {
				if r.ID == o.ID {
					return false
				}
			}
		}
		return true
	})
	// Requests after the update get v2 only.
	mark := v2.Load()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if v2.Load() == mark {
		t.Errorf("no v2 answer after the update")
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during the rolling update; first: %s", len(failures), int(ok.Load())+len(failures), failures[0])
	}
	if n := len(activeReplicas(t, h, "web")); n != 2 {
		t.Errorf("%d replicas after the update, want 2", n)
	}
	t.Logf("%d requests during the rolling update, %d answered by v2", ok.Load(), v2.Load())
	code, body, _ := gatewayGet(hc, base, testToken, "/")
	if code != http.StatusOK || !strings.HasPrefix(body, "v2 ") {
		t.Errorf("after the update: %d %q", code, body)
	}
}

// TestServiceScaleFromZero: a service of replicas 0..1 starts none; the
// first request starts one, waits for it and is answered.
func TestServiceScaleFromZero(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	dir := t.TempDir()
	port := freePort(t)
	applyService(t, h, webService("lazy", port, "v1", dir, "replicas: 0..1\nscaling: {metric: rps, target: 100}\nauth: false"))
	stopServiceAtEnd(t, h, "lazy")
	time.Sleep(2 * serviceTick)
	if n := len(activeReplicas(t, h, "lazy")); n != 0 {
		t.Fatalf("%d replicas before any request, want 0", n)
	}
	hc := &http.Client{Timeout: 90 * time.Second}
	code, body, err := gatewayGet(hc, h.http.URL+"/proxy/services/main/lazy", "", "/first")
	if err != nil || code != http.StatusOK || !strings.HasPrefix(body, "v1 ") {
		t.Fatalf("first request (auth: false, no token): %d %q %v", code, body, err)
	}
	if n := len(activeReplicas(t, h, "lazy")); n != 1 {
		t.Errorf("%d replicas after the first request, want 1", n)
	}
}

// TestServiceRestart: a service outlives a restart of the server: its
// replica goes on (not doubled), the gateway answers again, and a stop
// after the restart ends it.
func TestServiceRestart(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	port := freePort(t)
	applyService(t, h, webService("web", port, "v1", t.TempDir(), ""))
	hc := &http.Client{Timeout: 60 * time.Second}
	answers := func(h *harness) func() bool {
		return func() bool {
			code, body, _ := gatewayGet(hc, h.http.URL+"/proxy/services/main/web", testToken, "/")
			return code == http.StatusOK && strings.HasPrefix(body, "v1 ")
		}
	}
	waitForLong(t, "the service to answer", answers(h))
	before := activeReplicas(t, h, "web")
	addr := h.http.Listener.Addr().String()
	h.close()
	h = newHarnessAt(t, dir, addr)
	stopServiceAtEnd(t, h, "web")
	waitForLong(t, "the service to answer after the restart", answers(h))
	time.Sleep(2 * serviceTick)
	after := activeReplicas(t, h, "web")
	if len(before) != 1 || len(after) != 1 || after[0].ID != before[0].ID {
		t.Errorf("replicas before the restart %v, after %v: want the same one", before, after)
	}
}

// TestServiceModel: a service with a model answers OpenAI-style requests
// at /proxy/models/PROJECT/: the model list names it, a chat completion
// naming it goes to its replica at /v1/chat/completions (the body whole,
// Berth's token removed); an unknown model is 404, no token 401.
func TestServiceModel(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	port := freePort(t)
	applyService(t, h, webService("llm", port, "v1", t.TempDir(), "model: {name: tiny-chat, format: openai}"))
	stopServiceAtEnd(t, h, "llm")
	hc := &http.Client{Timeout: 60 * time.Second}
	base := h.http.URL + "/proxy/models/main"
	post := func(token, model string) (int, string) {
		body := `{"model": "` + model + `", "messages": [{"role": "user", "content": "hi"}]}`
		req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	want := fmt.Sprintf("v1 %d /v1/chat/completions %d -", port, len(`{"model": "tiny-chat", "messages": [{"role": "user", "content": "hi"}]}`))
	waitForLong(t, "the model to answer", func() bool {
		code, body := post(testToken, "tiny-chat")
		if code == http.StatusOK && body != want {
			t.Fatalf("chat completion answered %q, want %q", body, want)
		}
		return code == http.StatusOK
	})
	code, body, _ := gatewayGet(hc, base, testToken, "/models")
	if code != http.StatusOK || !strings.Contains(body, `"id":"tiny-chat"`) {
		t.Errorf("models: %d %s", code, body)
	}
	if code, body := post(testToken, "other"); code != http.StatusNotFound {
		t.Errorf("an unknown model: %d %s, want 404", code, body)
	}
	if code, body := post("", "tiny-chat"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s, want 401", code, body)
	}
}

// TestDesiredReplicas: the autoscaler's count is the request rate over
// the window divided by the target, rounded up, within the range.
func TestDesiredReplicas(t *testing.T) {
	r := spec.Replicas{Min: 0, Max: 4}
	for _, tc := range []struct {
		hits int
		want int
	}{{0, 0}, {1, 1}, {600, 1}, {601, 2}, {1800, 3}, {100000, 4}} {
		if got := desiredReplicas(tc.hits, time.Minute, 10, r); got != tc.want {
			t.Errorf("%d requests a minute at 10 rps a replica: %d replicas, want %d", tc.hits, got, tc.want)
		}
	}
	if got := desiredReplicas(0, time.Minute, 10, spec.Replicas{Min: 2, Max: 4}); got != 2 {
		t.Errorf("no requests with a minimum of 2: %d", got)
	}
	var rt rate
	now := time.Unix(1000, 0)
	for i := 0; i < 90; i++ {
		rt.add(now.Add(time.Duration(i) * time.Second))
	}
	if got := rt.count(now.Add(89 * time.Second)); got != 60 {
		t.Errorf("one request a second for 90 s: %d in the window, want 60", got)
	}
}

// serviceTick is how long a test gives the reconciler to act on what
// woke it.
const serviceTick = time.Second

// TestServiceReconcilerWakes: the reconciler runs on events, not on a
// clock (its safety pass pushed out of the test's reach): a service whose
// replica is ready and gets no request costs no pass but its probe's
// (one each 15 s), and requests that raise the autoscaler's count wake
// it, so it scales up at once.
func TestServiceReconcilerWakes(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.srv.svcInit()
	h.srv.svc.mu.Lock()
	h.srv.svc.safety = time.Hour
	h.srv.svc.mu.Unlock()
	h.srv.wakeServices() // the loop's first wait takes the new safety
	startAgent(t, h, agentOpts{name: "n1", cpus: 4})
	port := freePort(t)
	applyService(t, h, webService("quiet", port, "v1", t.TempDir(), "auth: false\nreplicas: 1..2\nscaling: {metric: rps, target: 0.1, scale_up_delay: 0s, scale_down_delay: 1h}"))
	stopServiceAtEnd(t, h, "quiet")
	hc := &http.Client{Timeout: 90 * time.Second}
	base := h.http.URL + "/proxy/services/main/quiet"
	if code, body, err := gatewayGet(hc, base, "", "/"); err != nil || code != http.StatusOK {
		t.Fatalf("first request: %d %q %v", code, body, err)
	}
	time.Sleep(2 * serviceTick) // what the replica's readiness woke settles
	p0 := h.srv.svc.passes.Load()
	time.Sleep(5 * time.Second)
	if n := h.srv.svc.passes.Load() - p0; n > 2 {
		t.Errorf("%d passes in 5 s of an idle service, want at most 2 (its replica's probe is due each 15 s)", n)
	}
	if n := len(activeReplicas(t, h, "quiet")); n != 1 {
		t.Fatalf("%d replicas before the traffic, want 1", n)
	}
	// 12 requests in the window: 0.2/s for a target of 0.1 wants 2.
	for i := 0; i < 12; i++ {
		if code, body, err := gatewayGet(hc, base, "", "/"); err != nil || code != http.StatusOK {
			t.Fatalf("request %d: %d %q %v", i, code, body, err)
		}
	}
	waitForLong(t, "the requests to scale the service to 2", func() bool { return len(activeReplicas(t, h, "quiet")) == 2 })
}
