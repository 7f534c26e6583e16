package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

var sacctOptions = []slurmOpt{
	{"allusers", 'a', noArg}, {"accounts", 'A', reqArg}, {"allocations", 'X', noArg}, {"brief", 'b', noArg},
	{"completion", 'c', noArg}, {"constraints", 'C', reqArg}, {"delimiter", 0, reqArg}, {"dump", 'd', noArg},
	{"duplicates", 'D', noArg}, {"helpformat", 'e', noArg}, {"endtime", 'E', reqArg}, {"file", 'f', reqArg},
	{"gid", 'g', reqArg}, {"group", 0, reqArg}, {"help", 'h', noArg}, {"nnodes", 'i', reqArg}, {"ncpus", 'I', reqArg},
	{"jobs", 'j', reqArg}, {"timelimit-min", 'k', reqArg}, {"timelimit-max", 'K', reqArg}, {"long", 'l', noArg},
	{"local", 'L', noArg}, {"cluster", 'M', reqArg}, {"clusters", 0, reqArg}, {"noheader", 'n', noArg},
	{"nodelist", 'N', reqArg}, {"name", 0, reqArg}, {"noconvert", 0, noArg}, {"format", 'o', reqArg},
	{"parsable", 'p', noArg}, {"parsable2", 'P', noArg}, {"qos", 'q', reqArg}, {"partition", 'r', reqArg},
	{"reason", 'R', reqArg}, {"state", 's', reqArg}, {"starttime", 'S', reqArg}, {"truncate", 'T', noArg},
	{"uid", 'u', reqArg}, {"user", 0, reqArg}, {"usage", 0, noArg}, {"verbose", 'v', noArg},
	{"version", 'V', noArg}, {"wckeys", 'W', reqArg}, {"associations", 'x', reqArg}, {"array", 0, noArg},
	{"json", 0, noArg}, {"yaml", 0, noArg}, {"units", 0, reqArg}, {"whole-hetjob", 0, optionalArg},
	{"federation", 0, noArg}, {"use-local-uid", 0, noArg}, {"env-vars", 0, noArg}, {"batch-script", 'B', noArg},
}

const sacctUsage = `Usage: sacct [options]
	Use --help for help
Options:
     -a, --allusers:
	           Display jobs for all users.
     -A, --accounts:
	           Use this comma separated list of accounts to select jobs
                   to display.
     -b, --brief:
	           Equivalent to '--format=jobstep,state,error'.
     --delimiter:
	           ASCII characters used to separate the fields when
	           specifying the  -p  or  -P options.
     -e, --helpformat:
	           Print a list of fields that can be specified with the
	           '--format' option
     -E, --endtime:
                   Select jobs eligible before this time.
     -j, --jobs:
	           Format is <job(.step)>. Display information about this
                   job or comma-separated list of jobs.
     --json:
                   Produce JSON output
     -l, --long:
	           Equivalent to specifying long format.
     --name:
                   Display jobs that have any of these name(s).
     -n, --noheader:
	           No header will be added to the beginning of output.
     -N, --nodelist:
                   Display jobs that ran on any of these nodes.
     -o, --format:
	           Comma separated list of fields.
     -p, --parsable: output will be '|' delimited with a '|' at the end
     -P, --parsable2: output will be '|' delimited without a '|' at the end
     -r, --partition:
                   Comma separated list of partitions to select jobs.
     -s, --state:
                   Select jobs based on their state.
     -S, --starttime:
                   Select jobs eligible after this time.
     -u, --uid, --user:
	           Use this comma separated list of uids or user names
                   to select jobs to display.
     -X, --allocations:
	           Only show statistics relevant to the job allocation
	           itself, not taking steps into consideration.
`

