package slurm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SqueueOptions selects squeue's output.
type SqueueOptions struct {
	Format     string    // -o/--format ("%.18i %.9P ..."); "" for the default
	LongFormat string    // -O/--Format ("JobID:12,Name:10,..."); "" for the default
	Long       bool      // -l: the long default format, preceded by the date
	NoHeader   bool      // -h
	Array      bool      // -r: one line per array task, never folded
	Start      bool      // --start: the start-time format, sorted by start
	Sort       string    // -S; "" for Slurm's default ("P,t,-p", or "S" with --start)
	Now        time.Time // for TIME, TIME_LEFT and the -l date line
}

// Default formats of squeue 22.05, as long formats (-O syntax).
const (
	squeueDefault     = "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,statecompact:.2 ,timeused:.10 ,numnodes:.6 ,reasonlist:0"
	squeueDefaultLong = "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,state:.8 ,timeused:.10 ,timelimit:.9 ,numnodes:.6 ,reasonlist:0"
	squeueStartFormat = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
)

// FormatSqueue prints jobs as squeue does, byte for byte: header (unless
// NoHeader), one line per job, pending tasks of an array folded into one
// line (10_[3-5%2]) unless Array, sorted as squeue sorts. The jobs are
// those squeue would show: filter them first (FilterJobs). warnings are
// lines squeue writes to stderr about the format, if any.
func FormatSqueue(jobs []Job, o SqueueOptions) (out string, warnings []string, err error) {
	format, long := o.Format, o.LongFormat
	sortSpec := o.Sort
	if o.Start && format == "" && long == "" {
		format = squeueStartFormat
	}
	if o.Start && sortSpec == "" {
		sortSpec = "S"
	}
	if format == "" && long == "" {
		long = squeueDefault
		if o.Long {
			long = squeueDefaultLong
		}
	}
	var fields []squeueField
	if format != "" {
		fields, warnings = parseSqueueFormat(format)
	} else {
		fields, warnings = parseSqueueLongFormat(long)
	}
	recs := make([]*squeueRec, 0, len(jobs))
	for i := range jobs {
		// The records point into jobs, read only (folding copies).
		recs = append(recs, &squeueRec{Job: &jobs[i], part: jobs[i].Partition})
	}
	if !o.Array {
		recs = foldArrays(recs)
	}
	if err := sortJobs(recs, sortSpec, o.Now); err != nil {
		return "", warnings, err
	}
	var b strings.Builder
	if o.Long && !o.NoHeader {
		b.WriteString(o.Now.Format("Mon Jan _2 15:04:05 2006"))
		b.WriteByte('\n')
	}
	if !o.NoHeader {
		for _, f := range fields {
			f.header(&b)
		}
		b.WriteByte('\n')
	}
	for _, r := range recs {
		if o.Array && r.ArrayTasks != nil {
			for _, task := range r.ArrayTasks {
				t := *r
				j := *r.Job
				j.ArrayTasks, j.ArrayTaskID = nil, task
				t.Job = &j
				printSqueueLine(&b, fields, &t, o.Now)
			}
			continue
		}
		printSqueueLine(&b, fields, r, o.Now)
	}
	return b.String(), warnings, nil
}

func printSqueueLine(b *strings.Builder, fields []squeueField, r *squeueRec, now time.Time) {
	for _, f := range fields {
		f.value(b, r, now)
	}
	b.WriteByte('\n')
}

// squeueRec is a job as squeue holds it while printing: the partition it
// is listed under and, for folded arrays, the merged reasons.
type squeueRec struct {
	*Job
	part      string
	stateDesc string // reasons of folded tasks, "Priority,Resources"
}

func (r *squeueRec) reason() string {
	if r.stateDesc != "" {
		return r.stateDesc
	}
	if r.Reason == "" {
		return ReasonNone
	}
	return r.Reason
}

