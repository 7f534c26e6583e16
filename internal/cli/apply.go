package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
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
	"github.com/berth-hq/berth/internal/pack"
	"github.com/berth-hq/berth/internal/spec"
)

func newApplyCmd() *cobra.Command {
	var (
		file                       string
		yes, detach, dryRun, force bool
		project                    string
		over                       applyOverrides
		fleetOpts                  fleetApplyOpts
		noRepo                     bool
		maxUpload                  int64 = defaultMaxUpload
	)
	cmd := &cobra.Command{
		Use:   "apply [-f FILE]",
		Short: "Submit a configuration: show the plan, confirm, run it and stream its output",
		Long: `Submit a run from a dstack-style YAML configuration (type: task). apply shows the plan (which
nodes could run it now), asks for confirmation (-y skips it), then streams the run's output and
exits with the run's exit code. Ctrl-C detaches without stopping the run; stop it with berth stop.
--dry-run validates and shows the plan without submitting, so configurations can be checked in CI.
A type: fleet with ssh_config installs the agent on each host over SSH: the plan lists each host,
then apply prints each host's progress; a type: fleet with nodes: is a backend fleet whose nodes
the server creates from its providers' offers: the plan lists the offers and how many nodes it
creates now (see docs/configuration.md, Fleets).
Without -f, apply reads .dstack.yml (or .dstack.yaml, .berth.yml, .berth.yaml) in the working
directory. --gpu, --cpu, --memory, --disk, --max-duration, --fleet, --retry-duration, --name and
--env override the file, as dstack apply's options do.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			var err error
			if file == "" {
				if file, err = defaultConfig("."); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
			}
			limits, err := submitLimits(os.Getenv)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("read configuration: %w", err)}
			}
			if spec.ConfigType(data) == "volume" {
				return applyVolumeFile(cmd.Context(), out, errw, cmd.InOrStdin(), file, data, yes, dryRun, project) // volume.go
			}
			if spec.ConfigType(data) == "fleet" {
				fleetOpts.yes, fleetOpts.dryRun, fleetOpts.project, fleetOpts.detach = yes, dryRun, project, detach
				return applyFleetFile(cmd.Context(), out, errw, cmd.InOrStdin(), file, data, fleetOpts)
			}
			t, err := spec.ParseLimits(file, data, limits)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if project != "" {
				t.Project = project
			}
			if err := over.apply(t, os.LookupEnv); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if err := t.Env.Resolve(os.LookupEnv); err != nil {
				if !dryRun {
					return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", file, err)}
				}
				fmt.Fprintf(errw, "warning: %s: %v\n", file, err)
			}
			if err := t.ValidateLimits(limits); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if noRepo {
				t.Repos = nil
			}
			carry, err := packRun(t, file, maxUpload) // apply_carry.go
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			ctx := cmd.Context()
			req := api.SubmitRequest{Spec: t, Source: file}
			c, err := newClient()
			var plan *api.Plan
			if err == nil {
				plan, err = c.Plan(ctx, req)
			}
			if err != nil {
				var apiErr *client.APIError
				if dryRun && !errors.As(err, &apiErr) {
					// Checking a configuration needs no server (CI): say so.
					fmt.Fprintf(errw, "%s: the configuration is valid; no plan without a server (%v)\n", file, err)
					return nil
				}
				return placeError(err, file, data)
			}
			printPlan(errw, file, plan)
			var decision replaceDecision
			if plan.Active != nil && t.IsService() {
				serviceUpdate(errw, plan.Active, t) // service.go: the server rolls its replicas
			} else if plan.Active != nil {
				decision = decideReplace(errw, plan.Active, t, yes, force)
			}
			if dryRun || decision.done {
				for _, x := range carry {
					if dryRun {
						fmt.Fprintf(errw, "%s: %d files, %s (--dry-run: not uploaded)\n", x.what, x.arc.Files, pack.Size(int64(len(x.arc.Data))))
					}
				}
				return nil
			}
			label := t.Name
			if label == "" {
				label = "from " + file
			}
			prompt := cmp.Or(decision.prompt, fmt.Sprintf("Submit the run %s? [y/n]: ", label))
			if !yes && !confirm(cmd.InOrStdin(), errw, prompt) {
				fmt.Fprintln(errw, "Nothing submitted.")
				return &ExitError{Code: 1}
			}
			if decision.replace {
				if err := stopAndWait(ctx, c, errw, plan.Active); err != nil {
					return err
				}
			}
			if _, err := upload(ctx, c, carry, errw); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			req.UniqueName = true
			run, err := c.Submit(ctx, req)
			if err != nil {
				return placeError(err, file, data)
			}
			if t.IsService() {
				printService(out, c, t, run) // service.go
				return nil
			}
			if t.Schedule != nil {
				return scheduled(ctx, c, out, run)
			}
			if detach {
				fmt.Fprintf(out, "Submitted run %s (ID %d)\n", run.Name, run.ID)
				return nil
			}
			fmt.Fprintf(errw, "Submitted run %s (ID %d); streaming its output (Ctrl-C detaches, the run goes on)\n", run.Name, run.ID)
			detachPorts := attachOnStart(ctx, c, t, run, errw) // apply_attach.go
			defer detachPorts()
			// An array's progress below its output, on a terminal only.
			out, errw, stopProgress := arrayProgress(ctx, c, run, t, out, errw)
			defer stopProgress()
			return attach(ctx, c, run, t.JobCount(), out, errw)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "the configuration file")
	f.StringVarP(&project, "project", "P", "", "the project the run goes to, one of yours (overrides the file's project:; default: your default project)")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	f.BoolVarP(&detach, "detach", "d", false, "print the run's name and ID and return")
	f.BoolVar(&dryRun, "dry-run", false, "validate and show the plan without submitting")
	f.BoolVar(&force, "force", false, "with -y, replace an active run of the same name even when nothing changed")
	over.register(f)
	f.BoolVar(&fleetOpts.allOrNothing, "all-or-nothing", false, "a fleet: when any host fails, uninstall every host")
	f.StringVar(&fleetOpts.serverURL, "server-url", "", "a fleet: the URL its agents reach the server at (default: the one this client uses)")
	f.BoolVar(&noRepo, "no-repo", false, "carry no repo: ignore the configuration's repos")
	f.Var(sizeValue{&maxUpload}, "max-upload", "the most content one repo or files entry may hold (e.g. 500MB)")
	return cmd
}

// placeError shows the server's refusal of a field of the configuration
// (a secret the project lacks) at the field's line in file, as the
// client's own checks are shown.
func placeError(err error, file string, data []byte) error {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Field == "" {
		return err
	}
	line, col, ok := spec.Locate(data, apiErr.Field)
	_, msg, found := strings.Cut(apiErr.Message, apiErr.Field+": ")
	if !ok || !found {
		return err
	}
	return &spec.Error{File: file, Line: line, Col: col, Field: apiErr.Field, Msg: msg}
}

func printPlan(w io.Writer, file string, p *api.Plan) {
	name := p.Name
	if name == "" {
		name = "(a generated name)"
	}
	fmt.Fprintf(w, " Configuration  %s\n Run            %s\n Resources      %s\n", file, name, p.Resources)
	if p.Allocated != "" {
		fmt.Fprintf(w, " Allocated      %s\n", p.Allocated)
	}
	fmt.Fprintf(w, " Nodes          %d\n\n", p.Nodes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, " #\tNODE\tRESOURCES (free/total)\tFITS")
	for i, r := range p.Rows {
		fits := r.Fits
		if r.Why != "" {
			fits += " (" + r.Why + ")"
		}
		fmt.Fprintf(tw, " %d\t%s\t%s\t%s\n", i+1, r.Node, r.Resources, fits)
	}
	tw.Flush()
	if len(p.Rows) == 0 {
		fmt.Fprintln(w, " No nodes have joined yet: the run will wait until one that fits does.")
	} else if !p.FitsNow {
		fmt.Fprintln(w, " No node can start it now: the run will wait in the queue.")
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, " Note: %s\n", n)
	}
	printPlanOffers(w, p.Offers) // offer.go
	if len(p.Unsupported) > 0 {
		fmt.Fprintf(w, "\n Not supported yet (parsed and stored, no effect): %s\n", strings.Join(p.Unsupported, ", "))
	}
	fmt.Fprintln(w)
}

func confirm(in io.Reader, w io.Writer, prompt string) bool {
	fmt.Fprint(w, prompt)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(w)
		return false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// attach streams the output of the run's jobs until it ends and exits with
// its code; Ctrl-C detaches and leaves the run going.
func attach(ctx context.Context, c *client.Client, run *api.Run, jobs int, out, errw io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	pw := newPrefixer(out, errw, jobs)
	// The run's state changes go to stderr beside its output, as dstack's
	// attached apply shows them.
	sctx, stopStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() { defer close(statusDone); watchStatus(sctx, c, run.ID, &lockedWriter{w: errw, mu: &pw.mu}) }()
	end, err := c.Logs(ctx, fmt.Sprint(run.ID), client.LogOptions{Follow: true, Job: -1, Reconnect: 2 * time.Minute}, pw.lockedWrite)
	stopStatus()
	<-statusDone
	pw.flush()
	if ctx.Err() != nil {
		fmt.Fprintf(errw, "\nDetached from run %s; it goes on. Stop it with: berth stop %s\n", run.Name, run.Name)
		return nil
	}
	if err != nil {
		return err
	}
	return runExit(errw, end)
}

// runExit turns a final run into the command's exit status.
func runExit(errw io.Writer, r *api.Run) error {
	if r.Status == api.StatusDone {
		return nil
	}
	code := 1
	if r.ExitCode != nil && *r.ExitCode > 0 && *r.ExitCode < 256 {
		code = *r.ExitCode
	}
	msg := fmt.Sprintf("run %s %s", r.Name, r.Status)
	if r.Reason != "" {
		msg += " (" + r.Reason + ")"
	}
	if r.ExitCode != nil {
		msg += fmt.Sprintf(", exit code %d", *r.ExitCode)
	}
	return &ExitError{Code: code, Err: errors.New(msg)}
}

// prefixer writes job output. When a run has several jobs, each line gets
// its job's rank, "node-R | ", R padded to the width of the highest rank,
// as docker compose logs does; a job's line is written whole, once its
// newline came, so lines of different jobs never mix.
type prefixer struct {
	mu        sync.Mutex // beside the status lines of watchStatus
	out, errw io.Writer
	width     int                // of the highest rank; 0: one job, output passes through
	partial   map[partKey][]byte // an unfinished line per job and stream
}

type partKey struct {
	job    int
	stderr bool
}

func newPrefixer(out, errw io.Writer, jobs int) *prefixer {
	width := 0
	if jobs > 1 {
		width = len(strconv.Itoa(jobs - 1))
	}
	return &prefixer{out: out, errw: errw, width: width, partial: map[partKey][]byte{}}
}

func (p *prefixer) writer(stderr bool) io.Writer {
	if stderr {
		return p.errw
	}
	return p.out
}

func (p *prefixer) lockedWrite(e api.LogEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write(e)
}

func (p *prefixer) write(e api.LogEntry) {
	key := partKey{job: e.JobNum, stderr: e.Stream == "stderr"}
	w := p.writer(key.stderr)
	if p.width == 0 {
		_, _ = w.Write(e.Data)
		return
	}
	buf := append(p.partial[key], e.Data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(w, "node-%-*d | %s", p.width, key.job, buf[:i+1])
		buf = buf[i+1:]
	}
	p.partial[key] = buf
}

// flush ends every unfinished line, in rank order.
func (p *prefixer) flush() {
	keys := slices.SortedFunc(maps.Keys(p.partial), func(a, b partKey) int {
		return cmp.Or(cmp.Compare(a.job, b.job), cmp.Compare(boolInt(a.stderr), boolInt(b.stderr)))
	})
	for _, key := range keys {
		if buf := p.partial[key]; len(buf) > 0 {
			fmt.Fprintf(p.writer(key.stderr), "node-%-*d | %s\n", p.width, key.job, buf)
		}
	}
	clear(p.partial)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
