package sim

import (
	"cmp"
	"slices"
	"time"
)

// Job is one unit of work to replay, whatever its source. Times are offsets
// on the virtual clock (SWF: seconds since the trace's start).
type Job struct {
	ID     int64
	User   string // "" unknown
	Submit time.Duration
	// Run is how long the job actually runs once started.
	Run   time.Duration
	Procs int
	// Estimate is all the scheduler knows of the run time: its time limit,
	// used for reservations. Run never exceeds it.
	Estimate time.Duration
}

// DropReason says why a job cannot be replayed on a machine.
type DropReason string

// Why a job is dropped, checked in this order.
const (
	DropNoRun    DropReason = "run <= 0"
	DropNoProcs  DropReason = "processors <= 0"
	DropTooLarge DropReason = "processors > P"
)

// Drops counts the dropped jobs by reason.
type Drops map[DropReason]int

// Total is the number of dropped jobs.
func (d Drops) Total() int {
	n := 0
	for _, c := range d {
		n += c
	}
	return n
}

// Keep returns, in arrival order (submit time, then ID), the jobs that can
// run on a machine of procs processors: run > 0 and 0 < processors <= procs,
// whatever their recorded status; and the others counted by reason.
func Keep(jobs []Job, procs int) ([]Job, Drops) {
	kept := make([]Job, 0, len(jobs))
	drops := Drops{}
	for _, j := range jobs {
		switch {
		case j.Run <= 0:
			drops[DropNoRun]++
		case j.Procs <= 0:
			drops[DropNoProcs]++
		case j.Procs > procs:
			drops[DropTooLarge]++
		default:
			kept = append(kept, j)
		}
	}
	SortByArrival(kept)
	return kept, drops
}

// SortByArrival orders jobs by submit time, then ID: the order in which they
// arrive.
func SortByArrival(jobs []Job) {
	slices.SortStableFunc(jobs, byArrival)
}

func byArrival(a, b Job) int {
	if c := cmp.Compare(a.Submit, b.Submit); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Repeat returns jobs (in arrival order) times over, back to back: copy k
// is submitted k spans later, where the span runs from the first submit to
// one second after the last, and its IDs are offset by k times the largest
// ID, so every copy keeps the original's arrival process and mix. It makes a
// long workload out of a real one, for timing replays.
func Repeat(jobs []Job, times int) []Job {
	if len(jobs) == 0 || times <= 1 {
		return jobs
	}
	var first, last time.Duration = jobs[0].Submit, jobs[0].Submit
	var top int64
	for _, j := range jobs {
		first, last = min(first, j.Submit), max(last, j.Submit)
		top = max(top, j.ID)
	}
	span := last - first + time.Second
	out := make([]Job, 0, len(jobs)*times)
	for k := range times {
		for _, j := range jobs {
			j.Submit += time.Duration(k) * span
			j.ID += int64(k) * top
			out = append(out, j)
		}
	}
	SortByArrival(out)
	return out
}
