//go:build !slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// srun and salloc share the job options of sbatch (resources, time,
// partition, name…) and add their own; both stop at the first argument
// that is not an option, the command.
var allocOptions = []slurmOpt{
	{"account", 'A', reqArg}, {"begin", 'b', reqArg}, {"comment", 0, reqArg}, {"constraint", 'C', reqArg},
	{"cpus-per-task", 'c', reqArg}, {"cpus-per-gpu", 0, reqArg}, {"chdir", 'D', reqArg}, {"dependency", 'd', reqArg},
	{"error", 'e', reqArg}, {"exclusive", 0, optionalArg}, {"export", 0, reqArg}, {"gres", 0, reqArg},
	{"gpus", 'G', reqArg}, {"gpus-per-node", 0, reqArg}, {"gpus-per-task", 0, reqArg}, {"help", 'h', noArg},
	{"hold", 'H', noArg}, {"input", 'i', reqArg}, {"job-name", 'J', reqArg}, {"kill-on-bad-exit", 'K', optionalArg},
	{"label", 'l', noArg}, {"mem", 0, reqArg}, {"mem-per-cpu", 0, reqArg}, {"mem-per-gpu", 0, reqArg},
	{"mincpus", 0, reqArg}, {"mpi", 0, reqArg}, {"nodes", 'N', reqArg}, {"ntasks", 'n', reqArg},
	{"ntasks-per-node", 0, reqArg}, {"nodelist", 'w', reqArg}, {"exclude", 'x', reqArg}, {"output", 'o', reqArg},
	{"partition", 'p', reqArg}, {"pty", 0, noArg}, {"qos", 'q', reqArg}, {"quiet", 'Q', noArg},
	{"time", 't', reqArg}, {"unbuffered", 'u', noArg}, {"usage", 0, noArg}, {"verbose", 'v', noArg},
	{"version", 'V', noArg}, {"wait", 'W', reqArg}, {"overlap", 0, noArg}, {"exact", 0, noArg},
	{"cpu-bind", 0, reqArg}, {"gpu-bind", 0, reqArg}, {"mem-bind", 0, reqArg}, {"distribution", 'm', reqArg},
	{"hint", 0, reqArg}, {"nice", 0, optionalArg}, {"reservation", 0, reqArg}, {"network", 0, reqArg},
	{"propagate", 0, optionalArg}, {"disable-status", 'X', noArg}, {"ntasks-per-gpu", 0, reqArg},
	{"cpu-freq", 0, reqArg}, {"jobid", 0, reqArg}, {"immediate", 'I', optionalArg}, {"no-shell", 0, noArg},
	{"priority", 0, reqArg}, {"threads-per-core", 0, reqArg}, {"tmp", 0, reqArg}, {"wckey", 0, reqArg},
	{"x11", 0, optionalArg}, {"multi-prog", 0, noArg}, {"het-group", 0, reqArg}, {"signal", 0, reqArg},
	{"mail-type", 0, reqArg}, {"mail-user", 0, reqArg}, {"licenses", 'L', reqArg}, {"time-min", 0, reqArg},
}

// allocRequest is what srun's and salloc's options ask for.
type allocRequest struct {
	opt      slurm.BatchOptions
	label    bool
	pty      bool
	quiet    bool
	command  []string
	exported bool // --export given
}

