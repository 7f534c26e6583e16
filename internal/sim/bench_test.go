package sim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkReplay120k times whole replays of 120,000 jobs: the kept jobs of
// the shared KTH-SP2 trace, repeated back to back (Repeat) and cut at
// 120,000, on its 100 processors; the same workload as
//
//	berth sim --trace KTH-SP2-1996-2.1-cln.swf.gz --repeat 5 --max-jobs 120000
//
// It reports each replay's wall time as s/replay. Skipped where the trace is
// absent ($BERTH_TRACES, else /work/shared/traces).
func BenchmarkReplay120k(b *testing.B) {
	dir := os.Getenv("BERTH_TRACES")
	if dir == "" {
		dir = "/work/shared/traces"
	}
	tr, err := OpenSWF(filepath.Join(dir, "KTH-SP2-1996-2.1-cln.swf.gz"))
	if err != nil {
		b.Skip(err)
	}
	kept, _ := Keep(tr.Jobs, tr.MaxProcs)
	jobs := Repeat(kept, 5)[:120_000]
	for _, name := range []string{"easy", "berth"} {
		b.Run(name, func(b *testing.B) {
			policy, err := PolicyByName(name)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for b.Loop() {
				if _, err := Run(jobs, Config{Procs: tr.MaxProcs, Policy: policy}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/replay")
		})
	}
}
