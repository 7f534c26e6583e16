package lifecycle

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/step.golden")

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func jobsOf(st Status, n int) []Job {
	js := make([]Job, n)
	for k := range js {
		js[k].Status = st
	}
	return js
}

// The runs of the table: every active status a run can be in, with the
// shapes that change what an event does (several jobs, a held job, a stop
// under way, a retry policy, master-done).
func fixtures() []struct {
	name string
	run  Run
	jobs []Job
} {
	retry := &RetryPolicy{OnEvents: []string{"error", "interruption"}}
	held := jobsOf(StatusRunning, 2)
	held[1] = Job{Status: StatusProvisioning, Held: true}
	return []struct {
		name string
		run  Run
		jobs []Job
	}{
		{"submitted, 1 job", Run{Status: StatusSubmitted, Reason: ReasonPriority}, jobsOf(StatusSubmitted, 1)},
		{"provisioning, 2 jobs", Run{Status: StatusProvisioning}, jobsOf(StatusProvisioning, 2)},
		{"running, 1 job", Run{Status: StatusRunning}, jobsOf(StatusRunning, 1)},
		{"running, 2 jobs", Run{Status: StatusRunning}, jobsOf(StatusRunning, 2)},
		{"running, job 1 held (master-first)", Run{Status: StatusRunning}, held},
		{"running, 2 jobs, master-done", Run{Status: StatusRunning, MasterDone: true}, jobsOf(StatusRunning, 2)},
		{"running, retry on error", Run{Status: StatusRunning, Retry: retry}, jobsOf(StatusRunning, 1)},
		{"terminating, user stop", Run{Status: StatusTerminating, Stop: StopUser}, jobsOf(StatusTerminating, 1)},
		{"terminating, abort", Run{Status: StatusTerminating, Stop: StopAbort, Retry: retry}, jobsOf(StatusTerminating, 1)},
		{"terminating, preempt-requeue", Run{Status: StatusTerminating, Stop: StopPreemptRequeue}, jobsOf(StatusTerminating, 1)},
		{"terminating, preempt-cancel", Run{Status: StatusTerminating, Stop: StopPreemptCancel, Retry: retry}, jobsOf(StatusTerminating, 1)},
		{"terminating, requeue", Run{Status: StatusTerminating, Stop: StopRequeue}, jobsOf(StatusTerminating, 1)},
	}
}

// The events of the table, each on job 0 where it names a job.
func events() []struct {
	name string
	ev   Event
} {
	return []struct {
		name string
		ev   Event
	}{
		{"settle", Event{Kind: Settle}},
		{"started", Event{Kind: Started}},
		{"exited 0", Event{Kind: Exited}},
		{"exited 1", Event{Kind: Exited, Exit: Exit{Code: 1}}},
		{"exited oom", Event{Kind: Exited, Exit: Exit{Code: 137, OOMKilled: true}}},
		{"exited stopped", Event{Kind: Exited, Exit: Exit{Reason: "stopped", Code: 143}}},
		{"exited aborted", Event{Kind: Exited, Exit: Exit{Reason: "aborted", Code: 137}}},
		{"exited time limit", Event{Kind: Exited, Exit: Exit{Reason: "max_duration", Code: 143}}},
		{"node lost", Event{Kind: NodeLost}},
		{"stop user", Event{Kind: StopRequested, Cause: StopUser}},
		{"stop abort", Event{Kind: StopRequested, Cause: StopAbort}},
		{"stop requeue", Event{Kind: StopRequested, Cause: StopRequeue}},
		{"preempt requeue", Event{Kind: Preempted, Cause: StopPreemptRequeue, By: 9}},
		{"preempt cancel", Event{Kind: Preempted, Cause: StopPreemptCancel, By: 9}},
		{"failed no capacity", Event{Kind: Failed, Status: StatusFailed, Reason: ReasonNoCapacity}},
	}
}

// describe prints a decision on one line per part, for the golden table.
func describe(d Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  run %s", d.Status)
	if d.Reason != "" {
		fmt.Fprintf(&b, " (%s)", d.Reason)
	}
	if d.ExitCode != nil {
		fmt.Fprintf(&b, " exit %d", *d.ExitCode)
	}
	if d.Stop != StopNone {
		fmt.Fprintf(&b, " stop=%s", d.Stop)
	}
	if d.Final {
		b.WriteString(" FINAL")
	}
	if d.Requeue {
		fmt.Fprintf(&b, " REQUEUE attempt %d", d.Attempt)
	}
	if d.Retried {
		fmt.Fprintf(&b, " retry %d not before +%s", d.Retries.Retries, d.Retries.NotBefore.Sub(t0))
	}
	b.WriteString("\n")
	for _, c := range d.Jobs {
		fmt.Fprintf(&b, "  job %d -> %s", c.Job, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, " (%s)", c.Reason)
		}
		if c.Terminate {
			b.WriteString(" send stop")
			if c.Abort {
				b.WriteString(" abort")
			}
		}
		if c.BySibling {
			b.WriteString(" by sibling")
		}
		b.WriteString("\n")
	}
	for _, n := range d.Notes {
		fmt.Fprintf(&b, "  note %s: %s\n", n.Type, n.Message)
	}
	return b.String()
}

// TestStepTable pins what every event does to every kind of active run, as
// a table reviewed as a diff (go test ./internal/lifecycle -update).
func TestStepTable(t *testing.T) {
	var out strings.Builder
	for _, f := range fixtures() {
		for _, e := range events() {
			fmt.Fprintf(&out, "%s | %s\n", f.name, e.name)
			out.WriteString(describe(Step(f.run, f.jobs, e.ev, t0)))
		}
	}
	const golden = "testdata/step.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for k := range min(len(gl), len(wl)) {
			if gl[k] != wl[k] {
				t.Fatalf("%s differs at line %d:\n got  %s\n want %s\n(go test -update rewrites it; review the diff)", golden, k+1, gl[k], wl[k])
			}
		}
		t.Fatalf("%s differs in length: %d lines, want %d", golden, len(gl), len(wl))
	}
}

