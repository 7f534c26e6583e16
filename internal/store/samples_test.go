package store

import (
	"context"
	"fmt"
	"testing"
)

// Samples are kept by job, level and time (a resend is dropped), listed by
// job then time (a job's newest n with a limit), listed for folding by age,
// and cut by level and time, for one job or all, in the batch that adds
// their fold.
func TestMetricSamples(t *testing.T) { forEachStore(t, testMetricSamples) }

func testMetricSamples(t *testing.T, open func() Store) {
	ctx := context.Background()
	s := open()
	var b Batch
	for job := int64(1); job <= 2; job++ {
		for sec := range 5 {
			b.Samples = append(b.Samples, &MetricSample{JobID: job, Time: ts(sec), Data: fmt.Appendf(nil, `{"j":%d,"s":%d}`, job, sec)})
		}
	}
	b.Samples = append(b.Samples, &MetricSample{JobID: 1, Time: ts(0), Data: []byte(`{"resent":true}`)})
	if err := s.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	list := func(ids []int64, limit int) string {
		t.Helper()
		ms, err := s.ListSamples(ctx, ids, limit)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, m := range ms {
			out += fmt.Sprintf("%d/%d@%d=%s ", m.JobID, m.Level, m.Time.Sub(ts(0)).Milliseconds()/1000, m.Data)
		}
		return out
	}
	if got, want := list([]int64{1}, 0), `1/0@0={"j":1,"s":0} 1/0@1={"j":1,"s":1} 1/0@2={"j":1,"s":2} 1/0@3={"j":1,"s":3} 1/0@4={"j":1,"s":4} `; got != want {
		t.Errorf("job 1's samples:\n%s\nwant\n%s", got, want)
	}
	if got, want := list([]int64{2, 1}, 2), `2/0@3={"j":2,"s":3} 2/0@4={"j":2,"s":4} 1/0@3={"j":1,"s":3} 1/0@4={"j":1,"s":4} `; got != want {
		t.Errorf("newest 2 of jobs 2, 1:\n%s\nwant\n%s", got, want)
	}
	old, err := s.SamplesBefore(ctx, 0, ts(2), 3)
	if err != nil || len(old) != 3 || old[0].Time != ts(0) || old[2].JobID != 1 || old[2].Time != ts(1) {
		t.Fatalf("samples before 2 s: %v (%v)", old, err)
	}
	// Job 1's first three seconds fold into one level-1 sample, in one
	// batch; every job's level-0 samples before 1 s go too.
	fold := &Batch{Samples: []*MetricSample{{JobID: 1, Level: 1, Time: ts(0), Data: []byte(`{"folded":3}`)}},
		SampleCuts: []SampleCut{{JobID: 1, Level: 0, From: ts(0), Before: ts(3)}, {Level: 0, Before: ts(1)}}}
	if err := s.Apply(ctx, fold); err != nil {
		t.Fatal(err)
	}
	if got, want := list([]int64{1, 2}, 0), `1/1@0={"folded":3} 1/0@3={"j":1,"s":3} 1/0@4={"j":1,"s":4} 2/0@1={"j":2,"s":1} 2/0@2={"j":2,"s":2} 2/0@3={"j":2,"s":3} 2/0@4={"j":2,"s":4} `; got != want {
		t.Errorf("after the fold:\n%s\nwant\n%s", got, want)
	}
}
