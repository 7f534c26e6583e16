package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

func newPsCmd() *cobra.Command {
	var all, verbose, asJSON, watching, noColor bool
	var last int
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List runs, newest first: active ones (the last run when none is), or all with -a; their jobs with -v",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			o := client.ListOptions{All: all || last > 0, Jobs: verbose || asJSON, Limit: last}
			out := cmd.OutOrStdout()
			pal := paletteFor(out, noColor)
			if watching {
				if asJSON {
					return errors.New("--watch and --json do not go together")
				}
				// Ctrl-C ends it, with status 0 (the screen as last drawn).
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return watch(ctx, out, isTTY(out), watchInterval, func(w io.Writer) error {
					tw := newRunTable(w, verbose, time.Now(), pal)
					if err := eachShown(ctx, c, o, tw.add); err != nil {
						return err
					}
					return tw.end()
				})
			}
			// Printed as the runs arrive: a history of any length is listed
			// in bounded memory.
			if asJSON {
				// For scripts: exactly the active runs (no last run).
				list := newJSONList(out)
				if err := c.EachRun(cmd.Context(), o, list.add); err != nil {
					return err
				}
				return list.end()
			}
			tw := newRunTable(out, verbose, time.Now(), pal)
			if err := eachShown(cmd.Context(), c, o, tw.add); err != nil {
				tw.end()
				return err
			}
			return tw.end()
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&all, "all", "a", false, "show finished runs too")
	f.BoolVarP(&verbose, "verbose", "v", false, "show each run's jobs")
	f.IntVarP(&last, "last", "n", 0, "show the last N runs, finished or not")
	f.BoolVarP(&watching, "watch", "w", false, "redraw every 2 s until Ctrl-C (in place on a terminal; elsewhere each change, after a blank line)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&noColor, "no-color", false, "no colour (the default off a terminal or with NO_COLOR set)")
	return cmd
}

// eachShown is the runs `berth ps` shows, newest first, as dstack's ps
// shows them: the active ones, or, when none is active, the last run, so
// that a finished run's end is seen; with -a or -n, what they select.
func eachShown(ctx context.Context, c *client.Client, o client.ListOptions, fn func(*api.Run) error) error {
	n := 0
	err := c.EachRun(ctx, o, func(r *api.Run) error { n++; return fn(r) })
	if err != nil || n > 0 || o.All || o.Limit > 0 {
		return err
	}
	o.All, o.Limit = true, 1
	return c.EachRun(ctx, o, fn)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runTable prints runs as `berth ps` shows them, as they come.
type runTable struct {
	t       *streamTable
	verbose bool
	now     time.Time
	pal     palette
}

func newRunTable(w io.Writer, verbose bool, now time.Time, pal palette) *runTable {
	t := newStreamTable(w)
	t.row("NAME", "ID", "RESOURCES", pal.plain("STATUS"), "REASON", "SUBMITTED", "EXIT")
	return &runTable{t: t, verbose: verbose, now: now, pal: pal}
}

// end prints what is held.
func (rt *runTable) end() error { return rt.t.flush() }

func (rt *runTable) add(r *api.Run) error {
	reason := orDash(r.Reason)
	name, status := r.Name, r.Status
	switch {
	case r.Status == api.StatusScheduled && r.EstimatedStart != nil:
		reason = "next " + r.EstimatedStart.Local().Format("2006-01-02 15:04")
	case r.EstimatedStart != nil:
		reason += " (start " + r.EstimatedStart.Local().Format("15:04:05") + ")"
	}
	if a := r.Array; a != nil {
		// The tasks not created yet fold into one line, as squeue's
		// NAME_[7-100%10]; created tasks are listed as runs.
		if a.NWaiting == 0 {
			name += "_[]"
		} else {
			name += "_[" + a.Waiting
			if a.Throttle > 0 {
				name += fmt.Sprintf("%%%d", a.Throttle)
			}
			name += "]"
			status = api.StatusSubmitted // the line stands for the waiting tasks
			if a.Throttle > 0 && reason == "-" {
				reason = "JobArrayTaskLimit"
			}
		}
	}
	if len(r.BlockedBy) > 0 {
		ids := make([]string, len(r.BlockedBy))
		for i, id := range r.BlockedBy {
			ids[i] = fmt.Sprint(id)
		}
		reason += " behind " + strings.Join(ids, ",")
	}
	rt.t.row(name, strconv.FormatInt(r.ID, 10), orDash(r.Resources), rt.pal.status(string(status)), reason, ago(rt.now, r.SubmittedAt), exitText(r.ExitCode))
	if rt.verbose {
		for _, j := range r.Jobs {
			rt.t.row(fmt.Sprintf("  job %d", j.Num), strconv.FormatInt(j.ID, 10), allocText(j.Alloc, j.Node), rt.pal.status(string(j.Status)), orDash(j.Reason), ago(rt.now, j.SubmittedAt), exitText(j.ExitCode))
		}
	}
	return rt.t.err
}

// jsonList writes a list as printJSON writes a slice, an element at a
// time.
type jsonList struct {
	w   io.Writer
	n   int
	err error
}

func newJSONList(w io.Writer) *jsonList { return &jsonList{w: w} }

func (l *jsonList) add(v *api.Run) error {
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n  "
	if l.n == 0 {
		sep = "[\n  "
	}
	l.n++
	_, l.err = io.WriteString(l.w, sep+string(b))
	return l.err
}

func (l *jsonList) end() error {
	if l.err != nil {
		return l.err
	}
	end := "\n]\n"
	if l.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(l.w, end)
	return err
}

func allocText(a api.Alloc, node string) string {
	if node == "" {
		return "-"
	}
	s := fmt.Sprintf("%s: %dxCPU", node, a.CPUs)
	if a.Memory > 0 {
		s += ", " + spec.Bytes(a.Memory).Approx()
	}
	if len(a.GPUs) > 0 {
		g := make([]string, len(a.GPUs))
		for i, x := range a.GPUs {
			g[i] = fmt.Sprint(x)
		}
		s += ", GPU " + strings.Join(g, ",")
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func exitText(c *int) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprint(*c)
}

// ago says how long before now t was, as dstack prints it.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 10*time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%d secs ago", int(d.Seconds()))
	case d < time.Hour:
		return plural(int(d.Minutes()), "min")
	case d < 24*time.Hour:
		return plural(int(d.Hours()), "hour")
	}
	return t.Local().Format("2006-01-02 15:04")
}

