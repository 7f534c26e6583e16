package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
)

// sstat shows the usage of running job steps, as Slurm's sstat does, from
// the agents' samples of each job (berth metrics): the memory and CPU time
// of the job's cgroup on each of the step's nodes. A cgroup holds the
// job, not each step: a step's figures are those of the job on its nodes.

var sstatOptions = []slurmOpt{
	{"allsteps", 'a', noArg}, {"helpformat", 'e', noArg}, {"help", 'h', noArg}, {"pidformat", 'i', noArg},
	{"jobs", 'j', reqArg}, {"noheader", 'n', noArg}, {"format", 'o', reqArg}, {"fields", 'o', reqArg},
	{"parsable", 'p', noArg}, {"parsable2", 'P', noArg}, {"usage", 0, noArg}, {"verbose", 'v', noArg},
	{"version", 'V', noArg}, {"noconvert", 0, noArg}, {"json", 0, noArg}, {"yaml", 0, noArg},
}

// sstatWanted is one item of sstat's job list: a job (or array task) and
// the step asked for ("" none).
type sstatWanted struct {
	job  slurm.JobSelector
	step string
}

func runSstat(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("sstat", args, sstatOptions, true)
	if err != nil {
		return err
	}
	var (
		o      slurm.SacctOptions
		all    bool
		wanted []sstatWanted
	)
	addJobs := func(list string) error {
		for _, item := range splitOutsideBrackets(list) {
			if item == "" {
				continue
			}
			id, step, _ := strings.Cut(item, ".")
			sels, err := parseJobList("sstat", id)
			if err != nil {
				return err
			}
			for _, s := range sels {
				wanted = append(wanted, sstatWanted{job: s, step: step})
			}
		}
		return nil
	}
	for _, g := range got {
		switch g.name {
		case "help", "usage":
			fmt.Fprint(e.stdout, "Usage: sstat [options] -j <job(.stepid)>\n  -a, --allsteps   all the steps of the jobs\n  -e, --helpformat the fields -o takes\n"+
				"  -j, --jobs       a comma-separated list of job(.step)s\n  -n, --noheader   -o, --format  -p, --parsable  -P, --parsable2\n")
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "helpformat":
			io.WriteString(e.stdout, sacctFieldList)
			return nil
		case "allsteps":
			all = true
		case "jobs":
			if err := addJobs(g.val); err != nil {
				return err
			}
		case "noheader":
			o.NoHeader = true
		case "format":
			if o.Format != "" {
				o.Format += ","
			}
			o.Format += g.val
		case "parsable":
			o.Parsable = true
		case "parsable2":
			o.Parsable2 = true
		case "pidformat":
			return slurmFail(1, "sstat: error: --pidformat is not supported by Berth: a job's processes are in its cgroup on each node")
		case "json", "yaml":
			return slurmFail(1, "sstat: error: --"+g.name+" is not supported by Berth")
		}
	}
	for _, a := range rest {
		if err := addJobs(a); err != nil {
			return err
		}
	}
	if len(wanted) == 0 {
		return slurmFail(1, "sstat: error: You didn't give me any jobs to stat.")
	}
	if o.Format == "" {
		o.Format = slurm.SstatFields
	}
	o.Sstat = true
	// The header first, as sstat prints it before asking for anything.
	header, err := slurm.FormatSacct(nil, o)
	if err != nil {
		return err
	}
	io.WriteString(e.stdout, header)
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "sstat: error: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	rows := o
	rows.NoHeader = true
	for _, w := range wanted {
		recs, problem := sstatSteps(e, c, w, all)
		if problem != "" {
			fmt.Fprintln(e.stderr, "sstat: error: "+problem)
			continue
		}
		out, err := slurm.FormatSacct(recs, rows)
		if err != nil {
			return err
		}
		io.WriteString(e.stdout, out)
	}
	return nil
}

