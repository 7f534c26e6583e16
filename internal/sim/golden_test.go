package sim

import (
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from this run")

// A real trace's prefix replayed through the real scheduler, its figures
// pinned in testdata/KTH-SP2-first2000.golden: any change to the simulator,
// the metrics or sched's policies that moves a single start shows here as a
// diff to review (the starts' digest), and the figures say by how much.
// Regenerate with `go test ./internal/sim -run Golden -update`.
func TestGoldenKTHPrefix(t *testing.T) {
	const trace, golden = "testdata/KTH-SP2-first2000.swf.gz", "testdata/KTH-SP2-first2000.golden"
	tr, err := OpenSWF(trace)
	if err != nil {
		t.Fatal(err)
	}
	jobs, drops := Keep(tr.Jobs, tr.MaxProcs)
	var b strings.Builder
	fmt.Fprintf(&b, "# go test ./internal/sim -run Golden -update\n# %s: P=%d, %d jobs kept, %d dropped %v\n", trace, tr.MaxProcs, len(jobs), drops.Total(), drops)
	fmt.Fprintf(&b, "%-12s %6s %14s %10s %10s %10s %12s %10s %10s %16s\n", "policy", "jobs", "avg_wait", "p95_wait", "p99_wait", "max_wait", "avg_bsld", "util", "makespan", "starts_digest")
	for _, name := range Policies {
		policy, err := PolicyByName(name)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(jobs, Config{Procs: tr.MaxProcs, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		m := res.Metrics()
		h := fnv.New64a()
		for _, o := range res.Outcomes {
			fmt.Fprintf(h, "%d:%d\n", o.Job.ID, o.Start)
		}
		fmt.Fprintf(&b, "%-12s %6d %14.6f %10.1f %10.1f %10.1f %12.6f %10.6f %10.0f %016x\n",
			name, m.Jobs, m.AvgWait, m.P95Wait, m.P99Wait, m.MaxWait, m.AvgBoundedSlowdown, m.Utilization, m.Makespan, h.Sum64())
	}
	got := b.String()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}
