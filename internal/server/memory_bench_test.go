package server

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"

	"github.com/berth-hq/berth/internal/control"
)

// BenchmarkPendingMemory reports the live heap a waiting run costs the
// server: N runs of `sleep 3600`, each needing the whole node, submitted
// through the server's submit path (as the API does) onto one node, then a
// scheduling pass over them. BERTH_HEAP_PROFILE=FILE writes the heap
// profile. berth bench memory measures the same through HTTP, as RSS.
//
//	go test ./internal/server -run XXX -bench PendingMemory -benchtime 1x
func BenchmarkPendingMemory(b *testing.B) {
	const runs = 100_000
	for range b.N {
		e := newTranscriptEnv(b)
		e.do(b, "node n1 cpus=4")
		e.st.record = false
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		e.fillQueue(b, runs, 8)
		e.srv.scheduleOnce()
		e.settle()
		e.st.take() // the transcripts' record of the batches is not the server's
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/runs, "live-bytes/run")
		if f := os.Getenv("BERTH_HEAP_PROFILE"); f != "" {
			out, err := os.Create(f)
			if err == nil {
				pprof.WriteHeapProfile(out)
				out.Close()
			}
		}
		fmt.Fprintf(os.Stderr, "pending: %d runs in memory\n", func() int { e.srv.mu.Lock(); defer e.srv.unlock(); _, w, _, _ := e.srv.Counts(); return w }())
	}
}

// fillQueue submits runs runs of "sleep 3600" that each need the whole
// 4-CPU node, from clients goroutines: one runs, the others wait.
func (e *transcriptEnv) fillQueue(b *testing.B, runs, clients int) {
	task := task(b, "type: task\ncommands: [\"sleep 3600\"]\nresources: {cpu: 4}\n")
	var wg sync.WaitGroup
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < runs; i += clients {
				t := *task
				if _, err := e.srv.submit(e.admin, &t, nil, control.SubmitOpts{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkArrayMemory reports the live heap an array costs the server:
// 400 arrays of 1,000 `sleep 3600` tasks, each needing the whole node, on
// one node, after a scheduling pass (each array has its window of waiting
// tasks made as runs; the rest exist only as its record's index set).
//
//	go test ./internal/server -run XXX -bench ArrayMemory -benchtime 1x
func BenchmarkArrayMemory(b *testing.B) {
	const arrays, tasks = 400, 1000
	for range b.N {
		e := newTranscriptEnv(b)
		e.do(b, "node n1 cpus=4")
		e.st.record = false
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		t := task(b, fmt.Sprintf("type: task\ncommands: [\"sleep 3600\"]\nresources: {cpu: 4}\narray: \"0-%d\"\n", tasks-1))
		for range arrays {
			c := *t
			if _, err := e.srv.submit(e.admin, &c, nil, control.SubmitOpts{}); err != nil {
				b.Fatal(err)
			}
		}
		e.srv.scheduleOnce()
		e.settle()
		e.st.take()
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		e.srv.mu.Lock()
		runs, _, _, _ := e.srv.Counts()
		e.srv.unlock()
		live := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(live/arrays, "live-bytes/array")
		b.ReportMetric(live/float64(runs), "live-bytes/task-run")
		fmt.Fprintf(os.Stderr, "arrays: %d arrays of %d tasks, %d runs in memory\n", arrays, tasks, runs)
	}
}