func parseAllocArgs(prog string, args []string) (*allocRequest, error) {
	got, rest, err := getoptLong(prog, args, allocOptions, false)
	if err != nil {
		return nil, err
	}
	r := &allocRequest{opt: slurm.BatchOptions{Mem: -1, MemPerCPU: -1, MemPerGPU: -1, TmpDisk: -1, Export: slurm.Export{Mode: slurm.ExportAll}}}
	o := &r.opt
	bad := func(what string) error {
		return slurmFail(1, fmt.Sprintf("%s: error: Invalid %s specification", prog, what))
	}
	posInt := func(name, v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return 0, slurmFail(1, fmt.Sprintf("%s: error: Invalid numeric value \"%s\" for --%s.", prog, v, name))
		}
		return n, nil
	}
	for _, g := range got {
		v := g.val
		switch g.name {
		case "help":
			return nil, &slurm.CommandError{Stdout: allocUsage(prog)}
		case "usage":
			return nil, &slurm.CommandError{Stdout: fmt.Sprintf("Usage: %s [-N nnodes] [-n ntasks] [-c ncpus] [-t time] [-p partition] [-J jobname] [--gres=gpu:N] [--pty] [-l] executable [args...]\n", prog)}
		case "version":
			return nil, &slurm.CommandError{Stdout: slurmVersion + "\n"}
		case "account":
			o.Account = v
		case "comment":
			o.Comment = v
		case "constraint":
			o.Constraint = v
		case "cpus-per-task":
			if o.CPUsPerTask, err = posInt(g.name, v); err != nil {
				return nil, err
			}
		case "cpus-per-gpu":
			if o.CPUsPerGPU, err = posInt(g.name, v); err != nil {
				return nil, err
			}
		case "mincpus":
			if o.MinCPUsPerNode, err = posInt(g.name, v); err != nil {
				return nil, err
			}
		case "chdir":
			o.Chdir = v
		case "exclusive":
			o.Exclusive = "exclusive"
		case "export":
			o.Export, r.exported = slurm.ParseExport(v), true
		case "gres":
			if o.GRES, err = slurm.ParseGRES(v); err != nil {
				return nil, bad("generic resource (gres)")
			}
		case "gpus", "gpus-per-node", "gpus-per-task":
			gs, err := slurm.ParseGPUs(v)
			if err != nil {
				return nil, bad("generic resource (gres)")
			}
			switch g.name {
			case "gpus":
				o.GPUs = gs
			case "gpus-per-node":
				o.GPUsPerNode = gs
			default:
				o.GPUsPerTask = gs
			}
		case "hold":
			o.Hold = true
		case "job-name":
			o.JobName = v
		case "label":
			r.label = true
		case "mem", "mem-per-cpu", "mem-per-gpu":
			b, err := slurm.ParseMemory(v)
			if err != nil {
				return nil, bad("--" + g.name)
			}
			o.Mem, o.MemPerCPU, o.MemPerGPU = -1, -1, -1
			switch g.name {
			case "mem":
				o.Mem = b
			case "mem-per-cpu":
				o.MemPerCPU = b
			default:
				o.MemPerGPU = b
			}
		case "nodes":
			lo, _, _ := strings.Cut(v, "-")
			if o.Nodes, err = posInt(g.name, lo); err != nil {
				return nil, slurmFail(1, fmt.Sprintf("%s: error: \"%s\" is not a valid node count", prog, v))
			}
		case "ntasks":
			if o.NTasks, err = posInt(g.name, v); err != nil {
				return nil, err
			}
		case "ntasks-per-node":
			if o.NTasksPerNode, err = posInt(g.name, v); err != nil {
				return nil, err
			}
		case "partition":
			o.Partition = splitList(v)
		case "pty":
			r.pty = true
		case "qos":
			o.QOS = v
		case "quiet":
			r.quiet = true
		case "time":
			d, err := slurm.ParseTimeLimit(v)
			if err != nil {
				return nil, bad("--time")
			}
			if d == 0 {
				d = slurm.Unlimited
			}
			o.TimeLimit = d
		case "dependency":
			d, err := slurm.ParseDependency(v)
			if err != nil {
				return nil, slurmFail(1, prog+": error: Job dependency problem")
			}
			o.Dependency = d
		case "begin":
			t, err := slurm.ParseBegin(v, time.Now(), false)
			if err != nil {
				return nil, bad("--begin")
			}
			o.Begin = t
		case "output":
			o.Output = v
		case "error":
			o.Error = v
		case "input":
			o.Input = v
		case "nice":
			n := 100
			if g.has {
				n, _ = strconv.Atoi(v)
			}
			o.Nice = &n
		case "nodelist":
			o.Nodelist = v
		case "exclude":
			o.Exclude = v
		}
	}
	r.command = rest
	return r, nil
}

