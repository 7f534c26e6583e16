//go:build linux

package main_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serviceYAML is a service whose replicas answer "VERSION" on $PORT.
func serviceYAML(port int, version string) string {
	return fmt.Sprintf(`
type: service
name: web
port: %d
replicas: 2
env: [VERSION=%s]
commands:
  - |
    python3 - <<'EOF'
    import os, http.server
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        def do_GET(self):
            b = os.environ["VERSION"].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)
        def log_message(self, *a):
            pass
    http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
    EOF
`, port, version)
}

// TestServiceE2E: berth apply of a service prints its gateway URL, which
// answers with a token (401 without); applying a changed configuration
// while clients send requests without pause rolls the replicas over with
// zero failed requests; berth stop ends the service.
func TestServiceE2E(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	s := c.startServer("--agent-name", "svc-node", "--cpus", "4", "--gateway-domain", "example.test")
	c.waitNodes(30*time.Second, "svc-node")
	port := freeTCPPort(t)
	r := c.berth("", "apply", "-y", "-f", c.writeConfig("web.yml", serviceYAML(port, "v1")))
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	m := regexp.MustCompile(`It answers at (http://\S+/proxy/services/main/web/)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("apply printed no gateway URL: %s", r)
	}
	url := m[1]
	t.Cleanup(func() { c.berth("", "stop", "-y", "web") })
	hc := &http.Client{Timeout: 60 * time.Second}
	get := func(token string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, url+"x", nil)
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
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, body, _ := get(s.token); code == http.StatusOK && body == "v1" {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the service did not answer through the gateway")
		}
	}
	// On the gateway's domain (--gateway-domain): apply names the host
	// URLs, and a request with that Host reaches the service.
	for _, u := range []string{"and http://web.example.test/", "and http://web.main.example.test/"} {
		if !strings.Contains(r.stdout, u) {
			t.Errorf("apply does not print %q:\n%s", u, r.stdout)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/x", nil)
	req.Host = "web.main.example.test"
	req.Header.Set("Authorization", "Bearer "+s.token)
	if resp, err := hc.Do(req); err != nil {
		t.Errorf("GET with Host web.main.example.test: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "v1" {
			t.Errorf("GET with Host web.main.example.test: %d %q, want 200 v1", resp.StatusCode, b)
		}
	}
	if code, _, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", code)
	}

	var ok, v2 atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := get(s.token)
				if err != nil || code != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %q %v", code, body, err))
					mu.Unlock()
					continue
				}
				ok.Add(1)
				if body == "v2" {
					v2.Add(1)
				}
			}
		}()
	}
	r = c.berth("", "apply", "-y", "-f", c.writeConfig("web.yml", serviceYAML(port, "v2")))
	if r.code != 0 || !strings.Contains(r.stderr, "rolling update") {
		t.Errorf("apply of the changed service: %s", r)
	}
	// Done when two replicas run, all of them v2: every answer is v2.
	deadline := time.Now().Add(90 * time.Second)
	for {
		active := 0
		for _, run := range c.mustRuns() {
			if run.Name == "web" && !run.Status.Finished() {
				active++
			}
		}
		before := v2.Load()
		if code, body, _ := get(s.token); active == 2 && code == http.StatusOK && body == "v2" && before > 0 {
			all := true
			for i := 0; i < 10; i++ {
				if _, body, _ := get(s.token); body != "v2" {
					all = false
				}
			}
			if all {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rolling update did not end: %d active replicas", active)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d requests during the rolling update, %d answered by v2", ok.Load(), v2.Load())
	if len(failures) > 0 {
		t.Errorf("%d requests failed during the rolling update; first: %s", len(failures), failures[0])
	}

	if r := c.berth("", "stop", "-y", "web"); r.code != 0 {
		t.Fatalf("stop: %s", r)
	}
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, _, _ := get(s.token)
		active := 0
		for _, run := range c.mustRuns() {
			if run.Name == "web" && !run.Status.Finished() {
				active++
			}
		}
		if code == http.StatusNotFound && active == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("after berth stop: gateway %d, %d active replicas", code, active)
		}
	}
}
