package server

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkPromScrape is a scrape of GET /metrics with 100,000 waiting
// runs (BenchmarkPendingMemory's queue: `sleep 3600` runs that each need
// the whole node, one running): the whole request (scrape), and what the
// collector does under the server's lock (locked).
//
//	go test ./internal/server -run XXX -bench PromScrape -benchtime 20x
func BenchmarkPromScrape(b *testing.B) {
	const runs = 100_000
	e := promEnv(b, MetricsOptions{})
	e.do(b, "node n1 cpus=4")
	e.fillQueue(b, runs, 2)
	e.srv.scheduleOnce()
	e.settle()
	h := e.srv.Handler()
	b.Run("scrape", func(b *testing.B) {
		size := 0
		for b.Loop() {
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.RemoteAddr = "127.0.0.1:40000"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 200 {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
			size = w.Body.Len()
		}
		b.ReportMetric(float64(size), "bytes/scrape")
	})
	// The collector's longest turn under the lock: the figures but the
	// waiting runs', or one part of the waiting runs.
	b.Run("locked", func(b *testing.B) {
		for b.Loop() {
			e.srv.mu.Lock()
			f := e.srv.Figures(e.clock.Now(), waitBuckets)
			ids := e.srv.WaitingIDs()
			e.srv.unlock()
			e.srv.mu.Lock()
			e.srv.AddWaiting(&f, ids[:min(len(ids), waitingPart)], e.clock.Now(), waitBuckets)
			e.srv.unlock()
		}
	})
}