func allocUsage(prog string) string {
	return fmt.Sprintf(`Usage: %s [OPTIONS...] executable [args...]

Berth's %s: the job options of sbatch (-N, -n, --ntasks-per-node, -c, --mem,
--mem-per-cpu, --gres, --gpus, -p, -q, -A, -t, -J, -D, --export, --exclusive,
--dependency, --begin) and:
  -l, --label                 prepend task number to lines of stdout/err
      --pty                   run task zero in pseudo terminal mode
  -Q, --quiet                 quiet mode (suppress informational messages)

See docs/coming-from-slurm.md.
`, prog, prog)
}

// allocTask is the run srun or salloc submits: sbatch's mapping of the
// resources, the name and the environment, with commands of its own.
func allocTask(r *allocRequest, tool, defaultName string, s submitter, commands []string) (*spec.Task, resources, error) {
	o := &r.opt
	if o.JobName == "" {
		o.JobName = defaultName
	}
	if o.Chdir == "" {
		o.Chdir = s.cwd
	} else if !filepath.IsAbs(o.Chdir) {
		o.Chdir = filepath.Join(s.cwd, o.Chdir)
	}
	res, err := componentResources(o)
	if err != nil {
		return nil, res, err
	}
	t := &spec.Task{Type: "task", Name: runNameFor(o.JobName), WorkingDir: o.Chdir, Nodes: res.nodes, Resources: res.spec(),
		Commands: commands, Tags: map[string]string{tagJobName: o.JobName, tagTool: tool, tagUser: s.user, tagGroup: s.group,
			tagUID: strconv.Itoa(s.uid), tagGID: strconv.Itoa(s.gid), tagSubmitHost: s.host}}
	if o.Account != "" {
		t.Tags[tagAccount] = o.Account
		t.Project = o.Account // -A chooses among the submitter's projects
	}
	if o.Comment != "" {
		t.Tags[tagComment] = o.Comment
	}
	if res.ntasksGiven {
		t.Tags[tagNTasks] = strconv.Itoa(res.nodes * res.tasksPerNode)
		t.Tags[tagNTasksPerNode] = strconv.Itoa(res.tasksPerNode)
	}
	if o.CPUsPerTask > 0 {
		t.Tags[tagCPUsPerTask] = strconv.Itoa(o.CPUsPerTask)
	}
	for _, p := range o.Partition {
		if p != defaultPartition {
			t.Fleets = append(t.Fleets, p)
		}
	}
	if o.QOS != "" && !strings.EqualFold(o.QOS, "normal") {
		t.QOS = o.QOS
	}
	if o.Nice != nil {
		t.Nice = int64(*o.Nice)
	}
	t.Exclusive = o.Exclusive == "exclusive"
	if o.TimeLimit > 0 && o.TimeLimit != slurm.Unlimited {
		d := spec.Duration(o.TimeLimit / time.Second)
		t.MaxDuration = &d
	}
	if o.Dependency != nil {
		if err := dependsOn(t, o.Dependency, func(uint32) bool { return true }); err != nil {
			return nil, res, err
		}
	}
	var env envList
	exportEnv(o.Export, s.env, &env)
	for _, kv := range [][2]string{
		{"SLURM_SUBMIT_DIR", s.cwd}, {"SLURM_SUBMIT_HOST", s.host}, {"SLURM_JOB_NAME", o.JobName},
		{"SLURM_JOB_USER", s.user}, {"SLURM_CLUSTER_NAME", clusterName},
	} {
		env.set(kv[0], kv[1])
	}
	if o.CPUsPerTask > 0 {
		env.set("SLURM_CPUS_PER_TASK", strconv.Itoa(o.CPUsPerTask))
	}
	t.Env = env.spec()
	t.Normalize()
	if err := t.Validate(); err != nil {
		return nil, res, slurmFail(1, fmt.Sprintf("%s: error: %v", tool, err))
	}
	return t, res, nil
}

