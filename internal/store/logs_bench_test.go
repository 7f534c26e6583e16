package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// BenchmarkLogsAtScale writes the output of many runs through Apply, as
// the server's group commit does, and reads it back, on each backend:
// BERTH_BENCH_RUNS runs (default 1,000) of one job, each printing
// BERTH_BENCH_LINES lines (default 10,000) of 64 bytes, in chunks of
// BERTH_BENCH_CHUNK lines (default 10: a job printing 100 lines a second,
// shipped by its agent every 100 ms). Each Apply carries one chunk of each
// of 200 jobs (the server's transactions under that load). It reports the
// database's size, the Apply latency (p50, p99) and throughput, and
// ReadLogs' latency for a page of 1,000 chunks at random places (p50,
// p99) while nothing else runs. PostgreSQL runs with fsync and
// synchronous commit on (a throwaway cluster of its own); SQLite with the
// server's default, synchronous=normal in WAL mode. Run it once:
//
//	go test ./internal/store -run '^$' -bench LogsAtScale -benchtime 1x -timeout 60m
//
// The figures are in docs/design.md, "Logs at scale".
func BenchmarkLogsAtScale(b *testing.B) {
	runs, lines, chunk := envInt("BERTH_BENCH_RUNS", 1000), envInt("BERTH_BENCH_LINES", 10000), envInt("BERTH_BENCH_CHUNK", 10)
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "b.db")
		s, err := OpenSQLite(context.Background(), path, SQLiteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchLogs(b, s, runs, lines, chunk, func() int64 {
			// The database's pages: the WAL beside it is reused, not grown,
			// once the checkpointer has copied it back.
			var pages, size int64
			if err := s.r.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
				b.Fatal(err)
			}
			if err := s.r.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil {
				b.Fatal(err)
			}
			return pages * size
		})
	})
	b.Run("postgres", func(b *testing.B) {
		c, err := pgtest.Start(pgtest.Options{Durable: true})
		if err != nil {
			b.Skip(err)
		}
		defer c.Stop()
		url, err := c.CreateDatabase(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		s, err := OpenPostgres(context.Background(), url, PostgresOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchLogs(b, s, runs, lines, chunk, func() int64 {
			var n int64
			if err := s.r.QueryRow(`SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchLogs(b *testing.B, s Store, runs, lines, chunk int, size func() int64) {
	ctx := context.Background()
	const perApply, lineLen = 200, 64
	before := size()
	line := func(job, n int) []byte {
		l := fmt.Appendf(nil, "job %d step %d: loss=%.6f lr=%.6f", job, n, 1/float64(n+1), 0.0003)
		for len(l) < lineLen-1 {
			l = append(l, ' ')
		}
		return append(l, '\n')
	}
	var applies []time.Duration
	start := time.Now()
	offsets := make([]int64, runs)
	for first := 0; first < runs; first += perApply {
		jobs := min(perApply, runs-first)
		for n := 0; n < lines; n += chunk {
			bt := &Batch{}
			for j := first; j < first+jobs; j++ {
				var data []byte
				for k := n; k < min(n+chunk, lines); k++ {
					data = append(data, line(j, k)...)
				}
				bt.Logs = append(bt.Logs, &LogChunk{JobID: int64(j + 1), Offset: offsets[j], Stream: "stdout", Time: time.Now(), Data: data})
				offsets[j] += int64(len(data))
			}
			t0 := time.Now()
			if err := s.Apply(ctx, bt); err != nil {
				b.Fatal(err)
			}
			applies = append(applies, time.Since(t0))
		}
	}
	wrote := time.Since(start)
	// Reads: a page of 1,000 chunks from a random place of a random job.
	var reads []time.Duration
	perJob := (lines + chunk - 1) / chunk
	for range 300 {
		job := rand.IntN(runs) + 1
		from := int64(rand.IntN(perJob)) * int64(chunk*lineLen)
		t0 := time.Now()
		got, err := s.ReadLogs(ctx, int64(job), from, 1000)
		if err != nil {
			b.Fatal(err)
		}
		reads = append(reads, time.Since(t0))
		if len(got) == 0 {
			b.Fatalf("job %d from %d: no chunks", job, from)
		}
	}
	// The whole log of one job, page by page, as berth logs reads it.
	t0 := time.Now()
	var total int
	for off := int64(0); ; {
		got, err := s.ReadLogs(ctx, 1, off, 1000)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		last := got[len(got)-1]
		off = last.Offset + int64(len(last.Data))
		for _, c := range got {
			total += len(c.Data)
		}
	}
	whole := time.Since(t0)
	if total != lines*lineLen {
		b.Fatalf("job 1's log read back: %d bytes, want %d", total, lines*lineLen)
	}
	data := float64(runs) * float64(lines) * lineLen
	grown := float64(size() - before)
	b.ReportMetric(grown/1e6, "db-MB")
	b.ReportMetric(grown/data, "db/data")
	b.ReportMetric(float64(runs*lines)/wrote.Seconds(), "lines/s")
	b.ReportMetric(pct(applies, 50), "apply-p50-ms")
	b.ReportMetric(pct(applies, 99), "apply-p99-ms")
	b.ReportMetric(pct(reads, 50), "read-p50-ms")
	b.ReportMetric(pct(reads, 99), "read-p99-ms")
	b.ReportMetric(whole.Seconds()*1000, "read-whole-ms")
	b.Logf("%d runs × %d lines (%.0f MB) in %d Applies of %d chunks of %d lines: %v; database +%.0f MB",
		runs, lines, data/1e6, len(applies), perApply, chunk, wrote.Round(time.Millisecond), grown/1e6)
}

// pct is the p-th percentile of ds, in milliseconds.
func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*p/100)]) / 1e6
}
