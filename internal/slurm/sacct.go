package slurm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AcctRecord is one line of sacct: a job (or array task) from the
// accounting records, or one of its steps (Step set). Steps carry their own
// name, state, exit code, times, nodes and TRES; sacct takes the account
// and user from their job.
type AcctRecord struct {
	JobID       uint32 // the raw id (JobIDRaw)
	ArrayJobID  uint32 // 0 when not an array task
	ArrayTaskID int
	// ArrayTasks is, on an array's own record while tasks of it wait to
	// be created, those tasks as slurmdbd's array_task_str prints them
	// ("2-3%1"): the line's JobID is 63_[2-3%1].
	ArrayTasks   string
	HetJobID     uint32
	HetJobOffset uint32
	Step         string // "" for the job itself; "batch", "extern", "0", "1"... for a step

	JobName   string // the step's name for a step ("batch")
	Partition string // empty on steps
	Account   string
	User      string
	UID, GID  uint32
	Group     string
	Cluster   string
	QOS       string
	Priority  uint32

	State       JobState
	CancelledBy *uint32 // a CANCELLED job cancelled by this uid shows "CANCELLED by 0"
	ExitCode    int
	ExitSignal  int
	DerivedCode int // DerivedExitCode (jobs)
	DerivedSig  int
	Reason      string // the reason the job last waited for (jobs); "" prints blank on steps

	Submit, Eligible, Start, End time.Time // zero prints Unknown, TimeNone prints None
	Elapsed                      time.Duration
	TimeLimit                    time.Duration // jobs: Unlimited, or 0 for Partition_Limit
	CPUTime                      time.Duration

	NNodes    int    // 0: taken from the node= of AllocTRES
	NTasks    int    // steps; 0 prints blank
	NodeList  string // "None assigned" for a job that never ran
	ReqTRES   string // as sacct prints it: "billing=1,cpu=1,mem=1000M,node=1"
	AllocTRES string
	MaxRSS    int64 // bytes; 0 (unknown) prints blank
	WorkDir   string

	// Extra holds, by sacct field name ("AveCPUFreq"), the values of fields
	// Berth does not measure, printed as given.
	Extra map[string]string
}

// SacctOptions selects sacct's output.
type SacctOptions struct {
	Format    string // -o/--format "JobID,JobName%30,..."; "" for the default
	Long      bool   // -l
	Brief     bool   // -b
	NoHeader  bool   // -n
	Parsable  bool   // -p: fields end with "|"
	Parsable2 bool   // -P: fields separated by "|"
	Delimiter string // --delimiter; "|" when empty
	NoSteps   bool   // -X/--allocations: jobs only
	// Sstat prints with sstat's widths where they differ from sacct's.
	Sstat bool
}

// sstatWidths are the default widths sstat's field table has of its own.
var sstatWidths = map[string]int{"AveDiskRead": 12, "AveDiskWrite": 12}

// Slurm 22.05's sacct field lists.
const (
	sacctDefaultFields = "jobid,jobname,partition,account,alloccpus,state,exitcode"
	sacctBriefFields   = "jobid,state,exitcode"
	sacctLongFields    = "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,reqtres,alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,tresusageouttot"
)

type fieldKind int

const (
	kStr  fieldKind = iota // cut with "+" when too long; a missing value is blank
	kUint                  // never cut; a missing value is blank
	kDate                  // cut without "+"
	kSecs                  // a duration, never cut
)

type sacctField struct {
	name  string
	width int // negative: left-justified
	kind  fieldKind
}

