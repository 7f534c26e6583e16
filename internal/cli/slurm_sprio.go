package cli

import (
	"fmt"
	"io"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

var sprioOptions = []slurmOpt{
	{"noheader", 'h', noArg}, {"jobs", 'j', optionalArg}, {"long", 'l', noArg}, {"cluster", 'M', reqArg},
	{"clusters", 'M', reqArg}, {"norm", 'n', noArg}, {"format", 'o', reqArg}, {"sort", 'S', reqArg},
	{"partition", 'p', reqArg}, {"user", 'u', reqArg}, {"users", 'u', reqArg}, {"verbose", 'v', noArg},
	{"version", 'V', noArg}, {"weights", 'w', noArg}, {"federation", 0, noArg}, {"help", 0, noArg},
	{"local", 0, noArg}, {"sib", 0, noArg}, {"sibling", 0, noArg}, {"usage", 0, noArg},
}

const sprioUsage = "Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]\n" +
	"     [--federation] [--local] [--sibling] [--usage] [-hlnvVw]\n"

// runSprio is Slurm's sprio: the pending jobs' priority factors, weighted
// (-n: normalized), from the server's multifactor priority. Berth's own
// factors that Slurm has no column for (the run's own priority, the
// expansion factor) are its SITE, so that the columns add up to PRIORITY
// as Slurm's do.
func runSprio(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("sprio", args, sprioOptions, true)
	if err != nil {
		return err
	}
	var (
		o          slurm.SprioOptions
		jobs       []slurm.JobSelector
		jobsGiven  bool
		users      []string
		partitions []string
	)
	for _, g := range got {
		switch g.name {
		case "noheader":
			o.NoHeader = true
		case "long":
			o.Long = true
		case "norm":
			o.Normalized = true
		case "weights":
			o.Weights = true
		case "jobs":
			jobsGiven = true
			if g.val != "" {
				sels, err := parseJobList("sprio", g.val)
				if err != nil {
					return err
				}
				jobs = append(jobs, sels...)
			}
		case "user":
			o.Users = true
			users = append(users, splitList(g.val)...)
		case "partition":
			partitions = append(partitions, splitList(g.val)...)
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "help", "usage":
			io.WriteString(e.stdout, sprioUsage)
			return nil
		case "format", "sort":
			return slurmFail(1, "sprio: error: -"+map[string]string{"format": "o", "sort": "S"}[g.name]+" is not supported by Berth: sprio prints its default columns (-l, -n, -w, -u)")
		}
	}
	// -j's list may be the next word (opts.c: optind after -j).
	if jobsGiven && len(jobs) == 0 && len(rest) > 0 {
		sels, err := parseJobList("sprio", rest[0])
		if err != nil {
			return err
		}
		jobs, rest = sels, rest[1:]
	}
	if len(rest) > 0 {
		return &slurm.CommandError{Stdout: sprioUsage, Stderr: []string{"sprio: error: Unrecognized option: " + rest[0]}, ExitCode: 1}
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "Couldn't get priority factors from controller: Unable to contact slurm controller (connect failure)")
	}
	st, err := c.Status(e.ctx)
	if err != nil || st.Config == nil || st.Config.Weights == nil {
		return slurmFail(1, "Couldn't get priority factors from controller: Unable to contact slurm controller (connect failure)")
	}
	bw := st.Config.Weights
	w := slurm.PrioWeights{Age: bw.Age, Fairshare: bw.Fairshare, JobSize: bw.JobSize, QOS: bw.QOS, Partition: bw.Partition}
	prios, err := c.Priorities(e.ctx)
	if err != nil {
		return slurmFail(1, "Couldn't get priority factors from controller: "+err.Error())
	}
	v, err := fetchView(e, "sprio", runSelection{})
	if err != nil {
		return err
	}
	var rows []slurm.PrioRow
	for _, p := range prios {
		r := v.ByID[p.RunID]
		if r == nil || r.Array != nil {
			continue // an array's waiting tasks have no factors of their own yet
		}
		row := slurm.PrioRow{JobID: u32(p.RunID), Partition: v.Partition(r), User: slurmconv.JobUser(r),
			Age: float64(p.Age), Fairshare: float64(p.Fairshare), JobSize: float64(p.JobSize), PartPrio: float64(p.Partition),
			QOS: float64(p.QOS), Nice: p.Nice}
		row.Site = p.Priority - (p.Age + p.Fairshare + p.JobSize + p.Partition + p.QOS) + p.Nice
		if len(users) > 0 && !contains(users, row.User) {
			continue
		}
		if len(partitions) > 0 && !contains(partitions, row.Partition) {
			continue
		}
		if len(jobs) > 0 && !selects(jobs, r) {
			continue
		}
		rows = append(rows, row)
	}
	if jobsGiven && len(rows) == 0 && !o.Weights {
		fmt.Fprintln(e.stdout, "Unable to find jobs matching user/id(s) specified")
		return nil
	}
	io.WriteString(e.stdout, slurm.FormatSprio(rows, w, o))
	return nil
}

// selects reports whether a -j list names the run (an array task by its
// array's id or as N_M).
func selects(sels []slurm.JobSelector, r *api.Run) bool {
	for _, s := range sels {
		switch {
		case s.Task == slurm.NoArrayTask && (u32(r.ID) == s.JobID || (r.ArrayID != 0 && u32(r.ArrayID) == s.JobID)):
			return true
		case s.Task != slurm.NoArrayTask && r.ArrayIndex != nil && u32(r.ArrayID) == s.JobID && *r.ArrayIndex == s.Task:
			return true
		}
	}
	return false
}
