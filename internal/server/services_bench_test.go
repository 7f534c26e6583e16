package server

import (
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// BenchmarkIdleService measures what an idle service costs the server:
// the process's CPU time (server and its in-process agent: the probes'
// tunnels are both's work) per second of wall time, while a service of
// two ready replicas gets no request and 500 held runs wait beside it
// (a reconciler that reads every active run pays for them); base-cpu-ms/s
// is the same before the service is applied, passes/s the reconciler's
// passes meanwhile. Each iteration is one second of each.
//
//	go test -run '^$' -bench BenchmarkIdleService -benchtime 20x ./internal/server
func BenchmarkIdleService(b *testing.B) {
	h := newHarness(b, b.TempDir())
	benchAgent(b, h, "n1")
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(b, "type: task\ncommands: [\"true\"]\n"), Hold: true}); err != nil {
			b.Fatal(err)
		}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	idle := func() float64 {
		start, c0 := time.Now(), cpu()
		for i := 0; i < b.N; i++ {
			time.Sleep(time.Second)
		}
		return float64((cpu() - c0).Milliseconds()) / time.Since(start).Seconds()
	}
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	base := idle()
	b.StopTimer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(b, webService("idle", port, "v1", b.TempDir(), "replicas: 2"))}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = h.c.Stop(ctx, "idle", true)
		waitForLong(b, "the replicas to end", func() bool { return len(activeReplicas(b, h, "idle")) == 0 })
	})
	hc := &http.Client{Timeout: 60 * time.Second}
	seen := map[string]bool{}
	waitForLong(b, "both replicas to answer", func() bool {
		if code, body, err := gatewayGet(hc, h.http.URL+"/proxy/services/main/idle", testToken, "/"); err == nil && code == http.StatusOK {
			seen[body] = true
		}
		return len(seen) == 2
	})
	time.Sleep(2 * time.Second) // the last request's work settles
	b.StartTimer()
	p0, t0 := h.srv.svc.passes.Load(), time.Now()
	b.ReportMetric(idle(), "cpu-ms/s")
	b.ReportMetric(float64(h.srv.svc.passes.Load()-p0)/time.Since(t0).Seconds(), "passes/s")
	b.ReportMetric(base, "base-cpu-ms/s")
}