// foldArrays is _combine_pending_array_tasks: the pending tasks of one
// array, with the same name and partition, become one record listing them.
// Slurm keeps the never-started tasks in one record already (a Job with
// ArrayTasks); Berth may list them one by one, and they fold the same way,
// into the place of the group's first record. A lone pending task stays as
// it is ("10_5").
func foldArrays(recs []*squeueRec) []*squeueRec {
	type key struct {
		id         uint32
		name, part string
	}
	groups := map[key][]*squeueRec{}
	for _, r := range recs {
		if r.ArrayJobID != 0 && r.State.Pending() {
			k := key{r.ArrayJobID, r.Name, r.part}
			groups[k] = append(groups[k], r)
		}
	}
	var out []*squeueRec
	for _, r := range recs {
		if r.ArrayJobID == 0 || !r.State.Pending() {
			out = append(out, r)
			continue
		}
		g := groups[key{r.ArrayJobID, r.Name, r.part}]
		if g == nil {
			continue // folded already
		}
		delete(groups, key{r.ArrayJobID, r.Name, r.part})
		if len(g) == 1 {
			out = append(out, r)
			continue
		}
		// The carrier: the group's folded record if it has one, else its first.
		carrier := g[0]
		for _, x := range g {
			if x.ArrayTasks != nil {
				carrier = x
				break
			}
		}
		j := *carrier.Job
		if j.ArrayTasks == nil {
			j.ArrayTasks = []int{j.ArrayTaskID}
			j.JobID = j.ArrayJobID
		}
		j.ArrayTasks = append([]int(nil), j.ArrayTasks...)
		c := &squeueRec{Job: &j, part: carrier.part}
		for _, x := range g {
			if x == carrier {
				continue
			}
			if x.ArrayTasks != nil {
				c.ArrayTasks = append(c.ArrayTasks, x.ArrayTasks...)
			} else {
				c.ArrayTasks = append(c.ArrayTasks, x.ArrayTaskID)
			}
			if c.ArrayThrottle == 0 {
				c.ArrayThrottle = x.ArrayThrottle
			}
			mergeReason(c, x.reason())
		}
		sort.Ints(c.ArrayTasks)
		c.ArrayTasks = uniqInts(c.ArrayTasks)
		out = append(out, c)
	}
	return out
}

// mergeReason is _merge_job_reason.
func mergeReason(c *squeueRec, task string) {
	if c.reason() == task {
		return
	}
	if c.stateDesc == "" {
		c.stateDesc = c.reason()
	}
	if strings.Contains(c.stateDesc, task) {
		return
	}
	c.stateDesc += "," + task
}

// squeueField is one column: a value printer, its header, width and
// justification, and the literal text after it.
type squeueField struct {
	def    *fieldDef
	width  int
	right  bool
	suffix string
	prefix bool // literal text only
}

type fieldDef struct {
	title    string
	cutTitle bool
	cut      bool // values are cut to the width (when right-justified)
	value    func(r *squeueRec, now time.Time) string
}

func (f squeueField) header(b *strings.Builder) {
	if f.def != nil {
		printField(b, f.def.title, f.width, f.right, f.def.cutTitle)
	}
	b.WriteString(f.suffix)
}

func (f squeueField) value(b *strings.Builder, r *squeueRec, now time.Time) {
	if f.def != nil {
		printField(b, f.def.value(r, now), f.width, f.right, f.def.cut)
	}
	b.WriteString(f.suffix)
}

// printField is squeue's _print_str: right-justified values are cut to the
// width only when cut is set; left-justified ones always are (printf's
// precision); both are padded to the width.
func printField(b *strings.Builder, s string, width int, right, cut bool) {
	var out string
	switch {
	case width < 0:
		out = s + " "
	case width == 0:
		out = s
	case right:
		out = s
		if len(out) < width {
			out = strings.Repeat(" ", width-len(out)) + out
		}
		if cut && len(out) > width {
			out = out[:width]
		}
	default:
		out = s
		if len(out) > width {
			out = out[:width]
		}
	}
	b.WriteString(out)
	for n := len(out); n < width; n++ {
		b.WriteByte(' ')
	}
}

// formatToken is one %-item of a -o format (parse_format, shared by
// squeue and sinfo): "%[.][width]letter" and the text up to the next %.
type formatToken struct {
	right  bool
	width  int
	letter byte
	suffix string
	raw    string // the item without its %
}

// formatTokens splits a -o format into the text before its first % and
// its items; an item with no letter (strtok's empty or a bare width) is
// skipped, as Slurm does.
func formatTokens(format string) (lead string, toks []formatToken) {
	if i := strings.IndexByte(format, '%'); i != 0 {
		if i < 0 {
			return format, nil
		}
		lead, format = format[:i], format[i:]
	}
	for _, tok := range strings.Split(format, "%") {
		if tok == "" {
			continue // strtok skips empty tokens
		}
		t := formatToken{raw: tok}
		i := 0
		if tok[0] == '.' {
			t.right = true
			i++
		}
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			t.width = t.width*10 + int(tok[i]-'0')
			i++
		}
		if i >= len(tok) {
			continue
		}
		t.letter, t.suffix = tok[i], tok[i+1:]
		toks = append(toks, t)
	}
	return lead, toks
}