// walker drives one run through random events the way the server does:
// it applies each decision (job changes, requeue with fresh jobs) and
// places the queued jobs now and then.
type walker struct {
	run  Run
	jobs []Job
	rng  *rand.Rand
	now  time.Time
}

func (w *walker) event() Event {
	k := w.rng.IntN(len(w.jobs))
	switch w.rng.IntN(9) {
	case 0:
		return Event{Kind: Started, Job: k}
	case 1:
		return Event{Kind: Exited, Job: k, Exit: Exit{Code: w.rng.IntN(3)}}
	case 2:
		return Event{Kind: Exited, Job: k, Exit: Exit{Reason: []string{"stopped", "aborted", "max_duration", "start_failed", "lost_by_agent"}[w.rng.IntN(5)], Code: 143}}
	case 3:
		return Event{Kind: NodeLost, Job: k}
	case 4:
		return Event{Kind: StopRequested, Cause: []StopCause{StopUser, StopAbort, StopRequeue}[w.rng.IntN(3)]}
	case 5:
		return Event{Kind: Preempted, Cause: []StopCause{StopPreemptRequeue, StopPreemptCancel}[w.rng.IntN(2)], By: 1}
	case 6:
		return Event{Kind: Failed, Status: StatusFailed, Reason: ReasonNoCapacity}
	}
	return Event{Kind: Settle}
}

// place puts a queued run's jobs on nodes, as a scheduling pass does.
func (w *walker) place() {
	if w.run.Status != StatusSubmitted {
		return
	}
	for k := range w.jobs {
		w.jobs[k].Status = StatusProvisioning
	}
}

func (w *walker) apply(d Decision) {
	for _, c := range d.Jobs {
		j := &w.jobs[c.Job]
		j.Status, j.BySibling = c.Status, j.BySibling || c.BySibling
		if !c.Terminate {
			j.Reason, j.ExitCode = c.Reason, c.ExitCode
		}
	}
	w.run.Stop, w.run.Status, w.run.Reason = d.Stop, d.Status, d.Reason
	if d.Retried {
		w.run.Retries = d.Retries
	}
	if d.Requeue {
		w.jobs = make([]Job, len(w.jobs))
		for k := range w.jobs {
			w.jobs[k] = Job{Status: StatusSubmitted, Attempt: d.Attempt}
		}
	}
}

// Safety rules over random lives: a final run never comes back (the server
// drops it; only a requeue keeps a run whose jobs all ended), a user's stop
// or abort is never retried or requeued, a final job never changes, only a
// job on a node is sent a stop, Step never changes its arguments, and the
// same inputs give the same decision.
func TestStepProperties(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := &walker{rng: rng, now: t0, run: Run{Status: StatusSubmitted, SubmittedAt: t0}}
		if rng.IntN(2) == 0 {
			w.run.Retry = &RetryPolicy{OnEvents: []string{"error", "interruption"}}
		}
		w.run.MasterDone = rng.IntN(3) == 0
		w.jobs = jobsOf(StatusSubmitted, 1+rng.IntN(3))
		userStopped := false
		for step := 0; step < 40; step++ {
			if rng.IntN(3) == 0 {
				w.place()
			}
			ev := w.event()
			run, jobs := w.run, slices.Clone(w.jobs)
			d := Step(w.run, w.jobs, ev, w.now)
			if !reflect.DeepEqual(run, w.run) || !reflect.DeepEqual(jobs, w.jobs) {
				t.Fatalf("seed %d step %d: Step changed its arguments", seed, step)
			}
			if again := Step(w.run, w.jobs, ev, w.now); !reflect.DeepEqual(d, again) {
				t.Fatalf("seed %d step %d: two decisions on the same inputs differ", seed, step)
			}
			for _, c := range d.Jobs {
				if jobs[c.Job].Status.Finished() {
					t.Fatalf("seed %d step %d: %s changed final job %d (%s) to %s", seed, step, ev.Kind, c.Job, jobs[c.Job].Status, c.Status)
				}
				if c.Terminate && !jobs[c.Job].Status.Placed() {
					t.Fatalf("seed %d step %d: stop sent to job %d, %s, which is on no node", seed, step, c.Job, jobs[c.Job].Status)
				}
			}
			if ev.Kind == StopRequested && (ev.Cause == StopUser || ev.Cause == StopAbort) {
				userStopped = true
			}
			if userStopped && d.Requeue {
				t.Fatalf("seed %d step %d: a run a user stopped was requeued (stop %s, event %s)", seed, step, d.Stop, ev.Kind)
			}
			if d.Final && d.Requeue {
				t.Fatalf("seed %d step %d: final and requeued at once", seed, step)
			}
			w.apply(d)
			allEnded := !slices.ContainsFunc(w.jobs, func(j Job) bool { return !j.Status.Finished() })
			if d.Final != d.Status.Finished() || (d.Final && !allEnded) {
				t.Fatalf("seed %d step %d: final=%v with run %s and jobs %v", seed, step, d.Final, d.Status, w.jobs)
			}
			if allEnded && !d.Final && !d.Requeue && ev.Kind != Settle {
				t.Fatalf("seed %d step %d: every job ended but the run is %s, neither final nor requeued", seed, step, d.Status)
			}
			if d.Final {
				break // the server drops a final run: nothing happens to it again
			}
			w.now = w.now.Add(time.Minute)
		}
	}
}
