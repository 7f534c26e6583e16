package slurmconv

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// This file turns sbatch's options (internal/slurm's BatchJob) into a
// Berth run: a spec.Task whose commands run the script as Slurm runs it,
// and the submission's options. It is pure: the submitter's identity,
// directory and environment are parameters.

// Submitter is who submits, from where: what sbatch reads of its process
// (the caller looks it up; this package does no I/O).
type Submitter struct {
	User, Group string
	UID, GID    int
	Host        string
	Cwd         string
	Env         []string // the submitter's environment, for --export
	Now         time.Time
	Exe         string // the submitting program, which the nodes of a multi-node job run as step hosts
	// Links is the directory on PATH holding the Slurm-named links to the
	// program ("" when none): a login shell's profile resets PATH, and the
	// job puts it back after.
	Links string
	// Limits bound the configuration (zero: spec.DefaultLimits).
	Limits spec.Limits
}

// Batch is a submission made of sbatch's options.
type Batch struct {
	Req api.SubmitRequest
	Opt slurm.BatchOptions // the first component's options (the job's own)
}

// Resources is what one node of a component asks for, with how its tasks
// are laid out.
type Resources struct {
	Nodes, TasksPerNode, CPUsPerTask, CPUs int
	MemMB                                  uint64 // per node; 0 for none
	MemPerCPUMB                            uint64 // --mem-per-cpu, as given
	GPUs                                   int    // per node
	GPUType                                string
	NTasksGiven                            bool
}

// ComponentResources maps one component's options onto a node request:
//
//   - nodes: -N (its minimum); without it, -n over --ntasks-per-node, else 1;
//   - tasks per node: --ntasks-per-node, else -n spread over the nodes, else 1;
//   - CPUs per node: tasks per node × -c, at least --mincpus and
//     --cpus-per-gpu × GPUs;
//   - GPUs per node: --gpus-per-node, --gres=gpu[:type]:N, --gpus (per job,
//     spread over the nodes) or --gpus-per-task × tasks per node;
//   - memory per node: --mem, or --mem-per-cpu × CPUs, or --mem-per-gpu ×
//     GPUs (--mem=0, "all of it", asks for no minimum).
func ComponentResources(o *slurm.BatchOptions) (Resources, error) {
	r := Resources{Nodes: o.Nodes, TasksPerNode: o.NTasksPerNode, CPUsPerTask: max(o.CPUsPerTask, 1)}
	if r.Nodes == 0 {
		r.Nodes = 1
		if o.NTasks > 0 && o.NTasksPerNode > 0 {
			r.Nodes = (o.NTasks + o.NTasksPerNode - 1) / o.NTasksPerNode
		}
	}
	if r.TasksPerNode == 0 {
		r.TasksPerNode = 1
		if o.NTasks > 0 {
			r.TasksPerNode = (o.NTasks + r.Nodes - 1) / r.Nodes
		}
	}
	r.NTasksGiven = o.NTasks > 0 || o.NTasksPerNode > 0
	gpu := func(list []slurm.GRES, mult int) error {
		for _, g := range list {
			if g.Name != "gpu" {
				return slurm.SubmitFailed("Invalid generic resource (gres) specification")
			}
			r.GPUs = max(r.GPUs, int(g.Count)*mult)
			if g.Type != "" {
				r.GPUType = g.Type
			}
		}
		return nil
	}
	if err := gpu(o.GPUsPerNode, 1); err != nil {
		return r, err
	}
	if err := gpu(o.GRES, 1); err != nil {
		return r, err
	}
	for _, g := range o.GPUs {
		if g.Name != "gpu" {
			return r, slurm.SubmitFailed("Invalid generic resource (gres) specification")
		}
		r.GPUs = max(r.GPUs, (int(g.Count)+r.Nodes-1)/r.Nodes)
		if g.Type != "" {
			r.GPUType = g.Type
		}
	}
	if err := gpu(o.GPUsPerTask, r.TasksPerNode); err != nil {
		return r, err
	}
	r.CPUs = max(r.TasksPerNode*r.CPUsPerTask, o.MinCPUsPerNode, 1)
	if o.CPUsPerGPU > 0 {
		r.CPUs = max(r.CPUs, o.CPUsPerGPU*r.GPUs)
	}
	switch {
	case o.Mem > 0:
		r.MemMB = uint64((o.Mem + slurm.MiB - 1) / slurm.MiB)
	case o.MemPerCPU > 0:
		r.MemPerCPUMB = uint64((o.MemPerCPU + slurm.MiB - 1) / slurm.MiB)
		r.MemMB = r.MemPerCPUMB * uint64(r.CPUs)
	case o.MemPerGPU > 0 && r.GPUs > 0:
		r.MemMB = uint64((o.MemPerGPU+slurm.MiB-1)/slurm.MiB) * uint64(r.GPUs)
	}
	return r, nil
}