// stepCommands is the shell that starts a step's tasks on each node of a
// one-off srun run: node k runs its share of the tasks (block
// distribution), each with SLURM_PROCID and SLURM_LOCALID, and exits with
// the highest exit status.
func stepCommands(command []string, ntasks, nodes int, label, labelInJob bool) string {
	var argv []string
	for _, a := range command {
		argv = append(argv, shQuote(a))
	}
	cmd := strings.Join(argv, " ")
	base, rem := ntasks/nodes, ntasks%nodes
	var b strings.Builder
	fmt.Fprintf(&b, "__nid=${SLURM_NODEID:-0}\n__n=$(( %d + (__nid < %d ? 1 : 0) ))\n__first=$(( __nid * %d + (__nid < %d ? __nid : %d) ))\n", base, rem, base, rem, rem)
	fmt.Fprintf(&b, "export SLURM_STEP_ID=0 SLURM_STEPID=0 SLURM_NTASKS=%d SLURM_NPROCS=%d SLURM_STEP_NUM_TASKS=%d SLURM_STEP_NUM_NODES=%d SLURM_STEP_NODELIST=\"$SLURM_JOB_NODELIST\"\n",
		ntasks, ntasks, ntasks, nodes)
	if ntasks == nodes && !labelInJob {
		fmt.Fprintf(&b, "SLURM_PROCID=$__first SLURM_LOCALID=0 exec %s\n", cmd)
		return b.String()
	}
	run := cmd
	if label && labelInJob {
		run = fmt.Sprintf(`__l=$(printf '%%%dd' "$SLURM_PROCID"); { %s; } 2>&1 | sed -u "s/^/$__l: /"; exit "${PIPESTATUS[0]}"`, labelWidth(ntasks), cmd)
	}
	b.WriteString("set +e\n__pids=\n")
	fmt.Fprintf(&b, "__i=0\nwhile [ $__i -lt $__n ]; do\n  ( export SLURM_PROCID=$((__first + __i)) SLURM_LOCALID=$__i; %s ) &\n  __pids=\"$__pids $!\"\n  __i=$((__i + 1))\ndone\n", run)
	b.WriteString("__rc=0\nfor __p in $__pids; do wait $__p; __c=$?; [ $__c -gt $__rc ] && __rc=$__c; done\nexit $__rc\n")
	return b.String()
}

func runSrun(e *slurmEnv, args []string) error {
	r, err := parseAllocArgs("srun", args)
	if err != nil {
		return err
	}
	if len(r.command) == 0 {
		return slurmFail(1, "srun: fatal: No command given to execute.")
	}
	if e.getenv("SLURM_JOB_ID") != "" {
		return srunStep(e, r)
	}
	if r.pty {
		return srunPty(e, r)
	}
	return srunOneOff(e, r)
}

// srunOneOff submits the command as a run, streams its output as srun
// does, and exits with its exit status.
func srunOneOff(e *slurmEnv, r *allocRequest) error {
	s := currentSubmitter(e)
	o := &r.opt
	res, err := componentResources(o)
	if err != nil {
		return err
	}
	ntasks := res.nodes * res.tasksPerNode
	if o.NTasks > 0 {
		ntasks = o.NTasks
	}
	labelInJob := r.label && ntasks != res.nodes
	cmds := []string{stepCommands(r.command, ntasks, res.nodes, r.label, labelInJob)}
	t, _, err := allocTask(r, "srun", filepath.Base(r.command[0]), s, cmds)
	if err != nil {
		return err
	}
	t.Tags[tagNTasks] = strconv.Itoa(ntasks)
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "srun: error: Unable to allocate resources: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	run, err := c.Submit(e.ctx, api.SubmitRequest{Spec: t, Source: "srun", Hold: o.Hold, Begin: futureUTC(o.Begin, s.now)})
	if err != nil {
		return allocError("srun", err)
	}
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !r.quiet {
		// A run still waiting after a second is queued: say so, and when
		// it gets its nodes, as srun does.
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if cur, err := c.Run(ctx, strconv.FormatInt(run.ID, 10)); err != nil || cur.Status != api.StatusSubmitted {
				return
			}
			fmt.Fprintf(e.stderr, "srun: job %d queued and waiting for resources\n", run.ID)
			for ctx.Err() == nil {
				time.Sleep(500 * time.Millisecond)
				if cur, err := c.Run(ctx, strconv.FormatInt(run.ID, 10)); err == nil && cur.Status != api.StatusSubmitted {
					fmt.Fprintf(e.stderr, "srun: job %d has been allocated resources\n", run.ID)
					return
				}
			}
		}()
	}
	lw := newLabeler(e.stdout, e.stderr, r.label && !labelInJob, ntasks)
	end, err := c.Logs(ctx, strconv.FormatInt(run.ID, 10), client.LogOptions{Follow: true, Job: -1, Reconnect: 2 * time.Minute}, lw.write)
	lw.flush()
	if ctx.Err() != nil && e.ctx.Err() == nil {
		fmt.Fprintf(e.stderr, "srun: forcing job termination\n")
		_, _ = c.Stop(e.ctx, strconv.FormatInt(run.ID, 10), false)
		fmt.Fprintf(e.stderr, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n")
		return &ExitError{Code: 1}
	}
	if err != nil {
		return slurmFail(1, "srun: error: "+err.Error())
	}
	return srunExit(e, end, res.tasksPerNode)
}