// parseSqueueFormat parses a -o format (parse_format).
func parseSqueueFormat(format string) ([]squeueField, []string) {
	var fields []squeueField
	var warnings []string
	lead, toks := formatTokens(format)
	if lead != "" {
		fields = append(fields, squeueField{suffix: lead, prefix: true})
	}
	for _, t := range toks {
		f := squeueField{right: t.right, width: t.width, suffix: t.suffix}
		if def, ok := squeueLetters[t.letter]; ok {
			f.def = def
		} else {
			f.suffix = "%" + t.raw
			warnings = append(warnings, fmt.Sprintf("squeue: error: Invalid job format specification: %c", t.letter))
		}
		fields = append(fields, f)
	}
	return fields, warnings
}

// longFormatItem reads one item of a -O/--Format list (parse_long_format,
// shared by squeue and sinfo): "name[:[.]width][suffix]"; the width is 20
// when not given, and "." aligns right.
func longFormatItem(tok string) (name string, width int, right bool, suffix string) {
	name, width = tok, 20
	if n, spec, ok := strings.Cut(tok, ":"); ok {
		name = n
		if strings.HasPrefix(spec, ".") {
			right = true
			spec = spec[1:]
		}
		w, rest := strtol(spec)
		width, suffix = int(w), rest
	}
	return name, width, right, suffix
}

// parseSqueueLongFormat parses a -O format (parse_long_format):
// "name[:[.]width][suffix]" items separated by commas.
func parseSqueueLongFormat(format string) ([]squeueField, []string) {
	var fields []squeueField
	var warnings []string
	for _, tok := range strings.Split(format, ",") {
		if tok == "" {
			continue
		}
		name, width, right, suffix := longFormatItem(tok)
		f := squeueField{width: width, right: right, suffix: suffix}
		def := squeueNames[strings.ToLower(name)]
		if def == nil && hasPrefixFold(name, "numtask") {
			def = squeueNames["numtasks"]
		}
		if def == nil {
			warnings = append(warnings, "squeue: error: Invalid job format specification: "+name)
		}
		f.def = def
		fields = append(fields, f)
	}
	return fields, warnings
}

