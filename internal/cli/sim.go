//go:build !slim

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/sched/scenario"
	"github.com/berth-hq/berth/internal/sim"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

func newSimCmd() *cobra.Command {
	var (
		trace, policy, db, scenarioFile, workload string
		procs, maxJobs, repeat                    int
		asJSON, history                           bool
	)
	cmd := &cobra.Command{
		Use:   "sim --trace FILE.swf[.gz] | --history | --workload FILE.json | --scenario FILE",
		Short: "Replay a workload trace through the scheduler and compare policies",
		Long: `Replay a Standard Workload Format trace (Parallel Workloads Archive, gzipped or plain) through
Berth's scheduler on a virtual clock, on one pool of P processors (the trace's MaxProcs header,
else MaxNodes; --procs overrides), and print per policy: jobs, average, 95th- and 99th-percentile
(nearest rank) and maximum wait, average bounded slowdown (10 s threshold), utilization, makespan,
and the replay's real run time. Without --policy, all of fcfs, easy, conservative and
berth run, one row each. berth is Berth's own policy (the server's default): backfill with
16 reservations in multifactor priority order, with aging. Jobs with run time <= 0 or processors
outside 1..P are dropped and counted. --repeat N replays the kept jobs N times back to back (then --max-jobs cuts), a long
workload for timing the replay. --json prints a JSON array, one object per policy. See docs/simulator.md.

--history replays Berth's own finished runs instead, from the server's database ($BERTH_HOME/
server/berth.db, or --db): each run's submit time, run time, CPUs over all its nodes and
max_duration (its estimate; the run time when it has none), on a pool of the registered nodes'
CPUs (--procs overrides), so a policy can be tried on the site's own history before it is
deployed.

--workload FILE.json replays a workload richer than a trace, through the scheduling cycle the server
uses: nodes, runs of several nodes, arrays with a throttle, dependencies (after), failures and
retries, QOS that preempt (the victim requeued or cancelled). It prints per policy the runs done,
failed and cancelled, the preemptions and attempts, the waits to a first start, the makespan and
the utilization. docs/simulator.md has the format.

--scenario FILE prints the plan one scheduling pass makes of a situation written as text (nodes,
running and pending runs, QOS, limits, switches: the format of internal/sched/scenario, the
scheduler's own golden tests), so a decision seen in production can be replayed and discussed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scenarioFile != "" {
				return runScenario(cmd, scenarioFile, policy)
			}
			if workload != "" {
				return runWorkload(cmd, workload, policy, asJSON)
			}
			if (trace == "") == !history {
				return errors.New("sim: --trace FILE is required (an SWF trace, e.g. from the Parallel Workloads Archive), or --history")
			}
			names := sim.Policies
			if policy != "" {
				if _, err := sim.PolicyByName(policy); err != nil {
					return fmt.Errorf("--policy: %w", err)
				}
				names = []string{policy}
			}
			if procs < 0 || maxJobs < 0 || repeat < 0 {
				return errors.New("sim: --procs, --max-jobs and --repeat take a positive number (0: the default)")
			}
			var all []sim.Job
			p := 0
			if history {
				if db == "" {
					db = filepath.Join(Home(), "server", "berth.db")
				}
				var err error
				if all, p, err = historyJobs(cmd.Context(), db); err != nil {
					return err
				}
				trace = db
			} else {
				tr, err := sim.OpenSWF(trace)
				if err != nil {
					return err
				}
				all, p = tr.Jobs, tr.MaxProcs
			}
			if procs > 0 {
				p = procs
			}
			if p <= 0 && history {
				return fmt.Errorf("sim: %s has no registered nodes: pass --procs N", trace)
			}
			if p <= 0 {
				return fmt.Errorf("sim: %s has no MaxProcs or MaxNodes header line: pass --procs N", trace)
			}
			jobs, drops := sim.Keep(all, p)
			jobs = sim.Repeat(jobs, repeat)
			if maxJobs > 0 && len(jobs) > maxJobs {
				jobs = jobs[:maxJobs]
			}
			var reports []sim.Report
			for _, name := range names {
				pol, _ := sim.PolicyByName(name)
				// The only real clock of a replay: how long it takes.
				start := time.Now()
				res, err := sim.Run(jobs, sim.Config{Procs: p, Policy: pol})
				if err != nil {
					return fmt.Errorf("sim %s with %s: %w", trace, name, err)
				}
				m := res.Metrics()
				reports = append(reports, sim.NewReport(name, m, drops, time.Since(start)))
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				return enc.Encode(reports)
			}
			fmt.Fprintf(out, "%s: %d jobs on %d processors; %s\n", filepath.Base(trace), len(jobs), p, dropLine(drops))
			if err := sim.WriteTable(out, reports); err != nil {
				return err
			}
			if slices.Contains(names, "berth") {
				fmt.Fprintln(out, "berth is the server's default: multifactor priority (age, fairshare, size, expansion factor) plus aging, reservations for the first 16 waiting runs.")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&trace, "trace", "", "SWF trace to replay (.swf or .swf.gz)")
	f.StringVar(&scenarioFile, "scenario", "", "print the plan of one scheduling pass over a scenario file instead")
	f.StringVar(&workload, "workload", "", "replay a JSON workload (arrays, dependencies, retries, preemption) instead of a trace")
	f.BoolVar(&history, "history", false, "replay Berth's own finished runs from the server's database instead of a trace")
	f.StringVar(&db, "db", "", "with --history: the SQLite file (default $BERTH_HOME/server/berth.db)")
	f.StringVar(&policy, "policy", "", "only this policy: "+strings.Join(sim.Policies, ", ")+" (default: all)")
	f.IntVar(&procs, "procs", 0, "processors of the machine (default: the trace's MaxProcs, else MaxNodes)")
	f.IntVar(&maxJobs, "max-jobs", 0, "replay only the first N kept jobs in arrival order (default: all)")
	f.IntVar(&repeat, "repeat", 1, "replay the kept jobs N times back to back, each copy one trace span later (a long workload for timing)")
	f.BoolVar(&asJSON, "json", false, "print JSON: an array with one object per policy")
	return cmd
}

// dropLine says how many jobs were dropped and why.
func dropLine(d sim.Drops) string {
	if d.Total() == 0 {
		return "none dropped"
	}
	var why []string
	for _, r := range []sim.DropReason{sim.DropNoRun, sim.DropNoProcs, sim.DropTooLarge} {
		if d[r] > 0 {
			why = append(why, fmt.Sprintf("%s: %d", r, d[r]))
		}
	}
	return fmt.Sprintf("%d dropped (%s)", d.Total(), strings.Join(why, ", "))
}

// historyJobs reads the finished runs of a Berth database as jobs to replay,
// and the machine's size: the CPUs of its registered nodes.
func historyJobs(ctx context.Context, path string) ([]sim.Job, int, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, 0, fmt.Errorf("sim: --history: %w", err)
	}
	st, err := store.OpenSQLite(ctx, path, store.SQLiteOptions{})
	if err != nil {
		return nil, 0, err
	}
	defer st.Close()
	procs := 0
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		return nil, 0, err
	}
	for _, n := range nodes {
		var info api.NodeInfo
		if json.Unmarshal(n.Info, &info) == nil {
			procs += info.CPUs
		}
	}
	runs, err := st.ListRuns(ctx, store.RunFilter{All: true})
	if err != nil {
		return nil, 0, err
	}
	var jobs []sim.Job
	var submitted []time.Time
	for _, r := range runs {
		if r.StartedAt.IsZero() || r.FinishedAt.IsZero() {
			continue // never ran, or still running
		}
		js, err := st.ListJobs(ctx, r.ID)
		if err != nil {
			return nil, 0, err
		}
		cpus := 0
		for _, j := range js {
			var a api.Alloc
			if json.Unmarshal(j.Alloc, &a) == nil && j.Attempt == js[len(js)-1].Attempt {
				cpus += a.CPUs
			}
		}
		user, _ := st.UserName(ctx, r.UserID)
		run := r.FinishedAt.Sub(r.StartedAt)
		estimate := run
		var t spec.Task
		if json.Unmarshal(r.Spec, &t) == nil && t.MaxDuration != nil {
			estimate = max(run, t.MaxDuration.Std())
		}
		jobs = append(jobs, sim.Job{ID: r.ID, User: user, Run: run, Procs: cpus, Estimate: estimate})
		submitted = append(submitted, r.SubmittedAt)
	}
	// Submit times count from the first submission, as a trace's do.
	if len(submitted) > 0 {
		first := slices.MinFunc(submitted, func(a, b time.Time) int { return a.Compare(b) })
		for i := range jobs {
			jobs[i].Submit = submitted[i].Sub(first)
		}
	}
	return jobs, procs, nil
}

// runWorkload replays a JSON workload under one policy or all.
func runWorkload(cmd *cobra.Command, path, policy string, asJSON bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w, err := sim.ParseWorkload(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	names := sim.Policies
	if policy != "" {
		if _, err := sim.PolicyByName(policy); err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
		names = []string{policy}
	}
	var reports []sim.WorkloadReport
	for _, name := range names {
		pol, _ := sim.PolicyByName(name)
		res, err := sim.ReplayWorkload(w, pol)
		if err != nil {
			return fmt.Errorf("sim %s with %s: %w", path, name, err)
		}
		reports = append(reports, res.Report(name))
	}
	out := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	fmt.Fprintf(out, "%s: %d runs and tasks\n", filepath.Base(path), reports[0].Runs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tdone\tfailed\tcancelled\tpreempted\tattempts\tavg wait (s)\tp99 wait (s)\tmax wait (s)\tmakespan (s)\tutilization\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t%.4f\t\n", r.Policy, r.Done, r.Failed, r.Cancelled, r.Preempted,
			r.Attempts, r.AvgWait, r.P99Wait, r.MaxWait, r.Makespan, r.Utilization)
	}
	return tw.Flush()
}

// runScenario prints the plan of one pass over a scenario file.
func runScenario(cmd *cobra.Command, path, policy string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	text, _, _ := strings.Cut(string(data), "----\n") // a golden file's expected plan is not input
	snap, err := scenario.Parse(text)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if policy != "" {
		if snap.Policy, err = sched.ParsePolicy(policy); err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
	}
	_, err = fmt.Fprint(cmd.OutOrStdout(), scenario.Format(snap, sched.Schedule(snap, scenario.Now), scenario.Now))
	return err
}