func plural(n int, unit string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s ago", unit)
	}
	return fmt.Sprintf("%d %ss ago", n, unit)
}

func newLogsCmd() *cobra.Command {
	var follow bool
	var job int
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print a run's output (-f follows it until the run ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			run, err := c.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			jobs := len(run.Jobs)
			if job >= 0 {
				jobs = 1 // one job: its output as it is
			}
			pw := newPrefixer(cmd.OutOrStdout(), cmd.ErrOrStderr(), jobs)
			_, err = c.Logs(cmd.Context(), fmt.Sprint(run.ID), client.LogOptions{Follow: follow, Job: job, Reconnect: 2 * time.Minute}, pw.write)
			pw.flush()
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.ValidArgsFunction = completeRuns(false)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the run ends")
	cmd.Flags().IntVar(&job, "job", -1, "only this job (node rank) of a multi-node run")
	return cmd
}

func newStopCmd() *cobra.Command {
	var abort, yes bool
	cmd := &cobra.Command{
		Use:   "stop RUN... (an array's tasks: NAME_7, NAME_[3-5,9])",
		Short: "Stop runs: SIGTERM, a grace period, then SIGKILL (--abort: SIGKILL at once)",
		Long: `Stop runs, each given by ID or by name. A name means the active run of that name (a
schedule, for a scheduled configuration), never a finished one. stop does not ask for
confirmation; -y is accepted for dstack's habits.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			var refs []string
			for _, ref := range args {
				more, err := expandTaskRange(ref)
				if err != nil {
					return err
				}
				refs = append(refs, more...)
			}
			for _, ref := range refs {
				r, err := c.Stop(cmd.Context(), ref, abort)
				if err != nil {
					return fmt.Errorf("stop %s: %w", ref, err)
				}
				note := ""
				if r.Status.Finished() && r.Reason != api.ReasonTerminatedByUser && r.Reason != api.ReasonAbortedByUser {
					note = " (it had ended: nothing to stop)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Run %s (ID %d): %s%s\n", r.Name, r.ID, r.Status, note)
			}
			return nil
		},
	}
	cmd.ValidArgsFunction = completeRuns(true)
	cmd.Flags().BoolVarP(&abort, "abort", "x", false, "kill at once, without a grace period")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (stop never asks; accepted as dstack's stop accepts it)")
	return cmd
}

func newFleetCmd() *cobra.Command {
	var asJSON, watching, noColor bool
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "List the cluster's nodes and their free and total resources",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			pal := paletteFor(cmd.OutOrStdout(), noColor)
			if watching {
				if asJSON {
					return errors.New("--watch and --json do not go together")
				}
				out := cmd.OutOrStdout()
				return watch(cmd.Context(), out, isTTY(out), watchInterval, func(w io.Writer) error {
					nodes, err := c.Nodes(cmd.Context())
					if err != nil {
						return err
					}
					return printFleet(w, nodes, pal)
				})
			}
			nodes, err := c.Nodes(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), nodes)
			}
			if err := printFleet(cmd.OutOrStdout(), nodes, pal); err != nil {
				return err
			}
			fleets, err := c.Fleets(cmd.Context())
			if err != nil {
				return err
			}
			return printSSHFleets(cmd.OutOrStdout(), fleets)
		},
	}
	cmd.AddCommand(newFleetDeleteCmd())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&watching, "watch", "w", false, "redraw every 2 s until Ctrl-C (in place on a terminal; elsewhere each change, after a blank line)")
	cmd.Flags().BoolVar(&noColor, "no-color", false, "no colour (the default off a terminal or with NO_COLOR set)")
	return cmd
}

// printFleet prints the nodes as `berth fleet` shows them.
func printFleet(w io.Writer, nodes []api.Node, pal palette) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FLEET\tNODE\tADDRESS\t"+pal.plain("STATUS")+"\tCPU (free/total)\tMEMORY (free/total)\tGPU (free/total)\tJOBS\tLIMITS\tCONTAINERS\tRUN AS\tREASON")
	nodes = slices.Clone(nodes)
	// A container engine's error (Docker's runs to 250 characters) is
	// said once, below the table, with the nodes that gave it.
	var errs []string
	byErr := map[string][]string{}
	for i, n := range nodes {
		if strings.HasPrefix(n.Containers, api.ContainersNone+" (") {
			e := strings.TrimSuffix(strings.TrimPrefix(n.Containers, api.ContainersNone+" ("), ")")
			if byErr[e] == nil {
				errs = append(errs, e)
			}
			byErr[e] = append(byErr[e], n.Name)
			nodes[i].Containers = api.ContainersNone + " (below)"
		}
	}
	defer func() {
		for _, e := range errs {
			fmt.Fprintf(w, "\nNo container engine on %s: %s\n", strings.Join(byErr[e], ", "), e)
		}
	}()
	for _, n := range nodes {
		gpu := "-"
		if len(n.GPUs) > 0 {
			gpu = fmt.Sprintf("%d/%d %s", len(n.GPUs)-n.AllocGPUs, len(n.GPUs), gpuModel(n.GPUs))
		}
		jobs := strconv.Itoa(n.Jobs)
		if n.Blocks > 1 {
			jobs += fmt.Sprintf(" (blocks %d/%d busy)", n.BusyBlocks, n.Blocks)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(n.Fleet), n.Name, n.Addr, pal.status(n.Status), n.CPUs-n.AllocCPUs, n.CPUs,
			spec.Bytes(n.Memory-n.AllocMemory).Approx(), spec.Bytes(n.Memory).Approx(), gpu, jobs, limitsText(n), orDash(n.Containers), orDash(n.RunAs), fleetReason(n))
	}
	return tw.Flush()
}

// limitsText says what the kernel enforces on a node's jobs, as its agent
// reported it ("memory, cpu (cgroup v1)", "none (why)").
func limitsText(n api.Node) string {
	if n.Limits != "" {
		return n.Limits
	}
	return orDash(n.Cgroups) // an agent from before limits were reported
}

func gpuModel(gs []api.GPU) string {
	g := gs[0]
	s := g.Name
	if s == "" {
		s = "GPU"
	}
	if g.Memory > 0 {
		s += ":" + spec.Bytes(g.Memory).String()
	}
	return s
}

// completeRuns offers run names to the shell: active ones, or all.
func completeRuns(activeOnly bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		c, err := newClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		runs, err := c.Runs(cmd.Context(), client.ListOptions{All: !activeOnly, Limit: 200})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		seen := map[string]bool{}
		var names []string
		for _, r := range runs {
			if strings.HasPrefix(r.Name, prefix) && !seen[r.Name] {
				seen[r.Name] = true
				names = append(names, r.Name+"\t"+string(r.Status))
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

func newSprioCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sprio",
		Short: "Show each pending run's priority, factor by factor (weighted, as Slurm's sprio)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ps, err := c.Priorities(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), ps)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "ID\tNAME\tUSER\tPRIORITY\tAGE\tFAIRSHARE\tJOBSIZE\tPARTITION\tQOS\tEXPANSION\tOWN\tNICE\t")
			for _, p := range ps {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", p.RunID, p.Name, p.User, p.Priority, p.Age, p.Fairshare, p.JobSize, p.Partition, p.QOS, p.Expansion, p.Own, p.Nice)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// taskRange matches NAME_[INDICES]: several tasks of an array at once.
var taskRange = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.+)_\[(.+)\]$`) })

// expandTaskRange turns NAME_[3-5,9] into NAME_3, NAME_4, NAME_5, NAME_9;
// any other reference is itself.
func expandTaskRange(ref string) ([]string, error) {
	m := taskRange().FindStringSubmatch(ref)
	if m == nil {
		return []string{ref}, nil
	}
	as, err := spec.ParseArray(m[2])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	var out []string
	for i := range as.All() {
		out = append(out, fmt.Sprintf("%s_%d", m[1], i))
	}
	return out, nil
}
