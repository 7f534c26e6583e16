package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/sim"
)

func newSimCmd() *cobra.Command {
	var (
		trace, policy  string
		procs, maxJobs int
		asJSON         bool
	)
	cmd := &cobra.Command{
		Use:   "sim --trace FILE.swf[.gz]",
		Short: "Replay a workload trace through the scheduler and compare policies",
		Long: `Replay a Standard Workload Format trace (Parallel Workloads Archive, gzipped or plain) through
Berth's scheduler on a virtual clock, on one pool of P processors (the trace's MaxProcs header,
else MaxNodes; --procs overrides), and print per policy: jobs, average, 95th-percentile
(nearest rank) and maximum wait, average bounded slowdown (10 s threshold), utilization,
makespan, and the replay's real run time. Without --policy, all of fcfs, easy, conservative and
berth run, one row each. berth is Berth's own policy: until its extra factors exist it is EASY
backfill, so its figures equal easy's. Jobs with run time <= 0 or processors outside 1..P are
dropped and counted. --json prints a JSON array, one object per policy. See docs/simulator.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if trace == "" {
				return errors.New("sim: --trace FILE is required (an SWF trace, e.g. from the Parallel Workloads Archive)")
			}
			names := sim.Policies
			if policy != "" {
				if _, err := sim.PolicyByName(policy); err != nil {
					return fmt.Errorf("--policy: %w", err)
				}
				names = []string{policy}
			}
			if procs < 0 || maxJobs < 0 {
				return errors.New("sim: --procs and --max-jobs take a positive number (0: the default)")
			}
			tr, err := sim.OpenSWF(trace)
			if err != nil {
				return err
			}
			p := tr.MaxProcs
			if procs > 0 {
				p = procs
			}
			if p <= 0 {
				return fmt.Errorf("sim: %s has no MaxProcs or MaxNodes header line: pass --procs N", trace)
			}
			jobs, drops := sim.Keep(tr.Jobs, p)
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
				fmt.Fprintln(out, "berth is EASY with shortest-first backfill; its fairshare and age factors are still to come.")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&trace, "trace", "", "SWF trace to replay (.swf or .swf.gz)")
	f.StringVar(&policy, "policy", "", "only this policy: "+strings.Join(sim.Policies, ", ")+" (default: all)")
	f.IntVar(&procs, "procs", 0, "processors of the machine (default: the trace's MaxProcs, else MaxNodes)")
	f.IntVar(&maxJobs, "max-jobs", 0, "replay only the first N kept jobs in arrival order (default: all)")
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