// sacctFields is sacct's field table: names, default widths and kinds.
var sacctFields = []sacctField{
	{"Account", 10, kStr}, {"AdminComment", 15, kStr}, {"AllocCPUS", 10, kUint}, {"AllocNodes", 10, kStr},
	{"AllocTRES", 10, kStr}, {"AssocID", 7, kUint}, {"AveCPU", 10, kStr}, {"AveCPUFreq", 10, kStr},
	{"AveDiskRead", 14, kStr}, {"AveDiskWrite", 14, kStr}, {"AvePages", 10, kStr}, {"AveRSS", 10, kStr},
	{"AveVMSize", 10, kStr}, {"BlockID", 16, kStr}, {"Cluster", 10, kStr}, {"Comment", 14, kStr},
	{"Constraints", 19, kStr}, {"ConsumedEnergy", 14, kStr}, {"ConsumedEnergyRaw", 17, kUint},
	{"Container", 19, kStr}, {"CPUTime", 10, kSecs}, {"CPUTimeRAW", 10, kUint}, {"DBIndex", -10, kUint},
	{"DerivedExitCode", 15, kStr}, {"Elapsed", 10, kSecs}, {"ElapsedRaw", 10, kUint}, {"Eligible", 19, kDate},
	{"End", 19, kDate}, {"ExitCode", 8, kStr}, {"Flags", 19, kStr}, {"GID", 6, kUint}, {"Group", 9, kStr},
	{"JobID", -12, kStr}, {"JobIDRaw", -12, kStr}, {"JobName", 10, kStr}, {"Layout", 9, kStr},
	{"MaxDiskRead", 12, kStr}, {"MaxDiskReadNode", 15, kStr}, {"MaxDiskReadTask", 15, kUint},
	{"MaxDiskWrite", 12, kStr}, {"MaxDiskWriteNode", 16, kStr}, {"MaxDiskWriteTask", 16, kUint},
	{"MaxPages", 8, kStr}, {"MaxPagesNode", 12, kStr}, {"MaxPagesTask", 14, kUint}, {"MaxRSS", 10, kStr},
	{"MaxRSSNode", 10, kStr}, {"MaxRSSTask", 10, kUint}, {"MaxVMSize", 10, kStr}, {"MaxVMSizeNode", 14, kStr},
	{"MaxVMSizeTask", 14, kUint}, {"McsLabel", 12, kStr}, {"MinCPU", 10, kStr}, {"MinCPUNode", 10, kStr},
	{"MinCPUTask", 10, kUint}, {"NCPUS", 10, kUint}, {"NNodes", 8, kUint}, {"NodeList", 15, kStr},
	{"NTasks", 8, kUint}, {"Partition", 10, kStr}, {"Priority", 10, kUint}, {"QOS", 10, kStr},
	{"QOSRAW", 6, kUint}, {"Reason", 22, kStr}, {"ReqCPUFreq", 10, kStr}, {"ReqCPUFreqGov", 13, kStr},
	{"ReqCPUFreqMax", 13, kStr}, {"ReqCPUFreqMin", 13, kStr}, {"ReqCPUS", 8, kUint}, {"ReqMem", 10, kStr},
	{"ReqNodes", 8, kStr}, {"ReqTRES", 10, kStr}, {"Reservation", 20, kStr}, {"ReservationId", 8, kUint},
	{"Reserved", 10, kSecs}, {"ResvCPU", 10, kSecs}, {"ResvCPURAW", 10, kUint}, {"Start", 19, kDate},
	{"State", 10, kStr}, {"Submit", 19, kDate}, {"SubmitLine", 20, kStr}, {"Suspended", 10, kSecs},
	{"SystemComment", 15, kStr}, {"SystemCPU", 10, kStr}, {"Timelimit", 10, kStr}, {"TimelimitRaw", 10, kStr},
	{"TotalCPU", 10, kStr}, {"TRESUsageInAve", 14, kStr}, {"TRESUsageInMax", 14, kStr},
	{"TRESUsageInMaxNode", 18, kStr}, {"TRESUsageInMaxTask", 18, kStr}, {"TRESUsageInMin", 14, kStr},
	{"TRESUsageInMinNode", 18, kStr}, {"TRESUsageInMinTask", 18, kStr}, {"TRESUsageInTot", 14, kStr},
	{"TRESUsageOutAve", 15, kStr}, {"TRESUsageOutMax", 15, kStr}, {"TRESUsageOutMaxNode", 19, kStr},
	{"TRESUsageOutMaxTask", 19, kStr}, {"TRESUsageOutMin", 15, kStr}, {"TRESUsageOutMinNode", 19, kStr},
	{"TRESUsageOutMinTask", 19, kStr}, {"TRESUsageOutTot", 15, kStr}, {"UID", 6, kUint}, {"User", 9, kStr},
	{"UserCPU", 10, kStr}, {"WCKey", 10, kStr}, {"WCKeyID", 10, kUint}, {"WorkDir", 20, kStr},
}

