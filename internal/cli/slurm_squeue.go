package cli

import (
	"fmt"
	"io"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

var squeueOptions = []slurmOpt{
	{"account", 'A', reqArg}, {"all", 'a', noArg}, {"array", 'r', noArg}, {"array-unique", 0, noArg},
	{"noheader", 'h', noArg}, {"help", 0, noArg}, {"hide", 0, noArg}, {"iterate", 'i', reqArg},
	{"jobs", 'j', optionalArg}, {"local", 0, noArg}, {"long", 'l', noArg}, {"licenses", 'L', reqArg},
	{"cluster", 'M', reqArg}, {"clusters", 0, reqArg}, {"name", 'n', reqArg}, {"noconvert", 0, noArg},
	{"node", 0, reqArg}, {"nodes", 0, reqArg}, {"nodelist", 'w', reqArg}, {"format", 'o', reqArg},
	{"Format", 'O', reqArg}, {"partition", 'p', reqArg}, {"priority", 'P', noArg}, {"qos", 'q', reqArg},
	{"reservation", 'R', reqArg}, {"sib", 0, noArg}, {"sibling", 0, noArg}, {"sort", 'S', reqArg},
	{"start", 0, noArg}, {"steps", 's', optionalArg}, {"states", 't', reqArg}, {"user", 'u', reqArg},
	{"usage", 0, noArg}, {"verbose", 'v', noArg}, {"version", 'V', noArg}, {"federation", 0, noArg},
	{"json", 0, noArg}, {"yaml", 0, noArg}, {"me", 0, noArg},
}

const squeueUsage = `Usage: squeue [OPTIONS]
  -A, --account=account(s)        comma separated list of accounts
                                  to view, default is all accounts
  -a, --all                       display jobs in hidden partitions
  -h, --noheader                  no headers on output
  -i, --iterate=seconds           specify an interation period
  -j, --job=job(s)                comma separated list of jobs IDs
                                  to view, default is all
      --json                      Produce JSON output
  -l, --long                      long report
      --me                        equivalent to --user=<my username>
  -n, --name=job_name(s)          comma separated list of job names to view
  -o, --format=format             format specification
  -O, --Format=format             format specification
  -p, --partition=partition(s)    comma separated list of partitions
                                  to view, default is all partitions
  -q, --qos=qos(s)                comma separated list of qos's
                                  to view, default is all qos's
  -r, --array                     display one job array element per line
  -S, --sort=fields               comma separated list of fields to sort on
      --start                     print expected start times of pending jobs
  -t, --states=states             comma separated list of states to view,
                                  default is pending and running,
                                  '--states=all' reports all states
  -u, --user=user_name(s)         comma separated list of users to view
  -w, --nodelist=hostlist         list of nodes to view, default is
                                  all nodes

Help options:
  --help                          show this help message
  --usage                         display a brief summary of squeue options
`

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func currentUserName(e *slurmEnv) string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return e.getenv("USER")
}

