package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// BenchmarkGateway measures a GET answered by a one-replica service
// (python3's ThreadingHTTPServer, HTTP/1.1 keep-alive) directly on the
// replica's port and through the gateway (/proxy/services/…, a tunnel
// through the agent): per-request latency p50 and p99 from one client in
// sequence ("seq"), and requests per second from 8 clients at once
// ("par"). The gateway's overhead is the difference.
//
//	go test -run '^$' -bench BenchmarkGateway -benchtime 2000x ./internal/server
func BenchmarkGateway(b *testing.B) {
	h := newHarness(b, b.TempDir())
	benchAgent(b, h, "n1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := b.TempDir()
	if _, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(b, webService("bench", port, "v1", dir, ""))}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = h.c.Stop(context.Background(), "bench", true)
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			runs, _ := h.c.Runs(context.Background(), client.ListOptions{})
			live := 0
			for _, r := range runs {
				if r.Name == "bench" && !r.Status.Finished() {
					live++
				}
			}
			if live == 0 {
				return
			}
		}
	})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	targets := map[string]string{
		"direct":  fmt.Sprintf("http://127.0.0.1:%d", port),
		"gateway": h.http.URL + "/proxy/services/main/bench",
	}
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _, err := gatewayGet(hc, targets["gateway"], testToken, "/"); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(end) {
			b.Fatal("the service did not answer through the gateway")
		}
	}
	get := func(base string) error {
		code, body, err := gatewayGet(hc, base, testToken, "/b")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d %s", code, body)
		}
		return err
	}
	for _, mode := range []string{"direct", "gateway"} {
		base := targets[mode]
		b.Run(mode+"/seq", func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if err := get(base); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
		b.Run(mode+"/par", func(b *testing.B) {
			var wg sync.WaitGroup
			next := make(chan struct{})
			errs := make(chan error, 8)
			for c := 0; c < 8; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range next {
						if err := get(base); err != nil {
							select {
							case errs <- err:
							default:
							}
						}
					}
				}()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", strings.TrimSpace(string(load)))
	}
}

// benchAgent is startAgent for a benchmark.
func benchAgent(b *testing.B, h *harness, name string) {
	a, err := agent.New(agent.Config{Server: h.http.URL, Token: testToken, Name: name, DataDir: b.TempDir(), CPUs: 4,
		ShimCommand: []string{os.Args[0], "berth-shim"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogTick: 20 * time.Millisecond,
		RunAsAgent: true})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ns, err := h.c.Nodes(context.Background()); err == nil && len(ns) > 0 && ns[0].Status != "offline" {
			return
		}
		if time.Now().After(end) {
			b.Fatal("the agent did not come online")
		}
	}
}
