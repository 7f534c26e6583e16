package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// watchEvery is how often `berth metrics --watch` refreshes.
const watchEvery = 2 * time.Second

func newMetricsCmd() *cobra.Command {
	var watch, asJSON bool
	var history int
	cmd := &cobra.Command{
		Use:   "metrics RUN",
		Short: "Show a run's CPU, memory and GPU use, job by job (--watch refreshes every 2 s)",
		Long: `Show the latest metrics of each job of a run, as its node's agent sampled them: CPU use as a
percentage of the job's allocated CPUs, memory in use (working set) against the job's limit, and for
each GPU of the job its memory and utilization. --json prints what the server keeps, with each
job's recent history (--history N samples; -1: all).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			if !asJSON {
				history = 0
			}
			tty := false
			if f, ok := out.(*os.File); ok {
				_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
				tty = err == nil
			}
			for first := true; ; first = false {
				m, err := c.RunMetrics(ctx, args[0], client.MetricsOptions{History: history})
				if err != nil {
					if !first && ctx.Err() != nil {
						return nil
					}
					return err
				}
				switch {
				case asJSON:
					err = printJSON(out, m)
				default:
					if watch && tty {
						fmt.Fprint(out, "\033[H\033[2J") // home, clear: a live table
					} else if !first {
						fmt.Fprintln(out)
					}
					err = printMetrics(out, m)
				}
				if err != nil || !watch {
					return err
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(watchEvery):
				}
			}
		},
	}
	cmd.ValidArgsFunction = completeRuns(false)
	f := cmd.Flags()
	f.BoolVarP(&watch, "watch", "w", false, "refresh every 2 seconds until interrupted")
	f.BoolVar(&asJSON, "json", false, "print JSON, with each job's history")
	f.IntVar(&history, "history", 60, "with --json: samples of history per job (-1: all the server keeps)")
	return cmd
}

// printMetrics writes the latest sample of each job, as dstack metrics
// does: one line per job (a multi-node run's own line first), and one more
// per GPU beyond the first.
func printMetrics(w io.Writer, m *api.RunMetrics) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNODE\tSTATUS\tCPU\tMEMORY\tGPU")
	multi := len(m.Jobs) > 1
	if multi || len(m.Jobs) == 0 {
		fmt.Fprintf(tw, "%s\t\t%s\t\t\t\n", m.Name, m.Status)
	}
	for _, j := range m.Jobs {
		name := m.Name
		if multi {
			name = fmt.Sprintf("  job %d", j.JobNum)
		}
		cpu, mem, gpus := "-", "-", []string{"-"}
		if s := j.Latest; s != nil {
			cpu, mem = cpuText(s), memoryText(s)
			if len(s.GPUs) > 0 {
				gpus = gpus[:0]
				for _, g := range s.GPUs {
					gpus = append(gpus, gpuText(g))
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, orDash(j.Node), j.Status, cpu, mem, gpus[0])
		for _, g := range gpus[1:] {
			fmt.Fprintf(tw, "\t\t\t\t\t%s\n", g)
		}
	}
	if len(m.Jobs) == 0 && !m.Status.Finished() {
		fmt.Fprintln(tw, "(no samples yet)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Rows with empty cells at the end would end in blanks.
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if _, err := fmt.Fprintln(w, strings.TrimRight(l, " ")); err != nil {
			return err
		}
	}
	return nil
}

func cpuText(s *api.JobSample) string {
	if s.CPUPercent == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", *s.CPUPercent)
}

func memoryText(s *api.JobSample) string {
	if s.MemoryUsed == 0 && s.MemoryLimit == 0 {
		return "-"
	}
	t := spec.Bytes(s.MemoryUsed).Approx()
	if s.MemoryLimit > 0 {
		t += "/" + spec.Bytes(s.MemoryLimit).Approx()
	}
	return t
}

func gpuText(g api.GPUSample) string {
	return fmt.Sprintf("gpu=%d mem=%s/%s util=%.0f%%", g.Index, spec.Bytes(g.MemoryUsed).Approx(), spec.Bytes(g.MemoryTotal).Approx(), g.Util)
}