func runSqueue(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("squeue", args, squeueOptions, true)
	if err != nil {
		return err
	}
	var (
		o        slurm.SqueueOptions
		f        slurm.JobFilter
		jobsFlag bool
		jobsArg  string
		asJSON   bool
		steps    bool
		stepList []string // --steps=JOB.STEP,…
		iterate  int
		nodelist []string
	)
	for _, g := range got {
		switch g.name {
		case "help":
			io.WriteString(e.stdout, squeueUsage)
			return nil
		case "usage":
			fmt.Fprintln(e.stdout, "Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid] [-n name] [-o format] [--only-job-state] [-p partitions] [--qos qos] [--reservation reservation] [--sort fields] [--start] [--step step_id] [-t states] [-u user_name] [--usage] [-L licenses] [-w nodes] [--federation] [--local] [--sibling] [--expand-patterns] [--json=data_parser] [--yaml=data_parser] [-ahjlrsv]")
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "account":
			f.Accounts = append(f.Accounts, splitList(g.val)...)
		case "array":
			o.Array = true
		case "noheader":
			o.NoHeader = true
		case "iterate":
			n, err := strconv.Atoi(g.val)
			if err != nil || n <= 0 {
				return slurmFail(1, fmt.Sprintf("squeue: error: --iterate=%s: must be a positive number of seconds", g.val))
			}
			iterate = n
		case "jobs":
			jobsFlag = true
			if g.has {
				jobsArg = g.val
			}
		case "long":
			o.Long = true
		case "name":
			f.Names = append(f.Names, splitList(g.val)...)
		case "format":
			o.Format = g.val
		case "Format":
			o.LongFormat = g.val
		case "partition":
			f.Partitions = append(f.Partitions, splitList(g.val)...)
		case "qos":
			f.QOS = append(f.QOS, splitList(g.val)...)
		case "sort":
			o.Sort = g.val
		case "start":
			o.Start = true
		case "steps":
			steps = true
			if g.val != "" {
				stepList = append(stepList, splitList(g.val)...)
			}
		case "states":
			st, all, err := slurm.ParseStateList(g.val)
			if err != nil {
				return err
			}
			f.States, f.AllStates = append(f.States, st...), f.AllStates || all
		case "user":
			f.Users = append(f.Users, splitList(g.val)...)
		case "me":
			f.Users = append(f.Users, currentUserName(e))
		case "node", "nodes", "nodelist":
			hosts, err := slurm.ExpandHostlist(g.val)
			if err != nil {
				return slurmFail(1, "squeue: error: Invalid node name "+g.val)
			}
			nodelist = append(nodelist, hosts...)
		case "json":
			asJSON = true
		case "yaml":
			return slurmFail(1, "squeue: error: --yaml is not supported by Berth; use --json")
		}
	}
	if len(rest) > 0 {
		if jobsFlag && jobsArg == "" {
			jobsArg, rest = rest[0], rest[1:]
		}
		if len(rest) > 0 {
			return slurmFail(1, "squeue: error: Unrecognized option: "+rest[0], "Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid] [-n name] [-o format] [-p partitions] [--qos qos] [--sort fields] [--start] [--step step_id] [-t states] [-u user_name] [--usage] [-w nodes] [-ahjlrsv]")
		}
	}
	if jobsArg != "" {
		sel, err := slurm.ParseJobSelectors(jobsArg)
		if err != nil {
			return err
		}
		f.Jobs = sel
	}
	f = startStates(o, f, steps)
	if steps {
		if o.Format != "" || o.LongFormat != "" {
			return slurmFail(1, "squeue: error: -o/-O with -s is not supported by Berth: squeue -s prints its default step columns")
		}
		return squeueSteps(e, f, stepList, o.Long, o.NoHeader)
	}
	once := func() error {
		needAll := f.AllStates || len(f.Jobs) > 0
		for _, s := range f.States {
			needAll = needAll || s.Finished()
		}
		sel := runSelection{}
		if needAll {
			sel = inMemory(e.now())
		}
		var (
			jobs []slurm.Job
			now  time.Time
		)
		if len(f.Jobs) > 0 {
			v, err := fetchView(e, "squeue", namedJobs(sel, f.Jobs))
			if err != nil {
				return err
			}
			if len(f.Jobs) == 1 && !v.Known(f.Jobs[0]) {
				return slurm.InvalidJobIDError()
			}
			// squeue -j shows the jobs it names in the default states only,
			// finished ones (still in memory) with -t all.
			jobs = v.Jobs()
			if len(nodelist) > 0 {
				jobs = onNodes(jobs, nodelist)
			}
			jobs, now = slurm.FilterJobs(jobs, f), v.Now
		} else {
			var err error
			if jobs, now, err = squeueJobs(e, sel, f, nodelist); err != nil {
				return err
			}
		}
		if asJSON {
			io.WriteString(e.stdout, slurm.SqueueJSON(jobs, slurmconv.ClusterName))
			return nil
		}
		o.Now = now
		out, warnings, err := slurm.FormatSqueue(jobs, o)
		for _, w := range warnings {
			fmt.Fprintln(e.stderr, w)
		}
		if err != nil {
			return err
		}
		io.WriteString(e.stdout, out)
		return nil
	}
	if iterate == 0 {
		return once()
	}
	for {
		if !o.Long {
			fmt.Fprintln(e.stdout, e.now().Format("Mon Jan _2 15:04:05 2006"))
		}
		if err := once(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		select {
		case <-e.ctx.Done():
			return nil
		case <-time.After(time.Duration(iterate) * time.Second):
		}
	}
}

// onNodes keeps the jobs running on one of the hosts.
func onNodes(jobs []slurm.Job, hosts []string) []slurm.Job {
	var out []slurm.Job
	for _, j := range jobs {
		on, _ := slurm.ExpandHostlist(j.NodeList)
		for _, h := range on {
			if contains(hosts, h) {
				out = append(out, j)
				break
			}
		}
	}
	return out
}

// squeueSteps is squeue -s: the running steps of the running jobs the
// filter keeps (-j, -u, -p…), the batch step with them; --steps=J.S names
// steps.
func squeueSteps(e *slurmEnv, f slurm.JobFilter, only []string, long, noHeader bool) error {
	v, err := fetchView(e, "squeue", runSelection{})
	if err != nil {
		return err
	}
	kept := map[uint32]bool{}
	for _, j := range slurm.FilterJobs(v.Jobs(), f) {
		kept[j.JobID] = true
	}
	var runs []*api.Run
	var ids []int64
	for i := range v.Runs {
		r := &v.Runs[i]
		if r.Status == api.StatusRunning && r.Array == nil && r.StartedAt != nil && kept[u32(r.ID)] {
			runs = append(runs, r)
			ids = append(ids, r.ID)
		}
	}
	byRun := map[int64][]api.Step{}
	if len(ids) > 0 {
		c, err := e.newClient()
		if err != nil {
			return slurmFail(1, "squeue: error: "+err.Error())
		}
		steps, err := c.Steps(e.ctx, ids)
		if err != nil {
			return slurmFail(1, "squeue: error: "+err.Error())
		}
		for _, p := range steps {
			if p.Status == "running" {
				byRun[p.RunID] = append(byRun[p.RunID], p)
			}
		}
	}
	var rows []slurm.StepRow
	for _, r := range runs {
		base := slurm.StepRow{JobID: u32(r.ID), Partition: v.Partition(r), User: slurmconv.JobUser(r), TimeLimit: slurmconv.TimeLimit(r.Spec)}
		if r.ArrayID != 0 && r.ArrayIndex != nil {
			base.ArrayID, base.ArrayTask = u32(r.ArrayID), *r.ArrayIndex
		}
		if t := slurmconv.Part(r).Tool; t == "sbatch" || t == "" {
			row := base
			row.Step, row.Name, row.NodeList, row.Start = "batch", "batch", firstNode(r), *r.StartedAt
			rows = append(rows, row)
		}
		for _, p := range byRun[r.ID] {
			row := base
			row.Step, row.Name, row.NodeList, row.Start = strconv.Itoa(p.ID), p.Name, p.NodeList, p.StartedAt
			rows = append(rows, row)
		}
	}
	if len(only) > 0 {
		var named []slurm.StepRow
		for _, row := range rows {
			if contains(only, strconv.FormatUint(uint64(row.JobID), 10)+"."+row.Step) {
				named = append(named, row)
			}
		}
		rows = named
	}
	io.WriteString(e.stdout, slurm.FormatSqueueSteps(rows, long, noHeader, v.Now))
	return nil
}

// startStates is squeue --start's default state list (opts.c): pending
// jobs only, unless -t names states.
func startStates(o slurm.SqueueOptions, f slurm.JobFilter, steps bool) slurm.JobFilter {
	if o.Start && !steps && f.States == nil && !f.AllStates {
		f.States = []slurm.JobState{slurm.JobPending}
	}
	return f
}

// firstNode is the first of a run's nodes, "(null)" when it has none.
func firstNode(r *api.Run) string {
	if n := slurmconv.UniqueNodes(r); len(n) > 0 {
		return n[0]
	}
	return "(null)"
}