func futureUTC(t, now time.Time) time.Time {
	if t.IsZero() || !t.After(now) {
		return time.Time{}
	}
	return t.UTC()
}

func allocError(prog string, err error) error {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		msg := apiMessage(apiErr)
		if m := slurmReasonRE().FindStringSubmatch(msg); m != nil {
			msg = m[1]
		}
		return slurmFail(1, prog+": error: Unable to allocate resources: "+msg)
	}
	return slurmFail(1, prog+": error: Unable to allocate resources: "+err.Error())
}

// srunExit reports the tasks that failed as srun does and exits with the
// highest status.
func srunExit(e *slurmEnv, r *api.Run, tasksPerNode int) error {
	if r == nil || r.Status == api.StatusDone {
		return nil
	}
	code := 1
	if r.ExitCode != nil && *r.ExitCode > 0 && *r.ExitCode < 256 {
		code = *r.ExitCode
	}
	switch slurmState(r).Base() {
	case slurm.JobTimeout:
		fmt.Fprintf(e.stderr, "srun: error: *** STEP %d.0 ON %s CANCELLED AT %s DUE TO TIME LIMIT ***\n", r.ID, firstNode(r), slurm.FormatTimestamp(localTime(r.FinishedAt)))
	case slurm.JobCancelled:
		fmt.Fprintf(e.stderr, "srun: error: *** STEP %d.0 ON %s CANCELLED AT %s ***\n", r.ID, firstNode(r), slurm.FormatTimestamp(localTime(r.FinishedAt)))
	default:
		for _, j := range r.Jobs {
			if j.ExitCode != nil && *j.ExitCode != 0 {
				fmt.Fprintf(e.stderr, "srun: error: %s: task %d: Exited with exit code %d\n", j.Node, j.Num*tasksPerNode, *j.ExitCode)
			}
		}
	}
	return &ExitError{Code: code}
}

// labeler writes a run's output; with label, each line starts with its
// task number ("0: "), which is the node's rank when each node runs one.
type labeler struct {
	out, errw io.Writer
	label     bool
	ntasks    int
	partial   map[partKey][]byte
}

func newLabeler(out, errw io.Writer, label bool, ntasks int) *labeler {
	return &labeler{out: out, errw: errw, label: label, ntasks: ntasks, partial: map[partKey][]byte{}}
}

// labelWidth is the width of srun -l's task numbers: the digits of the
// highest (step_io.c's _wid), so that labels line up ("  7: ", " 10: ").
func labelWidth(ntasks int) int {
	w := 1
	for n := ntasks - 1; n >= 10; n /= 10 {
		w++
	}
	return w
}

// taskLabel is srun -l's label of a task: "%*d: " (write_labelled_message.c).
func taskLabel(task, ntasks int) string {
	return fmt.Sprintf("%*d: ", labelWidth(ntasks), task)
}

