package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// TestParseGatewayDomain: [SCHEME://]DOMAIN[:PORT], lower-cased; junk is
// refused with the flag's name.
func TestParseGatewayDomain(t *testing.T) {
	for in, want := range map[string]gatewayDomain{
		"example.test":               {"http", "example.test", ""},
		"HTTPS://Example.Test:8443/": {"https", "example.test", "8443"},
		"svc.example.test.":          {"http", "svc.example.test", ""},
	} {
		got, err := parseGatewayDomain(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"ftp://example.test", "exa mple.test", "example..test", "*.example.test"} {
		if err := ParseGatewayDomain(in); err == nil || !strings.Contains(err.Error(), "--gateway-domain") {
			t.Errorf("%q: %v, want an error naming --gateway-domain", in, err)
		}
	}
}

// hostGet sends GET path to the server at base with the Host header host.
func hostGet(hc *http.Client, base, host, path string) (*http.Response, string, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return nil, "", err
	}
	req.Host = host
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// TestServiceGatewayDomain: with a gateway domain, a service answers on
// NAME.DOMAIN (the default project) and NAME.PROJECT.DOMAIN, its path as
// sent, and its apply names those URLs; other hosts under the domain are
// 404, the server's own API answers on any other host. Its rate_limits
// hold on both routes: past rps and burst a client gets 429 with
// Retry-After, other paths are not counted. `https: true` is refused
// before anything is made.
func TestServiceGatewayDomain(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.GatewayDomain = "example.test" })
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	port := freePort(t)
	limits := "auth: false\nrate_limits:\n  - prefix: /limited/\n    rps: 0.1\n    burst: 1"
	run := applyService(t, h, webService("web", port, "v1", t.TempDir(), limits))
	stopServiceAtEnd(t, h, "web")
	if want := []string{"http://web.example.test/", "http://web.main.example.test/"}; !slices.Equal(run.URLs, want) {
		t.Errorf("apply answered URLs %q, want %q", run.URLs, want)
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	base := h.http.URL
	_, hostPort, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	waitForLong(t, "the service to answer on its host", func() bool {
		resp, body, err := hostGet(hc, base, "web.example.test", "/hello?x=1")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK && body != fmt.Sprintf("v1 %d /hello?x=1", port) {
			t.Fatalf("web.example.test/hello?x=1 answered %q", body)
		}
		return resp.StatusCode == http.StatusOK
	})
	for host, want := range map[string]int{
		"WEB.main.example.test:" + hostPort: http.StatusOK, // any case, with a port
		"nosuch.example.test":               http.StatusNotFound,
		"web.other.example.test":            http.StatusNotFound, // no such project
		"a.web.main.example.test":           http.StatusNotFound,
	} {
		if resp, body, err := hostGet(hc, base, host, "/x"); err != nil || resp.StatusCode != want {
			t.Errorf("Host %s: %v %q %v, want %d", host, resp.StatusCode, body, err, want)
		}
	}
	// The server's API on the domain itself and on another name.
	for _, host := range []string{"example.test", "berth.internal"} {
		if resp, body, err := hostGet(hc, base, host, "/healthz"); err != nil || resp.StatusCode != http.StatusOK || body != "ok\n" {
			t.Errorf("Host %s /healthz: %v %q %v", host, resp.StatusCode, body, err)
		}
	}

	// rate_limits: /limited/ takes 2 at once (burst 1) from a client, on
	// either route, then 429 with Retry-After; / is not limited.
	codes := []int{}
	for i := 0; i < 3; i++ {
		path, host := "/limited/a", "web.example.test"
		if i == 1 {
			path, host = "/proxy/services/main/web/limited/b", hostPort
		}
		resp, body, err := hostGet(hc, base, host, path)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 20 {
				t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
			}
			if !strings.Contains(body, "rate limit") {
				t.Errorf("429 body %q", body)
			}
		}
	}
	if !slices.Equal(codes, []int{200, 200, 429}) {
		t.Errorf("three requests to /limited/ at once: %v, want [200 200 429]", codes)
	}
	for i := 0; i < 5; i++ {
		if resp, _, err := hostGet(hc, base, "web.example.test", "/free"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("an unlimited path: %v %v", resp.StatusCode, err)
		}
	}

	_, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(t, "type: service\nname: tls\nport: 8000\nhttps: true\ncommands: [\"true\"]\n")})
	if err == nil || !strings.Contains(err.Error(), "https: true") {
		t.Errorf("https: true: %v, want a refusal naming it", err)
	}
	if n := len(activeReplicas(t, h, "tls")); n != 0 {
		t.Errorf("the refused service has %d replicas", n)
	}
}
