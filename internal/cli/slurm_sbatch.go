package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/spec"
)

// slurmVersion is what the commands' --version prints: the Slurm release
// whose behaviour they follow.
const slurmVersion = "slurm 22.05.8"

const sbatchUsage = `Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]

Berth's sbatch: Slurm 22.05's options and #SBATCH directives, submitted as a
Berth run (see docs/coming-from-slurm.md for what each option maps to).

Parallel run options:
  -a, --array=indexes         job array index values
  -A, --account=name          charge job to specified account
      --begin=time            defer job until HH:MM MM/DD/YY
      --comment=name          arbitrary comment
  -c, --cpus-per-task=ncpus   number of cpus required per task
  -d, --dependency=type:jobid[:time] defer job until condition on jobid is satisfied
  -D, --chdir=directory       set working directory for batch script
  -e, --error=err             file for batch script's standard error
      --export[=names]        specify environment variables to export
  -H, --hold                  submit job in held state
  -i, --input=in              file for batch script's standard input
  -J, --job-name=jobname      name of job
      --kill-on-invalid-dep=<yes|no> terminate job if invalid dependency
  -n, --ntasks=ntasks         number of tasks to run
      --nice[=value]          decrease scheduling priority by value
      --no-requeue            if set, do not permit the job to be requeued
      --ntasks-per-node=n     number of tasks to invoke on each node
  -N, --nodes=N               number of nodes on which to run (N = min[-max])
      --open-mode={append|truncate} output and error file open mode
  -o, --output=out            file for batch script's standard output
  -p, --partition=partition   partition requested
      --parsable              outputs only the jobid and cluster name (if present),
                              separated by semicolon, only on successful submission.
      --priority=value        set the priority of the job to value
  -q, --qos=qos               quality of service
      --requeue               if set, permit the job to be requeued
      --signal=[[R][B]:]num[@time] send signal when time limit within time seconds
  -t, --time=minutes          time limit
      --test-only             validate batch script but do not submit
  -W, --wait                  wait for completion of submitted job
      --wrap[=command string] wrap command string in a sh script and submit

Constraint options:
      --mem=MB                minimum amount of real memory
      --mincpus=n             minimum number of logical processors (threads) per node
      --exclusive             allocate nodes in exclusive mode

GPU scheduling options:
      --cpus-per-gpu=n        number of CPUs required per allocated GPU
  -G, --gpus=n                count of GPUs required for the job
      --gpus-per-node=n       number of GPUs required per allocated node
      --gpus-per-task=n       number of GPUs required per spawned task
      --gres=list             required generic resources
      --mem-per-cpu=MB        maximum amount of real memory per allocated cpu
      --mem-per-gpu=n         real memory required per allocated GPU

Help options:
  -h, --help                  show this help message
      --usage                 display brief usage message

Other options:
  -V, --version               output version information and exit
`