func (l *labeler) write(en api.LogEntry) {
	key := partKey{job: en.JobNum, stderr: en.Stream == "stderr"}
	w := l.out
	if key.stderr {
		w = l.errw
	}
	if !l.label {
		_, _ = w.Write(en.Data)
		return
	}
	buf := append(l.partial[key], en.Data...)
	for {
		i := strings.IndexByte(string(buf), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(w, "%s%s", taskLabel(key.job, l.ntasks), buf[:i+1])
		buf = buf[i+1:]
	}
	l.partial[key] = buf
}

func (l *labeler) flush() {
	for key, buf := range l.partial {
		if len(buf) > 0 {
			w := l.out
			if key.stderr {
				w = l.errw
			}
			fmt.Fprintf(w, "%s%s\n", taskLabel(key.job, l.ntasks), buf)
		}
	}
	clear(l.partial)
}

// stepLayout is how a step's tasks spread over the allocation's nodes:
// how many run on this node and the global rank of the first.
type stepLayout struct {
	ntasks, nodes int
	local, first  int
	thisNode      int
}

// layoutStep computes a step's layout inside an allocation from its
// options and the allocation's variables (block distribution, as Slurm's
// default).
func layoutStep(o *slurm.BatchOptions, getenv func(string) string) stepLayout {
	allocNodes, _ := strconv.Atoi(getenv("SLURM_JOB_NUM_NODES"))
	if allocNodes <= 0 {
		allocNodes, _ = strconv.Atoi(getenv("SLURM_NNODES"))
	}
	allocNodes = max(allocNodes, 1)
	nodeID, _ := strconv.Atoi(getenv("SLURM_NODEID"))
	l := stepLayout{thisNode: nodeID}
	l.nodes = allocNodes
	if o.Nodes > 0 {
		l.nodes = min(o.Nodes, allocNodes)
	}
	switch {
	case o.NTasks > 0:
		l.ntasks = o.NTasks
		if o.Nodes == 0 {
			l.nodes = min(l.nodes, o.NTasks)
		}
	case o.NTasksPerNode > 0:
		l.ntasks = o.NTasksPerNode * l.nodes
	default:
		n, _ := strconv.Atoi(getenv("SLURM_NTASKS"))
		if n <= 0 || o.Nodes > 0 {
			n = l.nodes
		}
		l.ntasks = n
	}
	l.nodes = max(min(l.nodes, l.ntasks), 1)
	l.local, l.first = stepShare(l.ntasks, l.nodes, nodeID)
	return l
}

// srunStep runs a job step inside an allocation, with the step's
// variables, and records it (sacct's JOBID.STEPID). In a batch job, this
// (the first) node's tasks run here and the other nodes' through the step
// relay (slurm_steps.go); in salloc's shell and srun --pty's allocation,
// every task runs on the allocated nodes through the relay. Without step
// hosts (BERTH_SLURM_STEPS unset: a single-node batch job), every task of
// the step runs here.
func srunStep(e *slurmEnv, r *allocRequest) error {
	// --input: none, or a file, in place of srun's own (all, the
	// default; a task number is not applied: every task gets it).
	switch in := r.opt.Input; {
	case in == "" || in == "all":
	case in == "none":
		e2 := *e
		e2.stdin, e = nil, &e2
	default:
		if _, err := strconv.Atoi(in); err == nil {
			break
		}
		f, err := os.Open(in)
		if err != nil {
			return slurmFail(1, "srun: error: Could not open stdin file: "+err.Error())
		}
		defer f.Close()
		e2 := *e
		e2.stdin, e = f, &e2
	}
	l := layoutStep(&r.opt, e.getenv)
	hosts, _ := slurm.ExpandHostlist(e.getenv("SLURM_JOB_NODELIST"))
	if len(hosts) == 0 {
		hosts = []string{orStr(e.getenv("SLURMD_NODENAME"), "localhost")}
	}
	everything := e.getenv("SLURMD_NODENAME") == ""
	relay := e.getenv("BERTH_SLURM_STEPS") == "1"
	nodes, err := stepPlacement(e, r, hosts, l.nodes)
	if err != nil {
		return slurmFail(1, "srun: error: "+err.Error())
	}
	ntasks := l.ntasks
	if len(nodes) != l.nodes && r.opt.NTasks == 0 {
		ntasks = len(nodes) * max(r.opt.NTasksPerNode, 1)
	}
	this := -1
	if !everything {
		this, _ = strconv.Atoi(e.getenv("SLURM_NODEID"))
	}
	type task struct{ rank, local int }
	var tasks []task
	var ranks []int
	if relay {
		for _, k := range nodes {
			if k != this {
				ranks = append(ranks, k)
			}
		}
		if i := indexOf(nodes, this); i >= 0 {
			n, first := stepShare(ntasks, len(nodes), i)
			for j := 0; j < n; j++ {
				tasks = append(tasks, task{rank: first + j, local: j})
			}
		}
	} else {
		for i := 0; i < ntasks; i++ {
			tasks = append(tasks, task{rank: i, local: i})
		}
	}
	// srun's input: with --pty, task 0's terminal; else, when there is
	// some, every task's (Slurm's --input=all).
	broadcast := !r.pty && forwardsInput(e)
	attach := len(ranks) > 0 && (r.pty && nodes[0] != this || broadcast)
	step, err := createStep(e, r, hosts, nodes, ranks, ntasks, attach)
	if err != nil {
		if len(ranks) > 0 {
			return slurmFail(1, "srun: error: Unable to create step for job "+e.getenv("SLURM_JOB_ID")+": "+err.Error())
		}
		step = nil // nothing to relay: the step runs here, unrecorded
	}
	stdout, stderr := e.stdout, e.stderr
	stepID := "0"
	if step != nil {
		stepID = strconv.Itoa(step.id)
	}
	path, lookErr := exec.LookPath(r.command[0])
	base := os.Environ()
	stepEnv := map[string]string{
		"SLURM_STEP_ID": stepID, "SLURM_STEPID": stepID, "SLURM_NTASKS": strconv.Itoa(ntasks), "SLURM_NPROCS": strconv.Itoa(ntasks),
		"SLURM_STEP_NUM_TASKS": strconv.Itoa(ntasks), "SLURM_STEP_NUM_NODES": strconv.Itoa(len(nodes)),
		"SLURM_STEP_NODELIST": e.getenv("SLURM_JOB_NODELIST"),
	}
	if r.opt.CPUsPerTask > 0 {
		stepEnv["SLURM_CPUS_PER_TASK"] = strconv.Itoa(r.opt.CPUsPerTask)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	codes := make([]int, len(tasks))
	var procs []*os.Process
	var pmu sync.Mutex
	// Inside a job, each task here runs in a process group of its own,
	// recorded for the job's shim, as slurmstepd keeps a step's tasks
	// apart from the batch shell: a signal for the job's steps (--signal
	// without B:) reaches them and not the batch shell (agent/steps.go).
	// Not with --pty: task 0 then reads srun's terminal, which only its
	// foreground group may.
	jobDir := e.getenv("BERTH_JOB_DIR")
	ownGroups := jobDir != "" && !r.pty
	signalTasks := func(sig syscall.Signal) {
		pmu.Lock()
		defer pmu.Unlock()
		for _, p := range procs {
			if !ownGroups || syscall.Kill(-p.Pid, sig) != nil {
				_ = p.Signal(sig)
			}
		}
	}
	if step != nil {
		stop := step.forwardSignals(e, signalTasks)
		defer stop()
	}
	// scancel JOB.STEP: the tasks here end as the other nodes' do,
	// SIGTERM then SIGKILL.
	cancelled := func() {
		mu.Lock()
		fmt.Fprintf(stderr, "slurmstepd: error: *** STEP %s.%s ON %s CANCELLED AT %s ***\n", e.getenv("SLURM_JOB_ID"), stepID,
			orStr(e.getenv("SLURMD_NODENAME"), hosts[nodes[0]]), slurm.FormatTimestamp(time.Now()))
		mu.Unlock()
		signalTasks(syscall.SIGTERM)
		time.AfterFunc(10*time.Second, func() { signalTasks(syscall.SIGKILL) })
	}
	var remoteDone chan []remoteExit
	var attached chan int
	watchCtx, stopWatch := context.WithCancel(e.ctx)
	defer stopWatch()
	if step != nil && len(ranks) == 0 {
		go step.watch(watchCtx, cancelled)
	}
	if step != nil && len(ranks) > 0 {
		remoteDone = make(chan []remoteExit, 1)
		go func() {
			remoteDone <- step.follow(e.ctx, &lockedWriter{w: stdout, mu: &mu}, &lockedWriter{w: stderr, mu: &mu}, cancelled)
		}()
		if attach && r.pty {
			attached = make(chan int, 1)
			go func() { attached <- step.attach(e) }()
		}
	}
	var localInputs []io.WriteCloser
	for i, tk := range tasks {
		if lookErr != nil {
			fmt.Fprintf(stderr, "slurmstepd: error: execve(): %s: No such file or directory\n", r.command[0])
			codes[i] = 2
			continue
		}
		cmd := exec.CommandContext(e.ctx, path, r.command[1:]...)
		cmd.Args[0] = r.command[0]
		env := append([]string(nil), base...)
		for k, v := range stepEnv {
			env = append(env, k+"="+v)
		}
		env = append(env, "SLURM_PROCID="+strconv.Itoa(tk.rank), "SLURM_LOCALID="+strconv.Itoa(tk.local))
		if everything {
			env = append(env, "SLURM_NODEID="+strconv.Itoa(tk.rank*len(nodes)/max(ntasks, 1)))
		}
		cmd.Env = env
		// Standard input goes to every task (to task 0's terminal with
		// --pty), as srun forwards it.
		switch {
		case broadcast:
			if in, err := cmd.StdinPipe(); err == nil {
				localInputs = append(localInputs, in)
			}
		case tk.rank == 0:
			cmd.Stdin = e.stdin
			if r.pty && e.interactiveIn != nil {
				cmd.Stdin = e.interactiveIn
			}
		}
		var outW, errW io.Writer = stdout, stderr
		var flushers []func()
		if r.label {
			lo := &lineLabel{w: stdout, mu: &mu, prefix: taskLabel(tk.rank, ntasks)}
			le := &lineLabel{w: stderr, mu: &mu, prefix: taskLabel(tk.rank, ntasks)}
			outW, errW = lo, le
			flushers = append(flushers, lo.flush, le.flush)
		} else {
			outW, errW = &lockedWriter{w: stdout, mu: &mu}, &lockedWriter{w: stderr, mu: &mu}
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		if ownGroups {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		}
		if err := cmd.Start(); err != nil {
			codes[i] = 2
			continue
		}
		pmu.Lock()
		procs = append(procs, cmd.Process)
		pmu.Unlock()
		recorded := func() {}
		if ownGroups {
			recorded = agent.RecordStepTask(jobDir, cmd.Process.Pid)
		}
		wg.Add(1)
		go func(i int, cmd *exec.Cmd, flushers []func()) {
			defer wg.Done()
			codes[i] = exitCodeOf(cmd.Wait())
			recorded()
			for _, f := range flushers {
				f()
			}
		}(i, cmd, flushers)
	}
	if broadcast {
		remote := step
		if len(ranks) == 0 {
			remote = nil
		}
		go feedInput(e, remote, localInputs)
	}
	wg.Wait()
	stopWatch()
	worst := 0
	host := orStr(e.getenv("SLURMD_NODENAME"), "localhost")
	for i, c := range codes {
		if c != 0 {
			fmt.Fprintf(stderr, "srun: error: %s: task %d: Exited with exit code %d\n", host, tasks[i].rank, c)
		}
		worst = max(worst, c)
	}
	if step != nil {
		for _, k := range nodes {
			if indexOf(ranks, k) < 0 {
				step.exitHere(context.WithoutCancel(e.ctx), k, worst)
			}
		}
	}
	if attached != nil {
		<-attached
	}
	if remoteDone != nil {
		for _, x := range <-remoteDone {
			if x.code != 0 {
				fmt.Fprintf(stderr, "srun: error: %s: task %d: Exited with exit code %d\n", x.host, x.task, x.code)
			}
			worst = max(worst, x.code)
		}
	}
	if worst != 0 {
		return &ExitError{Code: worst}
	}
	return nil
}

// forwardsInput tells whether srun has input to forward to task 0 (not
// /dev/null, as in a batch job).
func forwardsInput(e *slurmEnv) bool {
	if e.stdin == nil {
		return false
	}
	f, ok := e.stdin.(*os.File)
	if !ok {
		return true
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// lineLabel prefixes each line with the task's rank (srun -l).
type lineLabel struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	buf    []byte
}

func (l *lineLabel) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.mu.Lock()
		_, err := io.WriteString(l.w, l.prefix+string(l.buf[:i+1]))
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineLabel) flush() {
	if len(l.buf) > 0 {
		l.mu.Lock()
		io.WriteString(l.w, l.prefix+string(l.buf)+"\n")
		l.mu.Unlock()
		l.buf = nil
	}
}