func nullStr(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

func naStr(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

func squeueTime(t time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "N/A"
	}
	return FormatTimestamp(t)
}

func timeLimitColumn(d time.Duration) string {
	switch d {
	case Unlimited:
		return "UNLIMITED"
	case 0:
		return "NOT_SET"
	}
	return FormatSqueueDuration(d)
}

func jobIDColumn(r *squeueRec) string {
	switch {
	case r.ArrayTasks != nil:
		id := fmt.Sprintf("%d_[%s]", r.ArrayJobID, FormatArrayTasks(r.ArrayTasks, r.ArrayThrottle))
		if len(id) > 31 { // squeue's 32-byte buffer
			id = id[:31]
		}
		return id
	case r.ArrayJobID != 0:
		return fmt.Sprintf("%d_%d", r.ArrayJobID, r.ArrayTaskID)
	case r.HetJobID != 0:
		return fmt.Sprintf("%d+%d", r.HetJobID, r.HetJobOffset)
	}
	return strconv.FormatUint(uint64(r.JobID), 10)
}

func itoa(n int) string { return strconv.Itoa(n) }

func u32(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// reasonOrNodes is %R: the reason in parentheses for a job that is pending
// or ended badly, else its nodes.
func reasonOrNodes(r *squeueRec) string {
	s := r.State
	if !s.Completing() && (s.Pending() || s&JobStageOut != 0 || s.Base() == JobTimeout ||
		s.Base() == JobOutOfMemory || s.Base() == JobDeadline || s.Base() == JobFailed) {
		return "(" + r.reason() + ")"
	}
	return r.NodeList
}

func overSubscribe(s string) string {
	if s == "" {
		return "OK"
	}
	return s
}

func cpusPerTaskColumn(n int) string {
	if n == 0 {
		return "N/A"
	}
	return itoa(n)
}

func arrayTaskColumn(r *squeueRec) string {
	switch {
	case r.ArrayTasks != nil:
		return FormatArrayTasks(r.ArrayTasks, r.ArrayThrottle)
	case r.ArrayJobID != 0:
		return itoa(r.ArrayTaskID)
	}
	return "N/A"
}

func arrayJobColumn(r *squeueRec) string {
	if r.ArrayJobID != 0 {
		return u32(r.ArrayJobID)
	}
	return u32(r.JobID)
}

func endTimeColumn(r *squeueRec, now time.Time) string {
	if r.TimeLimit == Unlimited && r.End.After(now) {
		return "NONE"
	}
	return squeueTime(r.End)
}

func stdoutColumn(r *squeueRec) string {
	if r.StdOut != "" {
		return r.StdOut
	}
	return fmt.Sprintf("%s/slurm-%d.out", r.WorkDir, r.JobID)
}

func stderrColumn(r *squeueRec) string {
	switch {
	case !r.BatchFlag:
		return "N/A"
	case r.StdErr != "":
		return r.StdErr
	}
	return stdoutColumn(r)
}

// The fields squeue knows, by -o letter; every one also has a -O name.
var (
	fJobID       = &fieldDef{"JOBID", true, true, func(r *squeueRec, _ time.Time) string { return jobIDColumn(r) }}
	fJobIDRaw    = &fieldDef{"JOBID", true, true, func(r *squeueRec, _ time.Time) string { return u32(r.JobID) }}
	fAccount     = &fieldDef{"ACCOUNT", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.Account) }}
	fTresPerNode = &fieldDef{"TRES_PER_NODE", true, true, func(r *squeueRec, _ time.Time) string { return naStr(r.TresPerNode) }}
	fBatchHost   = &fieldDef{"EXEC_HOST", true, true, func(r *squeueRec, _ time.Time) string {
		h := r.AllocNode
		if r.BatchFlag {
			h = r.BatchHost
		}
		if h == "" {
			return "n/a"
		}
		return h
	}}
	fMinCPUs     = &fieldDef{"MIN_CPUS", true, true, func(r *squeueRec, _ time.Time) string { return convertNumUnit(float64(r.MinCPUsNode), unitNone) }}
	fNumCPUs     = &fieldDef{"CPUS", true, true, func(r *squeueRec, _ time.Time) string { return itoa(r.NumCPUs) }}
	fMinTmpDisk  = &fieldDef{"MIN_TMP_DISK", true, true, func(r *squeueRec, _ time.Time) string { return FormatMemoryMB(r.MinTmpDiskMB) }}
	fNumNodes    = &fieldDef{"NODES", true, true, func(r *squeueRec, _ time.Time) string { return itoa(r.NumNodes) }}
	fEndTime     = &fieldDef{"END_TIME", true, true, func(r *squeueRec, now time.Time) string { return endTimeColumn(r, now) }}
	fDependency  = &fieldDef{"DEPENDENCY", true, true, func(r *squeueRec, _ time.Time) string { return r.Dependency.String() }}
	fFeatures    = &fieldDef{"FEATURES", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.Features) }}
	fArrayJobID  = &fieldDef{"ARRAY_JOB_ID", true, true, func(r *squeueRec, _ time.Time) string { return arrayJobColumn(r) }}
	fGroupName   = &fieldDef{"GROUP", true, true, func(r *squeueRec, _ time.Time) string { return groupName(r.Job) }}
	fGroupID     = &fieldDef{"GROUP", true, true, func(r *squeueRec, _ time.Time) string { return u32(r.GID) }}
	fOverSub     = &fieldDef{"OVER_SUBSCRIBE", true, true, func(r *squeueRec, _ time.Time) string { return overSubscribe(r.OverSubscribe) }}
	fSockets     = &fieldDef{"SOCKETS_PER_NODE", true, true, func(*squeueRec, time.Time) string { return "*" }}
	fCores       = &fieldDef{"CORES_PER_SOCKET", true, true, func(*squeueRec, time.Time) string { return "*" }}
	fThreads     = &fieldDef{"THREADS_PER_CORE", true, true, func(*squeueRec, time.Time) string { return "*" }}
	fName        = &fieldDef{"NAME", true, true, func(r *squeueRec, _ time.Time) string { return r.Name }}
	fComment     = &fieldDef{"COMMENT", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.Comment) }}
	fArrayTaskID = &fieldDef{"ARRAY_TASK_ID", true, true, func(r *squeueRec, _ time.Time) string { return arrayTaskColumn(r) }}
	fTimeLimit   = &fieldDef{"TIME_LIMIT", true, false, func(r *squeueRec, _ time.Time) string { return timeLimitColumn(r.TimeLimit) }}
	fTimeLeft    = &fieldDef{"TIME_LEFT", true, false, func(r *squeueRec, now time.Time) string { return timeLeft(r, now) }}
	fMinMemory   = &fieldDef{"MIN_MEMORY", true, true, func(r *squeueRec, _ time.Time) string { return FormatMemoryMB(r.MinMemoryMB) }}
	fTimeUsed    = &fieldDef{"TIME", true, false, func(r *squeueRec, now time.Time) string { return FormatSqueueDuration(r.runTime(now)) }}
	fReqNodes    = &fieldDef{"REQ_NODES", true, true, func(r *squeueRec, _ time.Time) string { return r.ReqNodes }}
	fNodes       = &fieldDef{"NODELIST", false, false, func(r *squeueRec, _ time.Time) string { return r.NodeList }}
	fCommand     = &fieldDef{"COMMAND", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.Command) }}
	fContiguous  = &fieldDef{"CONTIGUOUS", true, true, func(r *squeueRec, _ time.Time) string { return itoa(boolInt(r.Contiguous)) }}
	fPriority    = &fieldDef{"PRIORITY", true, true, func(r *squeueRec, _ time.Time) string {
		return fmt.Sprintf("%16.14f", float64(r.Priority)/float64(0xffffffff))
	}}
	fPartition    = &fieldDef{"PARTITION", true, true, func(r *squeueRec, _ time.Time) string { return r.part }}
	fQOS          = &fieldDef{"QOS", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.QOS) }}
	fPriorityLong = &fieldDef{"PRIORITY", true, true, func(r *squeueRec, _ time.Time) string { return u32(r.Priority) }}
	fReason       = &fieldDef{"REASON", true, true, func(r *squeueRec, _ time.Time) string { return r.reason() }}
	fReasonList   = &fieldDef{"NODELIST(REASON)", false, true, func(r *squeueRec, _ time.Time) string { return reasonOrNodes(r) }}
	fSelect       = &fieldDef{"", true, true, func(*squeueRec, time.Time) string { return "" }}
	fStartTime    = &fieldDef{"START_TIME", true, true, func(r *squeueRec, _ time.Time) string { return squeueTime(r.Start) }}
	fStateCompact = &fieldDef{"ST", true, true, func(r *squeueRec, _ time.Time) string { return r.State.Compact() }}
	fState        = &fieldDef{"STATE", true, true, func(r *squeueRec, _ time.Time) string { return r.State.String() }}
	fUserID       = &fieldDef{"UID", true, true, func(r *squeueRec, _ time.Time) string { return u32(r.UID) }}
	fUserName     = &fieldDef{"USER", true, true, func(r *squeueRec, _ time.Time) string { return userName(r.Job) }}
	fReservation  = &fieldDef{"RESERVATION", true, true, func(*squeueRec, time.Time) string { return "(null)" }}
	fSubmitTime   = &fieldDef{"SUBMIT_TIME", true, true, func(r *squeueRec, _ time.Time) string { return squeueTime(r.Submit) }}
	fWCKey        = &fieldDef{"WCKEY", true, true, func(*squeueRec, time.Time) string { return "(null)" }}
	fLicenses     = &fieldDef{"LICENSES", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.Licenses) }}
	fExcNodes     = &fieldDef{"EXC_NODES", true, true, func(r *squeueRec, _ time.Time) string { return r.ExcNodes }}
	fCoreSpec     = &fieldDef{"CORE_SPEC", true, true, func(*squeueRec, time.Time) string { return "N/A" }}
	fNice         = &fieldDef{"NICE", true, true, func(r *squeueRec, _ time.Time) string { return itoa(r.Nice) }}
	fSchedNodes   = &fieldDef{"SCHEDNODES", false, false, func(r *squeueRec, _ time.Time) string { return nullStr(r.SchedNodes) }}
	fSCT          = &fieldDef{"S:C:T", true, true, func(*squeueRec, time.Time) string { return "*:*:*" }}
	fWorkDir      = &fieldDef{"WORK_DIR", true, true, func(r *squeueRec, _ time.Time) string { return r.WorkDir }}
)

