package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Report is one policy's line of a comparison, as `berth sim` prints it.
// Times are in seconds.
type Report struct {
	Policy             string  `json:"policy"`
	Jobs               int     `json:"jobs"`
	Dropped            int     `json:"dropped"`
	AvgWait            float64 `json:"avg_wait"`
	P95Wait            float64 `json:"p95_wait"`
	P99Wait            float64 `json:"p99_wait"`
	AvgBoundedSlowdown float64 `json:"avg_bounded_slowdown"`
	Utilization        float64 `json:"utilization"`
	Makespan           float64 `json:"makespan"`
	MaxWait            float64 `json:"max_wait"`
	// WallSeconds is how long the replay took in real time, measured by the
	// caller (the simulator itself never reads the real clock).
	WallSeconds    float64        `json:"wall_seconds"`
	DroppedReasons map[string]int `json:"dropped_reasons"`
}

// NewReport puts a replay's metrics, the jobs dropped before it and its real
// run time in one report.
func NewReport(policy string, m Metrics, drops Drops, wall time.Duration) Report {
	reasons := map[string]int{}
	for r, n := range drops {
		reasons[string(r)] = n
	}
	return Report{
		Policy:             policy,
		Jobs:               m.Jobs,
		Dropped:            drops.Total(),
		AvgWait:            m.AvgWait,
		P95Wait:            m.P95Wait,
		P99Wait:            m.P99Wait,
		AvgBoundedSlowdown: m.AvgBoundedSlowdown,
		Utilization:        m.Utilization,
		Makespan:           m.Makespan,
		MaxWait:            m.MaxWait,
		WallSeconds:        wall.Seconds(),
		DroppedReasons:     reasons,
	}
}

// WriteTable prints reports as an aligned table, one row per policy.
func WriteTable(w io.Writer, reports []Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tjobs\tdropped\tavg wait (s)\tp95 wait (s)\tp99 wait (s)\tmax wait (s)\tavg bsld\tutilization\tmakespan (s)\twall (s)\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.1f\t%.1f\t%.1f\t%.4f\t%.6f\t%.0f\t%.3f\t\n",
			r.Policy, r.Jobs, r.Dropped, r.AvgWait, r.P95Wait, r.P99Wait, r.MaxWait, r.AvgBoundedSlowdown, r.Utilization, r.Makespan, r.WallSeconds)
	}
	return tw.Flush()
}
