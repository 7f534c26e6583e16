package slurm

import (
	"sort"
	"strings"
	"time"
)

// StepRow is one running job step as squeue -s lists it.
type StepRow struct {
	JobID     uint32
	ArrayID   uint32 // 0: not an array task
	ArrayTask int
	Step      string // "0", "1"…, "batch"
	Name      string
	Partition string
	User      string
	NodeList  string
	Start     time.Time
	TimeLimit time.Duration // the job's (Unlimited: none)
}

// id is STEPID: JOBID.STEP, or ARRAYID_TASK.STEP.
func (s StepRow) id() string {
	if s.ArrayID != 0 {
		return u32(s.ArrayID) + "_" + itoa(s.ArrayTask) + "." + s.Step
	}
	return u32(s.JobID) + "." + s.Step
}

// FormatSqueueSteps prints squeue -s (-l, -h) in squeue's step formats,
// "%.15i %.8j %.9P %.8u %.9M %N" (-l: "%.9l" before the time): the steps
// by job, the numbered ones first.
func FormatSqueueSteps(steps []StepRow, long, noHeader bool, now time.Time) string {
	type col struct {
		head  string
		width int
		value func(StepRow) string
	}
	cols := []col{
		{"STEPID", 15, StepRow.id},
		{"NAME", 8, func(s StepRow) string { return s.Name }},
		{"PARTITION", 9, func(s StepRow) string { return s.Partition }},
		{"USER", 8, func(s StepRow) string { return s.User }},
	}
	if long {
		cols = append(cols, col{"TIME_LIMIT", 9, func(s StepRow) string { return timeLimitColumn(s.TimeLimit) }})
	}
	cols = append(cols,
		col{"TIME", 9, func(s StepRow) string { return FormatSqueueDuration(now.Sub(s.Start)) }},
		col{"NODELIST", 0, func(s StepRow) string { return s.NodeList }})
	sorted := append([]StepRow(nil), steps...)
	sort.SliceStable(sorted, func(i, k int) bool {
		a, b := sorted[i], sorted[k]
		if a.JobID != b.JobID {
			return a.JobID < b.JobID
		}
		ai, aerr := atoiStep(a.Step)
		bi, berr := atoiStep(b.Step)
		if aerr != berr {
			return !aerr // numbered steps before batch
		}
		return ai < bi
	})
	var b strings.Builder
	line := func(text func(col) string) {
		for i, c := range cols {
			if i > 0 {
				b.WriteByte(' ')
			}
			printField(&b, text(c), c.width, true, true)
		}
		b.WriteByte('\n')
	}
	if !noHeader {
		line(func(c col) string { return c.head })
	}
	for _, s := range sorted {
		line(func(c col) string { return c.value(s) })
	}
	return b.String()
}

// atoiStep reads a numbered step; the special ones (batch) are not.
func atoiStep(s string) (int, bool) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, true
		}
		n = n*10 + int(c-'0')
	}
	return n, s == ""
}
