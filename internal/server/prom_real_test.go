package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
)

// A real Prometheus (Debian's package; make test-deps installs it with
// scripts/test-prometheus.sh) scrapes a real server with a real agent, and
// its HTTP API answers what the test made: three running runs. The server
// listens on a non-loopback address when the host has one, so that the
// scrape token is what lets Prometheus in: a second job without it is
// refused.
func TestPromRealPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (make test-deps installs Debian's package: scripts/test-prometheus.sh)")
	}
	const scrapeToken = "scrape-secret"
	host := "127.0.0.1"
	if ip := nonLoopbackIP(); ip != "" {
		host = ip
	} else {
		t.Log("no non-loopback address here: Prometheus scrapes from loopback, the token is not checked")
	}
	h := newHarnessCfg(t, t.TempDir(), net.JoinHostPort(host, "0"), func(c *Config) {
		c.Metrics = NewMetrics(MetricsOptions{Token: scrapeToken, Version: "test"})
	})
	startAgent(t, h, agentOpts{name: "n1", cpus: 4, mon: agent.Monitoring{MetricsEvery: -1}})
	ctx := context.Background()
	var ids []int64
	for range 3 {
		ids = append(ids, submit(t, h, "type: task\nresources: {cpu: 1}\ncommands: [\"sleep 120\"]\n").ID)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = h.c.Stop(ctx, fmt.Sprint(id), true)
		}
		waitFor(t, "the runs' ends", func() bool {
			for _, id := range ids {
				if r, err := h.c.Run(ctx, fmt.Sprint(id)); err != nil || !r.Status.Finished() {
					return false
				}
			}
			return true
		})
	})
	waitFor(t, "three running runs", func() bool {
		for _, id := range ids {
			if r, err := h.c.Run(ctx, fmt.Sprint(id)); err != nil || r.Status != "running" {
				return false
			}
		}
		return true
	})

	target, _ := url.Parse(h.http.URL)
	prom := startPrometheus(t, bin, target.Host, scrapeToken)
	waitFor(t, `Prometheus to scrape berth_runs{status="running"} = 3`, func() bool {
		return prom.query(t, `sum(berth_runs{status="running"})`) == "3"
	})
	if v := prom.query(t, `up{job="berth"}`); v != "1" {
		t.Errorf(`up{job="berth"} = %q`, v)
	}
	if v := prom.query(t, `berth_fleet_cpus_allocated`); v != "3" {
		t.Errorf("berth_fleet_cpus_allocated = %q, want 3", v)
	}
	if host != "127.0.0.1" {
		waitFor(t, "the scrape without the token to fail", func() bool { return prom.query(t, `up{job="berth-no-token"}`) == "0" })
	}
}

// nonLoopbackIP is an IPv4 address of this host's first interface that
// is up and not loopback ("": none).
func nonLoopbackIP() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// promServer is a Prometheus the test started.
type promServer struct{ url string }

// startPrometheus runs Prometheus until the test ends, on a free port
// (another one if that was taken meanwhile), scraping target every
// second: job berth with the token, berth-no-token without.
func startPrometheus(t *testing.T, bin, target, token string) *promServer {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: berth
    authorization:
      credentials_file: %s
    static_configs:
      - targets: [%q]
  - job_name: berth-no-token
    static_configs:
      - targets: [%q]
`, tokenFile, target, target)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "prometheus.log")
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		log, err := os.Create(logFile)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr, "--log.level=warn")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		p := &promServer{url: "http://" + addr}
		ready := func() bool {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				select {
				case <-exited:
					return false
				case <-time.After(20 * time.Millisecond):
				}
				if resp, err := http.Get(p.url + "/-/ready"); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return true
					}
				}
			}
			stop()
			return false
		}()
		if ready {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					out, _ := os.ReadFile(logFile)
					t.Logf("prometheus's log:\n%s", out)
				}
			})
			return p
		}
		out, _ := os.ReadFile(logFile)
		if attempt == 3 {
			t.Fatalf("prometheus did not start:\n%s", out)
		}
		t.Logf("prometheus on %s exited (the port taken meanwhile?), again:\n%s", addr, out)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// query is the value of an instant query's single sample ("": none, or
// the query failed).
func (p *promServer) query(t *testing.T, q string) string {
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Logf("query %s: %v", q, err)
		return ""
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" || len(r.Data.Result) != 1 {
		return ""
	}
	v, _ := r.Data.Result[0].Value[1].(string)
	return v
}
