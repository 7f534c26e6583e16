package sim

import (
	"math"
	"slices"
	"time"
)

// Metrics are a replay's figures, by the literature's conventions. Times are
// in seconds.
type Metrics struct {
	Jobs int
	// AvgWait, P95Wait, P99Wait and MaxWait are over wait = start - submit;
	// the percentiles are by nearest rank: the ceil(0.95 n)-th and
	// ceil(0.99 n)-th smallest wait. P99 and max are the tail a policy
	// that favours short jobs may starve.
	AvgWait, P95Wait, P99Wait, MaxWait float64
	// AvgBoundedSlowdown is the mean of max(1, (wait + run) / max(run, 10 s)).
	AvgBoundedSlowdown float64
	// Utilization is sum(processors x run) / (P x makespan).
	Utilization float64
	// Makespan is the last end minus the first submit.
	Makespan float64
}

// BoundedSlowdownThreshold is the run time below which a job's slowdown is
// computed as if it ran this long, so that very short jobs do not dominate
// the mean.
const BoundedSlowdownThreshold = 10 * time.Second

// Metrics computes the replay's figures; zero for an empty replay.
func (r Result) Metrics() Metrics {
	n := len(r.Outcomes)
	if n == 0 {
		return Metrics{}
	}
	waits := make([]time.Duration, n)
	var sumWait, sumBSLD, area float64
	first, last := r.Outcomes[0].Job.Submit, time.Duration(math.MinInt64)
	for i, o := range r.Outcomes {
		w := o.Wait()
		waits[i] = w
		sumWait += w.Seconds()
		run := o.Job.Run.Seconds()
		sumBSLD += max(1, (w.Seconds()+run)/max(run, BoundedSlowdownThreshold.Seconds()))
		area += float64(float64(o.Job.Procs) * run) // no fused multiply-add: the same figures on every CPU
		first = min(first, o.Job.Submit)
		last = max(last, o.End())
	}
	slices.Sort(waits)
	span := (last - first).Seconds()
	m := Metrics{
		Jobs:               n,
		AvgWait:            sumWait / float64(n),
		P95Wait:            NearestRank(waits, 95).Seconds(),
		P99Wait:            NearestRank(waits, 99).Seconds(),
		MaxWait:            waits[n-1].Seconds(),
		AvgBoundedSlowdown: sumBSLD / float64(n),
		Makespan:           span,
	}
	if span > 0 {
		m.Utilization = area / (float64(r.Procs) * span)
	}
	return m
}

// NearestRank is the p-th percentile (0 < p <= 100) of sorted values by the
// nearest-rank method: the ceil(p/100 x n)-th smallest.
func NearestRank(sorted []time.Duration, p int) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := (p*n + 99) / 100 // ceil(p n / 100) in integers
	return sorted[min(max(rank, 1), n)-1]
}