var squeueLetters = map[byte]*fieldDef{
	'a': fAccount, 'A': fJobIDRaw, 'b': fTresPerNode, 'B': fBatchHost, 'c': fMinCPUs, 'C': fNumCPUs,
	'd': fMinTmpDisk, 'D': fNumNodes, 'e': fEndTime, 'E': fDependency, 'f': fFeatures, 'F': fArrayJobID,
	'g': fGroupName, 'G': fGroupID, 'h': fOverSub, 'H': fSockets, 'i': fJobID, 'I': fCores, 'j': fName,
	'J': fThreads, 'k': fComment, 'K': fArrayTaskID, 'l': fTimeLimit, 'L': fTimeLeft, 'm': fMinMemory,
	'M': fTimeUsed, 'n': fReqNodes, 'N': fNodes, 'o': fCommand, 'O': fContiguous, 'p': fPriority,
	'P': fPartition, 'q': fQOS, 'Q': fPriorityLong, 'r': fReason, 'R': fReasonList, 's': fSelect,
	'S': fStartTime, 't': fStateCompact, 'T': fState, 'u': fUserName, 'U': fUserID, 'v': fReservation,
	'V': fSubmitTime, 'w': fWCKey, 'W': fLicenses, 'x': fExcNodes, 'X': fCoreSpec, 'y': fNice,
	'Y': fSchedNodes, 'z': fSCT, 'Z': fWorkDir,
}