func runSbatch(e *slurmEnv, args []string) error {
	cmd, err := slurm.ParseSbatchArgs(args)
	if err != nil {
		return err
	}
	switch {
	case cmd.Help:
		io.WriteString(e.stdout, sbatchUsage)
		return nil
	case cmd.Usage:
		fmt.Fprintln(e.stdout, "Usage: sbatch [-N nnodes] [-n ntasks] [-c ncpus] [-t minutes] [-p partition] [-J jobname] [-o out] [-e err] [--array=indexes] [--dependency=type:jobid] [--wrap=command] executable [args...]")
		return nil
	case cmd.Version:
		fmt.Fprintln(e.stdout, slurmVersion)
		return nil
	}
	var script []byte
	name := cmd.Script
	switch {
	case cmd.Wrap != "":
		script = slurm.WrapScript(cmd.Wrap)
	case cmd.Script != "":
		p := cmd.Script
		if !filepath.IsAbs(p) {
			p = filepath.Join(e.cwd, p)
		}
		if script, err = os.ReadFile(p); err != nil {
			return slurmFail(1, "sbatch: error: Unable to open file "+cmd.Script)
		}
	default:
		if script, err = io.ReadAll(e.stdin); err != nil {
			return slurmFail(1, "sbatch: error: unable to read script from stdin: "+err.Error())
		}
	}
	if err := slurm.CheckScript(script); err != nil {
		return err
	}
	ctx := slurm.SubmitContext{Cwd: e.cwd, Now: e.now(), Env: e.environ(), ScriptName: name}
	job, err := slurm.BuildBatchJob(cmd, script, ctx)
	if err != nil {
		return err
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	var nodes []api.Node
	if sbatchNeedsNodes(job) {
		if nodes, err = c.Nodes(e.ctx); err != nil {
			return submitError(err)
		}
	}
	s := currentSubmitter(e)
	if s.limits, err = submitLimits(e.getenv); err != nil {
		return slurmFail(1, "sbatch: error: "+err.Error())
	}
	known := func(id uint32) bool {
		_, err := c.Run(e.ctx, strconv.FormatUint(uint64(id), 10))
		return err == nil
	}
	for i := range job.Components {
		spreadTasks(&job.Components[i], nodes)
	}
	var partitions []string
	if nodes != nil {
		partitions = knownPartitions(nodes)
	}
	br, err := slurmconv.BuildBatch(job, name, s.conv(), known, partitions)
	if err != nil {
		return err
	}
	if !gpusAvailable(br.Req.Spec, nodes) {
		return slurmFail(1, "sbatch: error: Batch job submission failed: Requested node configuration is not available")
	}
	if reason := unknownNodesOrFeatures(br.Req.Spec, nodes); reason != "" {
		return slurm.SubmitFailed(reason)
	}
	o := br.Opt
	if o.TestOnly {
		return testOnly(e, c, br, nodes)
	}
	run, err := c.Submit(e.ctx, br.Req)
	if err != nil {
		return submitError(err)
	}
	if !o.Quiet || o.Parsable {
		io.WriteString(e.stdout, slurm.SubmittedMessage(u32(run.ID), o.Parsable, ""))
	}
	if !o.Wait {
		return nil
	}
	end, err := waitRun(e.ctx, c, run.ID)
	if err != nil {
		return err
	}
	ended := []api.Run{*end}
	if end.Array != nil {
		// An array's exit status is its tasks' highest.
		v, err := fetchView(e, "sbatch", runSelection{all: true, ids: []int64{run.ID}})
		if err != nil {
			return err
		}
		ended = v.Runs
	}
	if code := waitExit(ended); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// knownPartitions are the partitions a job may name: the default one, every
// fleet a node belongs to, and those of the policy file when this machine
// has it (the server's own, for a client running beside it).
func knownPartitions(nodes []api.Node) []string {
	out := []string{slurmconv.DefaultPartition}
	for _, n := range nodes {
		if n.Fleet != "" {
			out = append(out, n.Fleet)
		}
	}
	p, err := policy.Load(filepath.Join(Home(), "policy.yml"))
	if err == nil {
		for name, f := range p.Fleets {
			out = append(out, name)
			out = append(out, f.Partitions...)
		}
	}
	return out
}

// slurmReasonRE finds the Slurm wording the server adds to its refusals
// ("… (Slurm: Invalid qos specification)").
var slurmReasonRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Slurm: ((?:[^()]|\([^()]*\))*)\)`) })

// apiMessage is the server's refusal without its "server: invalid
// request: " prefix.
func apiMessage(e *client.APIError) string {
	return strings.TrimPrefix(e.Message, "server: invalid request: ")
}

// submitError is sbatch's report of a submission the server refused.
func submitError(err error) error {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		msg := apiMessage(apiErr)
		if m := slurmReasonRE().FindStringSubmatch(msg); m != nil {
			return &slurm.CommandError{Stderr: []string{"sbatch: error: " + msg, "sbatch: error: Batch job submission failed: " + m[1]}, ExitCode: 1}
		}
		return slurm.SubmitFailed(msg)
	}
	return slurmFail(1, "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure): "+err.Error())
}

// testOnly is --test-only: where and when the job would start, as
// slurm_job_will_run prints it, from the server's plan; nothing is stored.
func testOnly(e *slurmEnv, c *client.Client, br *slurmconv.Batch, nodes []api.Node) error {
	plan, err := c.Plan(e.ctx, br.Req)
	if err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) {
			return slurmFail(1, "allocation failure: "+apiMessage(apiErr))
		}
		return submitError(err)
	}
	var now, later []string
	for _, r := range plan.Rows {
		switch r.Fits {
		case "now":
			now = append(now, r.Node)
		case "later":
			later = append(later, r.Node)
		}
	}
	n := max(plan.Nodes, 1)
	start := e.now()
	hosts := now
	if len(now) < n {
		hosts = append(append([]string(nil), now...), later...)
		if len(hosts) < n {
			return slurmFail(1, "allocation failure: Requested node configuration is not available")
		}
		// It waits: it starts when the runs ahead of it are expected to end.
		if runs, err := c.Runs(e.ctx, client.ListOptions{}); err == nil {
			for _, r := range runs {
				if r.EstimatedStart != nil && r.EstimatedStart.After(start) {
					start = *r.EstimatedStart
				}
			}
		}
	}
	hosts = hosts[:n]
	sort.Strings(hosts)
	fleet := map[string]string{}
	for _, nd := range nodes {
		fleet[nd.Name] = nd.Fleet
	}
	part := slurmconv.DefaultPartition
	if t := br.Req.Spec; len(t.Fleets) > 0 {
		part = t.Fleets[0]
		if f := fleet[hosts[0]]; f != "" && contains(t.Fleets, f) {
			part = f
		}
	}
	_, cpus, _, _ := slurmconv.Shape(br.Req.Spec)
	id := int64(1)
	if runs, err := c.Runs(e.ctx, client.ListOptions{All: true, Limit: 1}); err == nil && len(runs) > 0 {
		id = runs[0].ID + 1
	}
	fmt.Fprintf(e.stderr, "sbatch: Job %d to start at %s using %d processors on nodes %s in partition %s\n",
		id, slurm.FormatTimestamp(start.Local()), cpus, slurm.CompressHostlist(hosts), part)
	return nil
}

// waitRun polls a run until it has ended.
func waitRun(ctx context.Context, c *client.Client, id int64) (*api.Run, error) {
	delay := 200 * time.Millisecond
	for {
		r, err := c.Run(ctx, strconv.FormatInt(id, 10))
		if err == nil && r.Status.Finished() {
			if r.Array != nil {
				// An array ends when its tasks have: its status says how.
				return r, nil
			}
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// waitExit is sbatch -W's exit status (_job_wait): the highest of the
// jobs' (an array's tasks') exit codes, where a job ended by a signal
// counts 1 and one cancelled before it ran 0, as WEXITSTATUS reads them.
func waitExit(runs []api.Run) int {
	ec := 0
	for i := range runs {
		r := &runs[i]
		if r.Array != nil || !r.Status.Finished() {
			continue
		}
		code, sig := slurmconv.ExitCode(r, slurmconv.State(r))
		if sig != 0 {
			code = 1
		}
		ec = max(ec, code&0xff)
	}
	return ec
}

// runSelection is what a listing command asks the server for: the
// active runs, or with all every run the server keeps narrowed by ids and
// a window (see client.ListOptions). It selects a superset of what the
// command shows, so the command's own filter decides as it would over
// every run.
type runSelection struct {
	all          bool
	ids          []int64
	since, until time.Time
	// refs also reads the runs that the selected ones name.
	refs bool
}

// inMemory selects the runs squeue and scontrol may show: active, or
// finished less than slurmconv.MinJobAge before now (slurmView.inMemory).
func inMemory(now time.Time) runSelection {
	return runSelection{all: true, since: now.Add(-slurmconv.MinJobAge), refs: true}
}

// namedJobs narrows a selection to the runs that job selectors name (the
// server adds the tasks of the arrays among them): squeue -j and scontrol
// show job ask for their jobs only, not the whole queue.
func namedJobs(sel runSelection, jobs []slurm.JobSelector) runSelection {
	for _, j := range jobs {
		if id := int64(j.JobID); !slices.Contains(sel.ids, id) {
			sel.ids = append(sel.ids, id)
		}
	}
	return sel
}

// fetchView reads what the listing commands show: the selected runs with
// their jobs and configurations, and the nodes.
func fetchView(e *slurmEnv, prog string, sel runSelection) (*slurmconv.View, error) {
	c, err := e.newClient()
	if err != nil {
		return nil, slurmFail(1, fmt.Sprintf("%s: error: Unable to contact slurm controller (connect failure): %v", prog, err))
	}
	o := client.ListOptions{All: sel.all, Jobs: true, Spec: true, Lean: true, IDs: sel.ids, Since: sel.since, Until: sel.until}
	runs, err := c.Runs(e.ctx, o)
	if err != nil {
		return nil, slurmFail(1, fmt.Sprintf("%s: error: %v", prog, err))
	}
	if sel.refs {
		if more := referenced(runs); len(more) > 0 {
			extra, err := c.Runs(e.ctx, client.ListOptions{All: true, Jobs: true, Spec: true, Lean: true, IDs: more})
			if err != nil {
				return nil, slurmFail(1, fmt.Sprintf("%s: error: %v", prog, err))
			}
			runs = mergeRuns(runs, extra)
		}
	}
	nodes, err := c.Nodes(e.ctx)
	if err != nil {
		return nil, slurmFail(1, fmt.Sprintf("%s: error: %v", prog, err))
	}
	v := slurmconv.NewView(runs, nodes, e.now())
	if pol, err := c.Policy(e.ctx); err == nil {
		v.Policy = pol
	}
	if prios, err := c.PrioritiesOf(e.ctx, pendingIDs(v, sel)); err == nil {
		v.Prio = map[int64]int64{}
		for _, p := range prios {
			v.Prio[p.RunID] = p.Priority
		}
	}
	return v, nil
}

// pendingIDs are the view's unfinished runs when the selection names runs
// (their priorities are all it needs), else nil: every waiting run's.
func pendingIDs(v *slurmconv.View, sel runSelection) []int64 {
	if sel.ids == nil {
		return nil
	}
	ids := []int64{}
	for _, r := range v.Runs {
		if !r.Status.Finished() {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// loadSteps adds the recorded steps of the view's runs that have started.
func loadSteps(e *slurmEnv, v *slurmconv.View) error {
	var ids []int64
	for _, r := range v.Runs {
		if r.StartedAt != nil && r.Array == nil {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	c, err := e.newClient()
	if err != nil {
		return err
	}
	steps, err := c.Steps(e.ctx, ids)
	if err != nil {
		return err
	}
	v.Steps = map[int64][]api.Step{}
	for _, p := range steps {
		v.Steps[p.RunID] = append(v.Steps[p.RunID], p)
	}
	return nil
}

// referenced are the runs that runs name and do not hold: tasks' arrays
// and dependencies.
func referenced(runs []api.Run) []int64 {
	have := map[int64]bool{}
	for _, r := range runs {
		have[r.ID] = true
	}
	var out []int64
	add := func(id int64) {
		if id > 0 && !have[id] {
			have[id] = true
			out = append(out, id)
		}
	}
	for _, r := range runs {
		add(r.ArrayID)
		if r.Spec == nil {
			continue
		}
		for _, dep := range r.Spec.DependsOn {
			for i, ref := range dep.Runs {
				idStr, _, _ := strings.Cut(ref, "_")
				id, _ := strconv.ParseInt(idStr, 10, 64)
				if i < len(dep.IDs) && dep.IDs[i] != 0 {
					id = dep.IDs[i]
				}
				add(id)
			}
		}
	}
	return out
}

// mergeRuns adds to runs those of extra it lacks, keeping the server's
// order (newest first).
func mergeRuns(runs, extra []api.Run) []api.Run {
	have := map[int64]bool{}
	for _, r := range runs {
		have[r.ID] = true
	}
	for _, r := range extra {
		if !have[r.ID] {
			have[r.ID] = true
			runs = append(runs, r)
		}
	}
	slices.SortStableFunc(runs, func(a, b api.Run) int { return cmp.Compare(b.ID, a.ID) })
	return runs
}

// parseJobList reads a list of job ids for scancel, scontrol and sacct:
// "12", "12_3", "12_[1-3,5]", comma-separated.
func parseJobList(prog, s string) ([]slurm.JobSelector, error) {
	var out []slurm.JobSelector
	for _, item := range splitOutsideBrackets(s) {
		if item == "" {
			continue
		}
		id, task, hasTask := strings.Cut(item, "_")
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil || n == 0 {
			return nil, slurmFail(1, fmt.Sprintf("%s: error: Invalid job id %s", prog, item))
		}
		if !hasTask {
			out = append(out, slurm.JobSelector{JobID: uint32(n), Task: slurm.NoArrayTask})
			continue
		}
		task = strings.TrimSuffix(strings.TrimPrefix(task, "["), "]")
		as, err := slurm.ParseArray(task, 1<<30)
		if err != nil {
			return nil, slurmFail(1, fmt.Sprintf("%s: error: Invalid job id %s", prog, item))
		}
		for _, t := range as.Indices {
			out = append(out, slurm.JobSelector{JobID: uint32(n), Task: t})
		}
	}
	return out, nil
}

func splitOutsideBrackets(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',', ' ':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// gpusAvailable reports whether some node has as many GPUs (of the model
// asked for) as each of the job's components asks for on one node.
// slurmctld refuses a job no node's configuration could ever hold
// (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE) at submission; with no node
// known at all there is nothing to judge by.
func gpusAvailable(t *spec.Task, nodes []api.Node) bool {
	if t == nil || len(nodes) == 0 {
		return true
	}
	fits := func(r spec.Resources) bool {
		if r.GPU == nil || r.GPU.Count.Min <= 0 {
			return true
		}
		for _, n := range nodes {
			have := 0
			for _, g := range n.GPUs {
				if len(r.GPU.Names) == 0 || slices.ContainsFunc(r.GPU.Names, func(m string) bool { return gpuModelIs(m, g.Name) }) {
					have++
				}
			}
			if have >= r.GPU.Count.Min {
				return true
			}
		}
		return false
	}
	if !fits(t.Resources) {
		return false
	}
	for _, g := range t.Groups {
		if !fits(g.Resources) {
			return false
		}
	}
	return true
}

// gpuModelIs is the scheduler's model match: "a100" is a whole word of
// "NVIDIA A100-SXM4-80GB", ignoring case.
func gpuModelIs(want, have string) bool {
	return slices.ContainsFunc(strings.FieldsFunc(have, func(r rune) bool { return r == ' ' || r == '-' || r == '_' }),
		func(w string) bool { return strings.EqualFold(w, want) }) || strings.EqualFold(want, have)
}

// spreadTasks gives a job of -n tasks without -N or --ntasks-per-node as
// many nodes as its tasks need when no node it may use holds them all, as
// slurmctld spreads such a job's tasks over nodes (its node count is a
// range from 1): -n 4 on 2-CPU nodes takes 2 nodes. The nodes it may use
// are those of its partitions, -w, -x and -C.
func spreadTasks(o *slurm.BatchOptions, nodes []api.Node) {
	if o.NTasks <= 0 || o.Nodes > 0 || o.NTasksPerNode > 0 || o.Nodelist != "" {
		return
	}
	cpt := max(o.CPUsPerTask, 1)
	var exclude []string
	if o.Exclude != "" {
		exclude, _ = slurm.ExpandHostlist(o.Exclude)
	}
	features := strings.FieldsFunc(o.Constraint, func(r rune) bool { return r == '&' || r == ',' })
	most := 0
	for _, n := range nodes {
		fleets := slices.DeleteFunc(slices.Clone(o.Partition), func(p string) bool { return p == "" || p == slurmconv.DefaultPartition })
		if len(fleets) > 0 && !slices.Contains(fleets, n.Fleet) || slices.Contains(exclude, n.Name) {
			continue
		}
		if slices.ContainsFunc(features, func(f string) bool { return !slices.Contains(n.Features, strings.TrimSpace(f)) }) {
			continue
		}
		most = max(most, n.CPUs/cpt)
	}
	if most >= 1 && o.NTasks > most {
		o.Nodes = (o.NTasks + most - 1) / most
	}
}

// unknownNodesOrFeatures is slurmctld's refusal of a job that names a node
// (-w, -x) no one knows, or asks for a feature (-C) no node has; "" when
// there is none to make (or no node is known to judge by).
func unknownNodesOrFeatures(t *spec.Task, nodes []api.Node) string {
	if t == nil || len(nodes) == 0 {
		return ""
	}
	known := func(name string) bool {
		return slices.ContainsFunc(nodes, func(n api.Node) bool { return n.Name == name })
	}
	for _, h := range append(slices.Clone(t.Nodelist), t.Exclude...) {
		if !known(h) {
			return "Invalid node name specified"
		}
	}
	for _, f := range t.Constraint {
		if !slices.ContainsFunc(nodes, func(n api.Node) bool { return slices.Contains(n.Features, f) }) {
			return "Invalid feature specification"
		}
	}
	return ""
}

// sbatchNeedsNodes says whether a job's options need the node list before
// it is submitted: to spread -n over nodes, to check a partition, GPUs,
// -w/-x/-C against what exists, or for --test-only. Most submissions need
// none of it, and skip the round trip (Slurm's controller checks them).
func sbatchNeedsNodes(job *slurm.BatchJob) bool {
	for _, c := range job.Components {
		o := &c
		switch {
		case o.TestOnly,
			o.NTasks > 0 && o.Nodes <= 0 && o.NTasksPerNode <= 0 && o.Nodelist == "",
			slices.ContainsFunc(o.Partition, func(p string) bool { return p != "" && p != slurmconv.DefaultPartition }),
			len(o.GRES)+len(o.GPUs)+len(o.GPUsPerNode)+len(o.GPUsPerTask) > 0,
			o.Nodelist != "" || o.Exclude != "" || o.Constraint != "":
			return true
		}
	}
	return false
}