func runSacct(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("sacct", args, sacctOptions, true)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return slurmFail(1, "sacct: error: Unknown arguments:", "sacct: error:  "+strings.Join(rest, " "))
	}
	var (
		o          slurm.SacctOptions
		f          slurm.AcctFilter
		asJSON     bool
		names      []string
		partitions []string
		accounts   []string
		hosts      []string
		steps      []string // "batch", "0"… of -j 4.batch
		duplicates bool
	)
	now := e.now()
	f.Now = now
	for _, g := range got {
		switch g.name {
		case "duplicates":
			duplicates = true
		case "help":
			io.WriteString(e.stdout, sacctUsage)
			return nil
		case "usage":
			fmt.Fprintln(e.stdout, "Usage: sacct [options]\n\tUse --help for help")
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "helpformat":
			io.WriteString(e.stdout, sacctFieldList)
			return nil
		case "accounts":
			accounts = append(accounts, splitList(g.val)...)
		case "allocations":
			o.NoSteps = true
		case "brief":
			o.Brief = true
		case "delimiter":
			o.Delimiter = g.val
		case "endtime":
			t, err := slurm.ParseBegin(g.val, now, false)
			if err != nil {
				return slurmFail(1, "sacct: error: Invalid time specification (pos=0): "+g.val)
			}
			f.End = t
		case "starttime":
			t, err := slurm.ParseBegin(g.val, now, true)
			if err != nil {
				return slurmFail(1, "sacct: error: Invalid time specification (pos=0): "+g.val)
			}
			f.Start = t
		case "jobs":
			for _, item := range splitOutsideBrackets(g.val) {
				if item == "" {
					continue
				}
				if id, step, ok := strings.Cut(item, "."); ok {
					item = id
					steps = append(steps, step)
				}
				sels, err := parseJobList("sacct", item)
				if err != nil {
					return err
				}
				f.Jobs = append(f.Jobs, sels...)
			}
		case "long":
			o.Long = true
		case "noheader":
			o.NoHeader = true
		case "nodelist":
			h, err := slurm.ExpandHostlist(g.val)
			if err != nil {
				return slurmFail(1, "sacct: error: Invalid node list "+g.val)
			}
			hosts = append(hosts, h...)
		case "name":
			names = append(names, splitList(g.val)...)
		case "format":
			if o.Format != "" {
				o.Format += ","
			}
			o.Format += g.val
		case "parsable":
			o.Parsable = true
		case "parsable2":
			o.Parsable2 = true
		case "partition":
			partitions = append(partitions, splitList(g.val)...)
		case "state":
			st, _, err := slurm.ParseStateList(g.val)
			if err != nil {
				return slurmFail(1, "sacct: error: Invalid state: "+g.val)
			}
			f.States = append(f.States, st...)
		case "uid", "user":
			f.Users = append(f.Users, splitList(g.val)...)
		case "json":
			asJSON = true
		case "yaml":
			return slurmFail(1, "sacct: error: --yaml is not supported by Berth; use --json")
		case "file":
			return slurmFail(1, "sacct: error: Berth keeps its accounting records in the server; --file is not supported")
		}
	}
	v, err := fetchView(e, "sacct", acctSelection(f))
	if err != nil {
		return err
	}
	if !o.NoSteps {
		if err := loadSteps(e, v); err != nil {
			return slurmFail(1, "sacct: error: "+err.Error())
		}
	}
	v.Duplicates = duplicates
	recs := slurm.FilterAcct(v.Acct(), f)
	var keep []slurm.AcctRecord
	selected := false
	for _, r := range recs {
		if r.Step == "" {
			selected = (len(names) == 0 || contains(names, r.JobName)) &&
				(len(partitions) == 0 || contains(partitions, r.Partition)) &&
				(len(accounts) == 0 || contains(accounts, r.Account)) &&
				(len(hosts) == 0 || ranOn(r.NodeList, hosts))
			if selected && (len(steps) == 0 || contains(steps, "")) {
				keep = append(keep, r)
			}
			continue
		}
		if selected && (len(steps) == 0 || contains(steps, r.Step)) {
			keep = append(keep, r)
		}
	}
	if o.NoSteps {
		var jobs []slurm.AcctRecord
		for _, r := range keep {
			if r.Step == "" {
				jobs = append(jobs, r)
			}
		}
		keep = jobs
	}
	if asJSON {
		io.WriteString(e.stdout, slurm.SacctJSON(keep, slurmconv.ClusterName))
		return nil
	}
	out, err := slurm.FormatSacct(keep, o)
	if err != nil {
		return err
	}
	io.WriteString(e.stdout, out)
	return nil
}

// acctSelection asks the server for the runs sacct's filter may keep: those
// of the jobs -j names (with their arrays' tasks) and of its time window,
// a second past its end (the window's end is inclusive for ended jobs).
func acctSelection(f slurm.AcctFilter) runSelection {
	sel := runSelection{all: true}
	for _, j := range f.Jobs {
		sel.ids = append(sel.ids, int64(j.JobID))
	}
	start, end := slurm.AcctWindow(f)
	sel.since, sel.until = start, end.Add(time.Second)
	return sel
}

func ranOn(nodelist string, hosts []string) bool {
	on, err := slurm.ExpandHostlist(nodelist)
	if err != nil {
		return false
	}
	for _, h := range on {
		if contains(hosts, h) {
			return true
		}
	}
	return false
}

// sacctFieldList is sacct -e.
var sacctFieldList = func() string {
	names := strings.Fields(`Account AdminComment AllocCPUS AllocNodes AllocTRES AssocID AveCPU AveCPUFreq
AveDiskRead AveDiskWrite AvePages AveRSS AveVMSize BlockID Cluster Comment Constraints ConsumedEnergy
ConsumedEnergyRaw Container CPUTime CPUTimeRAW DBIndex DerivedExitCode Elapsed ElapsedRaw Eligible End
ExitCode Flags GID Group JobID JobIDRaw JobName Layout MaxDiskRead MaxDiskReadNode MaxDiskReadTask
MaxDiskWrite MaxDiskWriteNode MaxDiskWriteTask MaxPages MaxPagesNode MaxPagesTask MaxRSS MaxRSSNode
MaxRSSTask MaxVMSize MaxVMSizeNode MaxVMSizeTask McsLabel MinCPU MinCPUNode MinCPUTask NCPUS NNodes
NodeList NTasks Partition Priority QOS QOSRAW Reason ReqCPUFreq ReqCPUFreqGov ReqCPUFreqMax ReqCPUFreqMin
ReqCPUS ReqMem ReqNodes ReqTRES Reservation ReservationId Reserved ResvCPU ResvCPURAW Start State Submit
SubmitLine Suspended SystemComment SystemCPU Timelimit TimelimitRaw TotalCPU TRESUsageInAve TRESUsageInMax
TRESUsageInMaxNode TRESUsageInMaxTask TRESUsageInMin TRESUsageInMinNode TRESUsageInMinTask TRESUsageInTot
TRESUsageOutAve TRESUsageOutMax TRESUsageOutMaxNode TRESUsageOutMaxTask TRESUsageOutMin TRESUsageOutMinNode
TRESUsageOutMinTask TRESUsageOutTot UID User UserCPU WCKey WCKeyID WorkDir`)
	var b strings.Builder
	for i, n := range names {
		fmt.Fprintf(&b, "%-20s", n)
		if i%4 == 3 || i == len(names)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}()