var squeueNames = map[string]*fieldDef{
	"account": fAccount, "jobid": fJobIDRaw, "gres": fTresPerNode, "batchhost": fBatchHost,
	"mincpus": fMinCPUs, "numcpus": fNumCPUs, "mintmpdisk": fMinTmpDisk, "numnodes": fNumNodes,
	"endtime": fEndTime, "dependency": fDependency, "feature": fFeatures, "arrayjobid": fArrayJobID,
	"groupname": fGroupName, "groupid": fGroupID, "oversubscribe": fOverSub, "shared": fOverSub,
	"sockets": fSockets, "jobarrayid": fJobID, "cores": fCores, "name": fName, "threads": fThreads,
	"comment": fComment, "arraytaskid": fArrayTaskID, "timelimit": fTimeLimit, "timeleft": fTimeLeft,
	"minmemory": fMinMemory, "timeused": fTimeUsed, "reqnodes": fReqNodes, "nodelist": fNodes,
	"command": fCommand, "contiguous": fContiguous, "priority": fPriority, "partition": fPartition,
	"qos": fQOS, "prioritylong": fPriorityLong, "reason": fReason, "reasonlist": fReasonList,
	"selectjobinfo": fSelect, "starttime": fStartTime, "statecompact": fStateCompact, "state": fState,
	"userid": fUserID, "username": fUserName, "reservation": fReservation, "submittime": fSubmitTime,
	"wckey": fWCKey, "licenses": fLicenses, "excnodes": fExcNodes, "corespec": fCoreSpec, "nice": fNice,
	"schednodes": fSchedNodes, "sct": fSCT, "workdir": fWorkDir,
	"numtasks":      {"TASKS", true, true, func(r *squeueRec, _ time.Time) string { return itoa(r.NumTasks) }},
	"tres-per-node": fTresPerNode,
	"tres-per-job":  {"TRES_PER_JOB", true, true, func(r *squeueRec, _ time.Time) string { return naStr(r.TresPerJob) }},
	"tres-per-task": {"TRES_PER_TASK", true, true, func(r *squeueRec, _ time.Time) string { return naStr(r.TresPerTask) }},
	"tres-alloc":    {"TRES_ALLOC", true, true, func(r *squeueRec, _ time.Time) string { return naStr(r.TRES) }},
	"tres":          {"TRES_ALLOC", true, true, func(r *squeueRec, _ time.Time) string { return naStr(r.TRES) }},
	"accruetime":    {"ACCRUE_TIME", true, true, func(r *squeueRec, _ time.Time) string { return squeueTime(r.Accrue) }},
	"eligibletime":  {"ELIGIBLE_TIME", true, true, func(r *squeueRec, _ time.Time) string { return squeueTime(r.Eligible) }},
	"lastschedeval": {"LAST_SCHED_EVAL", true, true, func(r *squeueRec, _ time.Time) string { return squeueTime(r.LastSchedEval) }},
	"allocnodes":    {"ALLOC_NODES", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.AllocNode) }},
	"allocsid":      {"ALLOC_SID", true, true, func(r *squeueRec, _ time.Time) string { return u32(r.AllocSID) }},
	"batchflag":     {"BATCH_FLAG", true, true, func(r *squeueRec, _ time.Time) string { return itoa(boolInt(r.BatchFlag)) }},
	"cpuspertask":   {"CPUS_PER_TASK", true, true, func(r *squeueRec, _ time.Time) string { return cpusPerTaskColumn(r.CPUsPerTask) }},
	"cpus-per-task": {"CPUS_PER_TASK", true, true, func(r *squeueRec, _ time.Time) string { return cpusPerTaskColumn(r.CPUsPerTask) }},
	"exit_code":     {"EXIT_CODE", true, true, func(r *squeueRec, _ time.Time) string { return itoa(waitStatus(r.ExitCode, r.ExitSignal)) }},
	"maxcpus": {"MAX_CPUS", true, true, func(r *squeueRec, _ time.Time) string {
		if r.MaxCPUs != 0 {
			return itoa(r.MaxCPUs)
		}
		return itoa(r.NumCPUs)
	}},
	"maxnodes": {"MAX_NODES", true, true, func(r *squeueRec, _ time.Time) string {
		if r.MaxNodes != 0 {
			return itoa(r.MaxNodes)
		}
		return itoa(r.NumNodes)
	}},
	"network": {"NETWORK", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.Network) }},
	"ntpernode": {"NTASKS_PER_NODE", true, true, func(r *squeueRec, _ time.Time) string {
		if r.NTasksPerNode == 0 {
			return "N/A"
		}
		return itoa(r.NTasksPerNode)
	}},
	"pendingtime": {"PENDING_TIME", true, true, func(r *squeueRec, now time.Time) string {
		if !r.Start.IsZero() && r.Start.Before(now) {
			return strconv.FormatInt(int64(r.Start.Sub(r.Submit)/time.Second), 10)
		}
		return strconv.FormatInt(int64(now.Sub(r.Submit)/time.Second), 10)
	}},
	"reboot":     {"REBOOT", true, true, func(r *squeueRec, _ time.Time) string { return itoa(boolInt(r.Reboot)) }},
	"requeue":    {"REQUEUE", true, true, func(r *squeueRec, _ time.Time) string { return itoa(boolInt(r.Requeue)) }},
	"restartcnt": {"RESTART_COUNT", true, true, func(r *squeueRec, _ time.Time) string { return itoa(r.Restarts) }},
	"stderr":     {"STDERR", true, true, func(r *squeueRec, _ time.Time) string { return stderrColumn(r) }},
	"stdin":      {"STDIN", true, true, func(r *squeueRec, _ time.Time) string { return nullStr(r.StdIn) }},
	"stdout":     {"STDOUT", true, true, func(r *squeueRec, _ time.Time) string { return stdoutColumn(r) }},
	"mintime": {"TIME_MIN", true, true, func(r *squeueRec, _ time.Time) string {
		return FormatSqueueDuration(r.TimeMin)
	}},
	"hetjobid": {"HET_JOB_ID", true, true, func(r *squeueRec, _ time.Time) string {
		if r.HetJobID == 0 {
			return "N/A"
		}
		return u32(r.HetJobID)
	}},
	"hetjoboffset": {"HET_JOB_OFFSET", true, true, func(r *squeueRec, _ time.Time) string {
		if r.HetJobID == 0 {
			return "N/A"
		}
		return u32(r.HetJobOffset)
	}},
	"cluster": {"CLUSTER", true, true, func(*squeueRec, time.Time) string { return "(null)" }},
}