func (r Resources) Spec() spec.Resources {
	n := r.CPUs
	res := spec.Resources{CPU: &spec.CPUSpec{Count: spec.IntRange{Min: n, Max: &n}}}
	if r.MemMB > 0 {
		b := spec.Bytes(r.MemMB) * spec.MB
		res.Memory = &spec.ByteRange{Min: b, Max: &b}
	}
	if r.GPUs > 0 {
		g := r.GPUs
		res.GPU = &spec.GPUSpec{Count: spec.IntRange{Min: g, Max: &g}}
		if validGPUName().MatchString(r.GPUType) {
			res.GPU.Names = []string{r.GPUType}
		}
	}
	return res
}

var validGPUName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*$`) })

// RunName makes a run name of a Slurm job name: run names are 2 to 41
// lowercase letters, digits and hyphens, starting with a letter ("train.sh"
// gives "train", "My_Job.v2" "my-job-v2"). The Slurm name is kept as it is
// in the run's tags.
func RunName(jobName string) string {
	n := strings.ToLower(jobName)
	for _, ext := range []string{".sh", ".sbatch", ".slurm", ".bash", ".job", ".batch"} {
		if strings.HasSuffix(n, ext) && len(n) > len(ext) {
			n = strings.TrimSuffix(n, ext)
			break
		}
	}
	var b strings.Builder
	dash := false
	for _, c := range n {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !ok {
			if b.Len() > 0 && !dash {
				b.WriteByte('-')
				dash = true
			}
			continue
		}
		b.WriteRune(c)
		dash = false
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "job-" + s
	}
	s = strings.TrimRight(s, "-")
	if len(s) < 2 {
		s = strings.TrimRight("job-"+s, "-")
	}
	if len(s) > 41 {
		s = strings.TrimRight(s[:41], "-")
	}
	return s
}

// arrayString writes array indices in spec's --array syntax.
func arrayString(a *slurm.ArraySpec) string {
	idx := append([]int(nil), a.Indices...)
	sort.Ints(idx)
	var out string
	if len(idx) > 2 {
		step := idx[1] - idx[0]
		regular := step > 1
		for i := 2; regular && i < len(idx); i++ {
			regular = idx[i]-idx[i-1] == step
		}
		if regular {
			out = fmt.Sprintf("%d-%d:%d", idx[0], idx[len(idx)-1], step)
		}
	}
	if out == "" {
		var parts []string
		for i := 0; i < len(idx); {
			j := i
			for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
				j++
			}
			if j > i {
				parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
			} else {
				parts = append(parts, strconv.Itoa(idx[i]))
			}
			i = j + 1
		}
		out = strings.Join(parts, ",")
	}
	if a.Throttle > 0 {
		out += "%" + strconv.Itoa(a.Throttle)
	}
	return out
}

// DependsOn maps --dependency onto depends_on, dependency_policy and
// singleton. known reports whether a job id exists: Slurm 22.05 drops a
// condition on a job it does not know and accepts the job.
func DependsOn(t *spec.Task, d *slurm.Dependency, known func(uint32) bool) error {
	if d == nil {
		return nil
	}
	if d.Any {
		t.DependencyPolicy = "any"
	}
	byType := map[string]int{}
	for _, dep := range d.Deps {
		switch dep.Type {
		case slurm.DepSingleton:
			t.Singleton = true
			continue
		case slurm.DepExpand:
			return slurm.SubmitFailed("Job dependency problem")
		}
		if !known(dep.JobID) {
			continue
		}
		typ := string(dep.Type)
		if dep.Type == slurm.DepAfterBB {
			typ = "afterany"
		}
		ref := strconv.FormatUint(uint64(dep.JobID), 10)
		if dep.TaskID >= 0 {
			ref += "_" + strconv.Itoa(dep.TaskID)
		}
		// With "?" each condition is one of the alternatives; a depends_on
		// entry needs all of its runs, so an entry holds one run each.
		i, ok := byType[typ]
		if !ok || d.Any {
			i = len(t.DependsOn)
			byType[typ] = i
			t.DependsOn = append(t.DependsOn, spec.Dependency{Type: typ})
		}
		t.DependsOn[i].Runs = append(t.DependsOn[i].Runs, ref)
	}
	if len(t.DependsOn) < 2 && t.DependencyPolicy == "any" && !t.Singleton {
		t.DependencyPolicy = ""
	}
	return nil
}

// hiddenFromExport are variables of the Submitter that a job must not
// inherit with --export=ALL: the job's own Slurm, Berth and dstack
// variables (the server sets them, and a submission from inside a job
// would otherwise pass its own on), the GPUs the job gets, and the shell's
// bookkeeping.
func hiddenFromExport(name string) bool {
	for _, p := range []string{"SLURM_", "SLURMD_", "BERTH_", "DSTACK_", "BASH_FUNC_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
		"_", "PWD", "OLDPWD", "SHLVL", "PS1", "PROMPT_COMMAND":
		return true
	}
	return !validEnvName(name)
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// EnvList is an ordered set of variables, the last value of a name winning.
type EnvList struct {
	names []string
	vals  map[string]string
}

func (l *EnvList) Set(k, v string) {
	if l.vals == nil {
		l.vals = map[string]string{}
	}
	if _, ok := l.vals[k]; !ok {
		l.names = append(l.names, k)
	}
	l.vals[k] = v
}

func (l *EnvList) Spec() spec.Env {
	out := make(spec.Env, 0, len(l.names))
	for _, k := range l.names {
		out = append(out, spec.EnvVar{Name: k, Value: l.vals[k]})
	}
	return out
}

// ExportEnv is the part of the Submitter's environment a job gets, as
// --export says (see hiddenFromExport for what never passes).
func ExportEnv(ex slurm.Export, submitterEnv []string, l *EnvList) {
	for _, kv := range ex.Environment(submitterEnv) {
		k, v, _ := strings.Cut(kv, "=")
		explicit := false
		for _, ev := range ex.Vars {
			if ev.Name == k {
				explicit = true
			}
		}
		if hiddenFromExport(k) && !(explicit && validEnvName(k)) {
			continue
		}
		l.Set(k, v)
	}
}

// BuildBatch turns sbatch's job into a submission. known tells which
// job ids exist (for --dependency); partitions, when not nil, are the
// partitions there are (a job naming another one is refused as Slurm
// does).
func BuildBatch(job *slurm.BatchJob, scriptPath string, s Submitter, known func(uint32) bool, partitions []string) (*Batch, error) {
	o := job.Components[0]
	sp := &spec.Slurm{Tool: "sbatch", JobName: o.JobName, User: s.User, Group: s.Group, UID: s.UID, GID: s.GID,
		SubmitHost: s.Host, SubmitDir: s.Cwd, Account: o.Account, Comment: o.Comment, Output: o.Output, Error: o.Error,
		Constraint: o.Constraint, OpenMode: o.OpenMode, TresPerNode: o.TresPerNode(), TresPerJob: o.TresPerJob(),
		Requeue: o.Requeue, Wait: o.Wait}
	t := &spec.Task{Type: "task", Name: RunName(o.JobName), WorkingDir: o.Chdir, Slurm: sp}
	t.Project = o.Account // -A chooses among the Submitter's projects
	if o.Wrap == "" && scriptPath != "" {
		p := scriptPath
		if !strings.HasPrefix(p, "/") {
			p = path.Join(s.Cwd, p)
		}
		sp.Command = p
	}
	if o.Input != "/dev/null" {
		sp.Input = o.Input
	}
	if o.Dependency != nil {
		sp.Dependency = o.Dependency.Spec()
	}
	if o.Signal != nil {
		if o.Signal.Reservation {
			// Kept without a time limit, it was silently dropped: Berth
			// has no reservations to end.
			return nil, slurm.SubmitFailed(fmt.Sprintf("--signal=%s: R: (also when the job's reservation ends) has no meaning in Berth, which has no reservations; remove R:", o.Signal))
		}
		sp.Signal = slurmSignalOf(o.Signal)
	}
	if o.Requeue != nil && *o.Requeue {
		t.Retry = &spec.Retry{OnEvents: []string{"interruption"}}
	}

	// Partitions: the default one means any node.
	for _, p := range o.Partition {
		if p == "" {
			continue
		}
		if partitions != nil && !slices.Contains(partitions, p) {
			return nil, slurm.InvalidPartitionError(p)
		}
		if p != DefaultPartition {
			t.Fleets = append(t.Fleets, p)
		}
	}
	if o.QOS != "" && !strings.EqualFold(o.QOS, "normal") {
		t.QOS = o.QOS
	}
	if o.Nice != nil {
		t.Nice = int64(*o.Nice)
	}
	if o.Priority != nil {
		sp.Priority = strconv.FormatUint(uint64(o.Priority.Value), 10)
		t.Priority = int(min(o.Priority.Value, 100))
		if o.Priority.Top {
			sp.Priority, t.Priority = "TOP", 100
		}
	}
	if o.Exclusive == "exclusive" {
		t.Exclusive = true
	}
	if err := nodeFilters(t, &job.Components[0]); err != nil {
		return nil, err
	}
	if o.TimeLimit > 0 && o.TimeLimit != slurm.Unlimited {
		d := spec.Duration(o.TimeLimit / time.Second)
		t.MaxDuration = &d
		if o.Signal != nil {
			// Delivered that long before the time limit (without one, as
			// in Slurm, there is no moment to send it: it stays a tag):
			// with B: to the batch shell, else to the job's steps (S:).
			sig := spec.Signal{Number: o.Signal.Signal, Before: spec.Duration(o.Signal.Before / time.Second),
				BatchOnly: o.Signal.BatchOnly, StepsOnly: !o.Signal.BatchOnly}
			t.Signal = sig.String()
		}
	}
	if o.Array != nil {
		t.Array = arrayString(o.Array)
	}
	if err := DependsOn(t, o.Dependency, known); err != nil {
		return nil, err
	}
	if o.KillOnInvalidDep != nil {
		t.KillInvalidDepend = *o.KillOnInvalidDep
	}

	// Resources: one group per hetjob component, else the task's own.
	var first Resources
	for i := range job.Components {
		r, err := ComponentResources(&job.Components[i])
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first = r
		}
		if len(job.Components) > 1 {
			t.Groups = append(t.Groups, spec.Group{Name: fmt.Sprintf("het-%d", i), Nodes: r.Nodes, Resources: r.Spec()})
		}
	}
	if len(job.Components) == 1 {
		t.Nodes = first.Nodes
		t.Resources = first.Spec()
	}
	if first.NTasksGiven {
		sp.NTasks, sp.NTasksPerNode = first.Nodes*first.TasksPerNode, first.TasksPerNode
		sp.NTasksGiven = o.NTasks
	}
	sp.TasksPerNode, sp.CPUsPerNode, sp.CPUsPerTask = first.TasksPerNode, first.CPUs, o.CPUsPerTask
	sp.MemPerCPUMB, sp.GPUsPerNode = first.MemPerCPUMB, first.GPUs
	if first.MemPerCPUMB == 0 {
		sp.MemPerNodeMB = first.MemMB
	}

	// The environment: the Submitter's (--export). The job's Slurm
	// variables are the server's, at placement, when it has an ID and
	// nodes (internal/control/slurm.go).
	var env EnvList
	ExportEnv(o.Export, s.Env, &env)
	if o.Export.Mode != slurm.ExportAll || len(o.Export.Vars) > 0 {
		sp.Export = exportString(o.Export)
	}
	sp.PerNodeGiven = o.NTasksPerNode
	t.Env = env.Spec()

	// The script is the run's one command, which the node runs by its
	// interpreter as slurmd does (spec.Slurm.Script).
	sp.Script, sp.Args, sp.Links = true, job.ScriptArgs, s.Links
	t.Commands = []string{string(job.Script)}
	if t.JobCount() > 1 {
		// The script runs on the first node; the others host its steps
		// until it ends.
		t.StopCriteria = "master-done"
	}
	t.Normalize()
	l := s.Limits
	if l.ScriptBytes == 0 {
		l = spec.DefaultLimits
	}
	if n := len(t.Commands[0]); int64(n) > l.ScriptBytes {
		return nil, scriptTooLarge(len(job.Script), n, l)
	}
	if err := t.ValidateLimits(l); err != nil {
		return nil, slurm.SubmitFailed(err.Error())
	}
	br := &Batch{Opt: o, Req: api.SubmitRequest{Spec: t, Source: orStr(scriptPath, "sbatch"), Hold: o.Hold}}
	if !o.Begin.IsZero() && o.Begin.After(s.Now) {
		br.Req.Begin = o.Begin.UTC()
	}
	return br, nil
}

func repeat(n, times int) []int {
	out := make([]int, max(times, 1))
	for i := range out {
		out[i] = n
	}
	return out
}

func exportString(e slurm.Export) string {
	var parts []string
	switch e.Mode {
	case slurm.ExportAll:
		parts = append(parts, "ALL")
	case slurm.ExportNone:
		if len(e.Vars) == 0 {
			parts = append(parts, "NONE")
		}
	case slurm.ExportNil:
		parts = append(parts, "NIL")
	}
	for _, v := range e.Vars {
		if v.HasValue {
			parts = append(parts, v.Name+"="+v.Value)
		} else {
			parts = append(parts, v.Name)
		}
	}
	return strings.Join(parts, ",")
}

// nodeFilters puts -w/--nodelist, -x/--exclude and -C/--constraint in the
// run: the nodes its jobs may use (as many jobs as nodes named, when -N
// does not say, as slurmctld makes the node count the list's), those they
// may not, and the features each node must have (joined by & or ,; Slurm's
// | [] * ! forms are refused).
func nodeFilters(t *spec.Task, o *slurm.BatchOptions) error {
	if o.Nodelist != "" {
		hosts, err := slurm.ExpandHostlist(o.Nodelist)
		if err != nil {
			return slurm.SubmitFailed("Invalid node name specified")
		}
		t.Nodelist = hosts
		if o.Nodes == 0 {
			o.Nodes = len(hosts)
		}
	}
	if o.Exclude != "" {
		hosts, err := slurm.ExpandHostlist(o.Exclude)
		if err != nil {
			return slurm.SubmitFailed("Invalid node name specified")
		}
		t.Exclude = hosts
	}
	if o.Constraint != "" {
		if strings.ContainsAny(o.Constraint, "|[]*!") {
			return slurm.SubmitFailed("Invalid feature specification (Berth takes features joined by & only: " + o.Constraint + ")")
		}
		for _, f := range strings.FieldsFunc(o.Constraint, func(r rune) bool { return r == '&' || r == ',' }) {
			if f = strings.TrimSpace(f); f != "" && !slices.Contains(t.Constraint, f) {
				t.Constraint = append(t.Constraint, f)
			}
		}
	}
	return nil
}

// scriptTooLarge is sbatch's refusal of a script over the limit: Slurm's
// words (slurmctld refuses a script over max_script_size with
// ESLURM_PATHNAME_TOO_LONG), then what they mean here.
func scriptTooLarge(script, commands int, l spec.Limits) error {
	return &slurm.CommandError{Stderr: []string{
		"sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long",
		fmt.Sprintf("sbatch: error: the batch script is %d bytes (%d with what runs it): at most %d, Slurm's default max_script_size (%s raises it for a server that allows more)",
			script, commands, l.ScriptBytes, maxScriptSizeVar),
	}, ExitCode: 1}
}

// maxScriptSizeVar raises the bound on a batch script (internal/cli reads
// it into the Submitter's Limits).
const maxScriptSizeVar = "BERTH_MAX_SCRIPT_SIZE"