// parseSacctFormat resolves a -o list as sacct does: each item names the
// first field it is a case-insensitive prefix of ("tresusageinmaxn" is
// TRESUsageInMaxNode), with an optional "%width" (positive: right-aligned
// as usual; sacct keeps JobID left-aligned only with its default width).
// widths are default widths of the caller's own (sstat's).
func parseSacctFormat(list string, widths map[string]int) ([]sacctField, error) {
	var out []sacctField
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimLeft(item, " \t\n\v\f\r")
		if item == "" {
			continue
		}
		name, width, hasWidth := strings.Cut(item, "%")
		w := 0
		if hasWidth {
			w, _ = strconv.Atoi(leadingInt(width))
		}
		if strings.EqualFold(name, "AllocGRES") || strings.EqualFold(name, "ReqGRES") {
			return nil, &CommandError{Stderr: []string{fmt.Sprintf("sacct: fatal: %s has been removed, please use %s", name, strings.Replace(name, "GRES", "TRES", 1))}, ExitCode: 1}
		}
		found := false
		for _, f := range sacctFields {
			if len(name) <= len(f.name) && strings.EqualFold(f.name[:len(name)], name) {
				if dw, ok := widths[f.name]; ok {
					f.width = dw
				}
				if hasWidth {
					f.width = w
				}
				out = append(out, f)
				found = true
				break
			}
		}
		if !found {
			return nil, &CommandError{Stderr: []string{fmt.Sprintf("sacct: error: Invalid field requested: \"%s\"", name)}, ExitCode: 1}
		}
	}
	return out, nil
}