func timeLeft(r *squeueRec, now time.Time) string {
	switch r.TimeLimit {
	case Unlimited:
		return "UNLIMITED"
	case 0:
		return "NOT_SET"
	}
	return FormatSqueueDuration(r.TimeLimit - r.runTime(now))
}

// waitStatus encodes an exit code and signal as wait(2) does, the raw
// value squeue's -O exit_code prints.
func waitStatus(code, sig int) int {
	if sig != 0 {
		return sig & 0x7f
	}
	return (code & 0xff) << 8
}

func userName(j *Job) string {
	if j.User != "" {
		return j.User
	}
	return u32(j.UID)
}

func groupName(j *Job) string {
	if j.Group != "" {
		return j.Group
	}
	return u32(j.GID)
}

// sortJobs sorts as squeue does: by start time (latest first, unknown
// last), then stably by each key of spec from the last to the first. Ties
// keep the input order.
func sortJobs(recs []*squeueRec, spec string, now time.Time) error {
	if spec == "" {
		spec = "P,t,-p"
	}
	sort.SliceStable(recs, func(a, b int) bool {
		sa, sb := recs[a].Start, recs[b].Start
		if sa.IsZero() || sb.IsZero() {
			return !sa.IsZero() && sb.IsZero()
		}
		return sa.After(sb)
	})
	for i := len(spec) - 1; i >= 0; i-- {
		c := spec[i]
		if c == ',' || c == '+' || c == '-' {
			continue
		}
		reverse := i > 0 && spec[i-1] == '-'
		cmp := jobSortKey(c, now)
		if cmp == nil {
			return &CommandError{Stderr: []string{fmt.Sprintf("squeue: error: Invalid sort specification: %c", c)}, ExitCode: 1}
		}
		sort.SliceStable(recs, func(a, b int) bool {
			d := cmp(recs[a], recs[b])
			if reverse {
				d = -d
			}
			return d < 0
		})
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func jobSortKey(c byte, now time.Time) func(a, b *squeueRec) int {
	switch c {
	case 'i':
		return func(a, b *squeueRec) int {
			ida, idb := sortID(a), sortID(b)
			if ida != idb {
				return cmpInt(ida, idb)
			}
			return cmpInt(int64(a.ArrayTaskID), int64(b.ArrayTaskID))
		}
	case 'A':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.JobID), int64(b.JobID)) }
	case 'j':
		return func(a, b *squeueRec) int { return strings.Compare(a.Name, b.Name) }
	case 'P':
		return func(a, b *squeueRec) int { return strings.Compare(a.part, b.part) }
	case 't':
		return func(a, b *squeueRec) int { return strings.Compare(a.State.Compact(), b.State.Compact()) }
	case 'T':
		return func(a, b *squeueRec) int { return strings.Compare(a.State.String(), b.State.String()) }
	case 'p', 'Q':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.Priority), int64(b.Priority)) }
	case 'S':
		start := func(r *squeueRec) int64 {
			if r.State.Pending() && r.Start.Before(now) {
				return now.Unix()
			}
			return r.Start.Unix()
		}
		return func(a, b *squeueRec) int {
			switch {
			case a.Start.IsZero() && b.Start.IsZero():
				return 0
			case a.Start.IsZero():
				return 1
			case b.Start.IsZero():
				return -1
			}
			return cmpInt(start(a), start(b))
		}
	case 'e':
		return func(a, b *squeueRec) int { return cmpInt(a.End.Unix(), b.End.Unix()) }
	case 'V':
		return func(a, b *squeueRec) int { return cmpInt(a.Submit.Unix(), b.Submit.Unix()) }
	case 'M':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.runTime(now)), int64(b.runTime(now))) }
	case 'l':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.TimeLimit), int64(b.TimeLimit)) }
	case 'D':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.NumNodes), int64(b.NumNodes)) }
	case 'C':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.NumCPUs), int64(b.NumCPUs)) }
	case 'm':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.MinMemoryMB), int64(b.MinMemoryMB)) }
	case 'N':
		return func(a, b *squeueRec) int { return strings.Compare(a.NodeList, b.NodeList) }
	case 'u':
		return func(a, b *squeueRec) int { return strings.Compare(userName(a.Job), userName(b.Job)) }
	case 'U':
		return func(a, b *squeueRec) int { return cmpInt(int64(a.UID), int64(b.UID)) }
	case 'a':
		return func(a, b *squeueRec) int { return strings.Compare(a.Account, b.Account) }
	case 'q':
		return func(a, b *squeueRec) int { return strings.Compare(a.QOS, b.QOS) }
	case 'c', 'f', 'h', 'n', 'O', 'b', 'B', 'd', 'g', 'G', 'H', 'I', 'J', 'L', 'v', 'z':
		return func(a, b *squeueRec) int { return 0 } // accepted, as squeue does, without effect here
	}
	return nil
}

func sortID(r *squeueRec) int64 {
	switch {
	case r.HetJobID != 0:
		return int64(r.HetJobID)
	case r.ArrayJobID != 0:
		return int64(r.ArrayJobID)
	}
	return int64(r.JobID)
}