// sstatSteps are the records of a wanted job's running steps, or what
// sstat says when there are none.
func sstatSteps(e *slurmEnv, c *client.Client, w sstatWanted, all bool) ([]slurm.AcctRecord, string) {
	ref := w.job.String()
	run, err := c.Run(e.ctx, ref)
	if err != nil || run.Array != nil {
		return nil, fmt.Sprintf("couldn't get steps for job %d", w.job.JobID)
	}
	type step struct {
		id     string
		nodes  []string
		ntasks int
	}
	var running []step
	if run.Status == api.StatusRunning {
		if t := slurmPart(run).Tool; t == "sbatch" || t == "" {
			running = append(running, step{id: "batch", nodes: []string{firstNode(run)}, ntasks: 1})
		}
		steps, err := c.Steps(e.ctx, []int64{run.ID})
		if err != nil {
			return nil, fmt.Sprintf("couldn't get steps for job %d", w.job.JobID)
		}
		for _, p := range steps {
			if p.Status == "running" {
				nodes, _ := slurm.ExpandHostlist(p.NodeList)
				running = append(running, step{id: strconv.Itoa(p.ID), nodes: nodes, ntasks: p.NTasks})
			}
		}
	}
	// Without a step, the first numbered one (-a: all, batch too).
	var chosen []step
	for _, s := range running {
		switch {
		case all && w.step == "":
			chosen = append(chosen, s)
		case w.step == "" && s.id != "batch" && len(chosen) == 0:
			chosen = append(chosen, s)
		case w.step != "" && s.id == w.step:
			chosen = append(chosen, s)
		}
	}
	if len(chosen) == 0 {
		if w.step == "" && len(running) > 0 {
			// Only the batch step runs: sstat skips it without -a and
			// says nothing (sstat.c: the special steps are skipped).
			return nil, ""
		}
		if w.step == "" {
			return nil, fmt.Sprintf("No steps running for job %d", w.job.JobID)
		}
		return nil, fmt.Sprintf("StepId=%d.%s not found running.", w.job.JobID, w.step)
	}
	m, err := c.RunMetrics(e.ctx, strconv.FormatInt(run.ID, 10), client.MetricsOptions{History: -1})
	if err != nil {
		return nil, fmt.Sprintf("couldn't get steps for job %d", w.job.JobID)
	}
	var out []slurm.AcctRecord
	for _, s := range chosen {
		rec := slurm.AcctRecord{JobID: u32(run.ID), Step: s.id, NTasks: s.ntasks, Extra: map[string]string{}}
		if run.ArrayID != 0 && run.ArrayIndex != nil {
			rec.ArrayJobID, rec.ArrayTaskID = u32(run.ArrayID), *run.ArrayIndex
		}
		usage := nodeUsage(m, s.nodes)
		if len(usage) > 0 {
			fillUsage(&rec, usage, s.ntasks, len(s.nodes))
		}
		out = append(out, rec)
	}
	return out, ""
}

// usageOf is what the samples say of the job on one node.
type usageOf struct {
	node    string
	rank    int     // the node's place among the step's
	peak    int64   // the most memory seen
	rss     int64   // the memory in use now
	cpuSecs float64 // CPU time so far
}

// nodeUsage is the job's usage on each of the nodes, from the latest
// attempt's samples.
func nodeUsage(m *api.RunMetrics, nodes []string) []usageOf {
	last := 0
	for _, j := range m.Jobs {
		last = max(last, j.Attempt)
	}
	var out []usageOf
	for k, n := range nodes {
		for _, j := range m.Jobs {
			if j.Attempt != last || j.Node != n || j.Latest == nil {
				continue
			}
			u := usageOf{node: n, rank: k, rss: j.Latest.MemoryUsed, cpuSecs: j.Latest.CPUSeconds}
			for _, s := range append(j.History, *j.Latest) {
				u.peak = max(u.peak, s.MemoryPeak, s.MemoryUsed)
			}
			out = append(out, u)
		}
	}
	return out
}

// fillUsage sets sstat's figures of a step from its nodes' usage: the
// highest memory (and where), the average, the least and the average CPU
// time (and where). A node's task is the first of its share.
func fillUsage(rec *slurm.AcctRecord, usage []usageOf, ntasks, nodes int) {
	task := func(u usageOf) string {
		_, first := stepShare(max(ntasks, 1), max(nodes, 1), u.rank)
		return strconv.Itoa(first)
	}
	top := slices.MaxFunc(usage, func(a, b usageOf) int { return cmp.Compare(a.peak, b.peak) })
	least := slices.MinFunc(usage, func(a, b usageOf) int { return cmp.Compare(a.cpuSecs, b.cpuSecs) })
	var rss int64
	var cpu float64
	for _, u := range usage {
		rss += u.rss
		cpu += u.cpuSecs
	}
	rec.MaxRSS = top.peak
	rec.Extra["MaxRSSNode"], rec.Extra["MaxRSSTask"] = top.node, task(top)
	rec.Extra["AveRSS"] = slurm.FormatMemory(rss / int64(len(usage)))
	seconds := func(s float64) string { return slurm.FormatElapsed(time.Duration(s) * time.Second) }
	rec.Extra["MinCPU"], rec.Extra["MinCPUNode"], rec.Extra["MinCPUTask"] = seconds(least.cpuSecs), least.node, task(least)
	rec.Extra["AveCPU"] = seconds(cpu / float64(len(usage)))
}

// stepShare is node k's share of a step's tasks under block distribution:
// how many and the global rank of the first.
func stepShare(ntasks, nodes, k int) (n, first int) {
	nodes = max(nodes, 1)
	base, rem := ntasks/nodes, ntasks%nodes
	share := func(i int) int {
		if i >= nodes {
			return 0
		}
		if i < rem {
			return base + 1
		}
		return base
	}
	for i := 0; i < k; i++ {
		first += share(i)
	}
	return share(k), first
}