// FormatSacct prints accounting records as sacct does, byte for byte: the
// header and its dashes (unless NoHeader or parsable), one line per record
// in the order given (jobs followed by their steps, as sacct lists them).
func FormatSacct(recs []AcctRecord, o SacctOptions) (string, error) {
	list := o.Format
	switch {
	case list != "":
	case o.Long:
		list = sacctLongFields
	case o.Brief:
		list = sacctBriefFields
	default:
		list = sacctDefaultFields
	}
	var widths map[string]int
	if o.Sstat {
		widths = sstatWidths
	}
	fields, err := parseSacctFormat(list, widths)
	if err != nil {
		return "", err
	}
	sep := o.Delimiter
	if sep == "" {
		sep = "|"
	}
	parsable := o.Parsable || o.Parsable2
	var b strings.Builder
	if !o.NoHeader {
		for i, f := range fields {
			switch {
			case o.Parsable2 && i == len(fields)-1:
				b.WriteString(f.name)
			case parsable:
				b.WriteString(f.name + sep)
			default:
				b.WriteString(pad(f.name, f.width, true) + " ")
			}
		}
		b.WriteByte('\n')
		if !parsable {
			for _, f := range fields {
				b.WriteString(strings.Repeat("-", abs(f.width)) + " ")
			}
			b.WriteByte('\n')
		}
	}
	for i := range recs {
		r := &recs[i]
		if o.NoSteps && r.Step != "" {
			continue
		}
		for fi, f := range fields {
			val, null := r.field(f.name)
			last := fi == len(fields)-1
			switch {
			case parsable:
				if null {
					val = ""
				}
				b.WriteString(val)
				if !(o.Parsable2 && last) {
					b.WriteString(sep)
				}
			case null:
				b.WriteString(pad("", f.width, false) + " ")
			default:
				if f.kind == kStr && len(val) > abs(f.width) && abs(f.width) > 0 {
					val = val[:abs(f.width)-1] + "+"
				}
				b.WriteString(pad(val, f.width, f.kind == kStr || f.kind == kDate) + " ")
			}
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// pad is printf's "%*.*s" (cut) or "%*s": a negative width left-justifies.
func pad(s string, width int, cut bool) string {
	w := abs(width)
	if cut && len(s) > w {
		s = s[:w]
	}
	if len(s) >= w {
		return s
	}
	if width < 0 {
		return s + strings.Repeat(" ", w-len(s))
	}
	return strings.Repeat(" ", w-len(s)) + s
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// idString is slurmdb_get_job_id_str: "10_4", "7+1", "19".
func (r *AcctRecord) idString() string {
	switch {
	case r.ArrayTasks != "":
		return fmt.Sprintf("%d_[%s]", r.ArrayJobID, r.ArrayTasks)
	case r.ArrayJobID != 0:
		return fmt.Sprintf("%d_%d", r.ArrayJobID, r.ArrayTaskID)
	case r.HetJobID != 0:
		return fmt.Sprintf("%d+%d", r.HetJobID, r.HetJobOffset)
	}
	return u32(r.JobID)
}

// tresCount finds "name=" in a TRES string and returns its value as
// printed, or "".
func tresCount(tres, name string) string {
	for _, kv := range strings.Split(tres, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// SstatFields is sstat's default -o: sstat prints its rows with sacct's
// fields (FormatSacct).
const SstatFields = "JobID,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS," +
	"MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,AveCPUFreq," +
	"ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ConsumedEnergy,MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask," +
	"AveDiskRead,MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,TRESUsageInAve,TRESUsageInMax," +
	"TRESUsageInMaxNode,TRESUsageInMaxTask,TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot," +
	"TRESUsageOutAve,TRESUsageOutMax,TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutMin,TRESUsageOutMinNode," +
	"TRESUsageOutMinTask,TRESUsageOutTot"

// FormatMemory writes bytes as sacct and sstat write memory figures
// (3288K, 1.50G: exact units only).
func FormatMemory(b int64) string {
	return convertNumUnit(float64(b), unitNone)
}

// stepMissing and stepBlank are the job's fields a step's line leaves out:
// null (nothing when parsable) or an empty string.
var (
	stepMissing = map[string]bool{"Partition": true, "QOS": true, "Priority": true, "Reason": true, "ReqTRES": true,
		"Timelimit": true, "TimelimitRaw": true, "ReqCPUFreqMin": true, "ReqCPUFreqMax": true, "ReqCPUFreqGov": true, "ReqCPUFreq": true}
	stepBlank = map[string]bool{"DerivedExitCode": true, "ReqMem": true}
)

// field is the text sacct prints for one field of this record, or null
// for a missing value (blank, or nothing when parsable).
func (r *AcctRecord) field(name string) (string, bool) {
	if v, ok := r.Extra[name]; ok {
		return v, false
	}
	step := r.Step != ""
	str := func(s string) (string, bool) { return s, s == "" }
	if step {
		// What belongs to the job, not its steps: missing on a step's
		// line (nothing at all when parsable), or blank.
		if stepMissing[name] {
			return "", true
		}
		if stepBlank[name] {
			return "", false
		}
	}
	switch name {
	case "JobID":
		if step {
			return r.idString() + "." + r.Step, false
		}
		return r.idString(), false
	case "JobIDRaw":
		if step {
			return u32(r.JobID) + "." + r.Step, false
		}
		return u32(r.JobID), false
	case "JobName":
		return str(r.JobName)
	case "Partition":
		return str(r.Partition)
	case "Account":
		return str(r.Account)
	case "User":
		return str(r.User)
	case "Group":
		return str(r.Group)
	case "UID":
		return u32(r.UID), false
	case "GID":
		return u32(r.GID), false
	case "Cluster":
		return str(r.Cluster)
	case "QOS":
		return str(r.QOS)
	case "Priority":
		return u32(r.Priority), false
	case "AllocCPUS", "NCPUS":
		tres := r.AllocTRES
		if tres == "" {
			tres = r.ReqTRES
		}
		n, _ := strconv.Atoi(tresCount(tres, "cpu"))
		return itoa(n), false
	case "ReqCPUS":
		n, _ := strconv.Atoi(tresCount(r.ReqTRES, "cpu"))
		return itoa(n), false
	case "NNodes", "AllocNodes":
		n := r.NNodes
		if n == 0 {
			tres := r.AllocTRES
			if tres == "" && !step {
				tres = r.ReqTRES
			}
			n, _ = strconv.Atoi(tresCount(tres, "node"))
		}
		return itoa(n), false
	case "NTasks":
		if r.NTasks == 0 {
			return "", true
		}
		return itoa(r.NTasks), false
	case "State":
		s := r.State.String()
		if r.State.Base() == JobCancelled && r.CancelledBy != nil {
			s += " by " + u32(*r.CancelledBy)
		}
		return s, false
	case "ExitCode":
		code := r.ExitCode
		if code >= 128 {
			code -= 128
		}
		return fmt.Sprintf("%d:%d", code, r.ExitSignal), false
	case "DerivedExitCode":
		return fmt.Sprintf("%d:%d", r.DerivedCode, r.DerivedSig), false
	case "Reason":
		if r.Reason == "" {
			return ReasonNone, false
		}
		return r.Reason, false
	case "Submit":
		if step {
			return FormatTimestamp(r.Start), false
		}
		return FormatTimestamp(r.Submit), false
	case "Eligible":
		if step {
			return FormatTimestamp(r.Start), false
		}
		return FormatTimestamp(r.Eligible), false
	case "Start":
		return FormatTimestamp(r.Start), false
	case "End":
		return FormatTimestamp(r.End), false
	case "Elapsed":
		return FormatElapsed(r.Elapsed), false
	case "ElapsedRaw":
		return strconv.FormatInt(int64(r.Elapsed/time.Second), 10), false
	case "CPUTime":
		return FormatElapsed(r.CPUTime), false
	case "CPUTimeRAW":
		return strconv.FormatInt(int64(r.CPUTime/time.Second), 10), false
	case "Timelimit", "TimelimitRaw":
		switch {
		case r.TimeLimit == Unlimited:
			return "UNLIMITED", false
		case r.TimeLimit == 0:
			return "Partition_Limit", false
		case name == "TimelimitRaw":
			return strconv.FormatInt(int64(r.TimeLimit/time.Minute), 10), false
		}
		return FormatTimeLimit(r.TimeLimit), false
	case "NodeList":
		return str(r.NodeList)
	case "ReqMem":
		mem := tresCount(r.ReqTRES, "mem")
		if mem == "" {
			return "", false
		}
		return mem, false
	case "ReqTRES":
		return str(r.ReqTRES)
	case "AllocTRES":
		return str(r.AllocTRES)
	case "MaxRSS":
		if r.MaxRSS <= 0 {
			return "", false
		}
		return FormatMemory(r.MaxRSS), false
	case "WorkDir":
		return str(r.WorkDir)
	case "Suspended", "Reserved", "ResvCPU":
		return FormatElapsed(0), false
	case "ReqCPUFreqMin", "ReqCPUFreqMax", "ReqCPUFreqGov", "ReqCPUFreq":
		return "Unknown", false
	}
	for _, f := range sacctFields {
		if f.name == name && f.kind == kUint {
			return "", true
		}
	}
	return "", true
}

// SacctTRES prints a TRES set as sacct does: sorted by name, memory in
// Slurm's units ("billing=2,cpu=2,gres/gpu=2,mem=4G,node=1").
func SacctTRES(t map[string]uint64) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := strconv.FormatUint(t[k], 10)
		if k == "mem" {
			v = FormatMemoryMB(t[k])
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, ",")
}

// ScontrolTRES prints a TRES set as scontrol and squeue do: cpu, mem,
// node, billing, then the rest by name ("cpu=1,mem=1000M,node=1,billing=1,gres/gpu=2").
func ScontrolTRES(t map[string]uint64) string {
	order := map[string]int{"cpu": 1, "mem": 2, "energy": 3, "node": 4, "billing": 5}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		oa, ob := order[keys[a]], order[keys[b]]
		if oa == 0 {
			oa = 100
		}
		if ob == 0 {
			ob = 100
		}
		if oa != ob {
			return oa < ob
		}
		return keys[a] < keys[b]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := strconv.FormatUint(t[k], 10)
		if k == "mem" {
			v = FormatMemoryMB(t[k])
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, ",")
}

// AcctFilter is what sacct's -j, -u, -s, -S and -E select.
type AcctFilter struct {
	Jobs       []JobSelector // -j; "10" selects every task of array 10
	Users      []string      // -u
	States     []JobState    // -s
	Start, End time.Time     // -S, -E; zero for sacct's defaults
	Now        time.Time
}

// FilterAcct keeps the records sacct would show, with sacct's default
// time window (slurmdb_job_cond_def_start_end): without -j or -s, jobs
// eligible between midnight and now; with -s, jobs in those states at the
// instant -S (default now) or during -S..-E; with -j, those jobs at any
// time. Steps follow their job.
func FilterAcct(recs []AcctRecord, f AcctFilter) []AcctRecord {
	s, e := acctWindow(f)
	var out []AcctRecord
	keep := false
	for _, r := range recs {
		if r.Step == "" {
			keep = acctSelected(&r, f, s, e)
		}
		if keep {
			out = append(out, r)
		}
	}
	return out
}

// AcctWindow is the window [start, end) FilterAcct selects in: every
// record it keeps is of a job submitted no later than end's second and not
// ended before start (zero start: no bound), so that a store may narrow
// the jobs it reads to those first.
func AcctWindow(f AcctFilter) (start, end time.Time) {
	s, e := acctWindow(f)
	if s != 0 {
		start = time.Unix(s, 0)
	}
	return start, time.Unix(e, 0)
}

// acctWindow is sacct's window in Unix seconds (s 0: none).
func acctWindow(f AcctFilter) (s, e int64) {
	s, e = unixOrZero(f.Start), unixOrZero(f.End)
	now := f.Now.Unix()
	switch {
	case len(f.States) > 0:
		if s == 0 && len(f.Jobs) == 0 {
			s = now
		}
		if s != 0 && e == 0 {
			e = s
		}
	case len(f.Jobs) == 0 && s == 0:
		y, m, d := f.Now.Date()
		s = time.Date(y, m, d, 0, 0, 0, 0, f.Now.Location()).Unix()
	}
	if e == 0 {
		e = now
	}
	if e == s || e == now {
		e++ // the window is [S, E)
	}
	return s, e
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() || t.Equal(TimeNone) {
		return 0
	}
	return t.Unix()
}

func acctSelected(r *AcctRecord, f AcctFilter, s, e int64) bool {
	if len(f.Users) > 0 && !contains(f.Users, r.User) && !contains(f.Users, u32(r.UID)) {
		return false
	}
	if len(f.Jobs) > 0 {
		match := false
		for _, sel := range f.Jobs {
			switch {
			case sel.Task == NoArrayTask && (sel.JobID == r.JobID || sel.JobID == r.ArrayJobID || sel.JobID == r.HetJobID):
				match = true
			case sel.Task != NoArrayTask && sel.JobID == r.ArrayJobID && sel.Task == r.ArrayTaskID:
				match = true
			}
		}
		if !match {
			return false
		}
	}
	eligible, start, end := unixOrZero(r.Eligible), unixOrZero(r.Start), unixOrZero(r.End)
	if len(f.States) > 0 {
		for _, st := range f.States {
			switch st.Base() {
			case JobPending:
				if eligible != 0 && ((start != 0 && s < start) || (start == 0 && end != 0 && s < end) ||
					(start == 0 && end == 0 && r.State.Pending())) && e > eligible {
					return true
				}
			case JobRunning, JobSuspended:
				if start != 0 && (s < end || (end == 0 && r.State.Base() == st.Base())) && e > start {
					return true
				}
			default:
				if r.State.Base() == st.Base() && end != 0 && s <= end && end <= e {
					return true
				}
			}
		}
		return false
	}
	if len(f.Jobs) > 0 {
		return unixOrZero(r.Submit) < e && (end >= s || end == 0)
	}
	return eligible != 0 && eligible < e && (end >= s || end == 0)
}

// AccountingDisabledError is what sacct prints, and how it exits, when no
// accounting storage is configured.
func AccountingDisabledError() *CommandError {
	return &CommandError{Stderr: []string{"Slurm accounting storage is disabled"}, ExitCode: 1}
}
