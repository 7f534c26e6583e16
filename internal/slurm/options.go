package slurm

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// BatchOptions is one job, or one component of a heterogeneous job, as
// sbatch's options describe it. A zero field means "not given"; where zero
// is a meaningful value the field is a pointer or says so.
type BatchOptions struct {
	JobName   string   // -J; "wrap" for --wrap, else the script's base name
	Account   string   // -A
	Partition []string // -p a,b: any of these
	QOS       string   // -q
	Comment   string
	Nice      *int // --nice[=N]; 100 when given without a value
	Priority  *PriorityOption

	Nodes, MaxNodes int // -N min[-max]; 0 when not given
	NTasks          int // -n
	NTasksPerNode   int
	CPUsPerTask     int    // -c
	MinCPUsPerNode  int    // --mincpus
	Mem             int64  // --mem, bytes per node; -1 when not given (0 means all of it)
	MemPerCPU       int64  // bytes; -1 when not given
	MemPerGPU       int64  // bytes; -1 when not given
	TmpDisk         int64  // --tmp, bytes; -1 when not given
	GRES            []GRES // --gres
	GPUs            []GRES // --gpus / -G, per job
	GPUsPerNode     []GRES
	GPUsPerTask     []GRES
	CPUsPerGPU      int
	Constraint      string // -C
	Nodelist        string // -w, a hostlist
	Exclude         string // -x, a hostlist
	Licenses        string // -L
	Reservation     string
	Exclusive       string // "" not given; "exclusive", "user", "mcs" or "oversubscribe"
	Contiguous      bool
	Overcommit      bool

	TimeLimit time.Duration // -t; 0 when not given, Unlimited for UNLIMITED (and for "0", as Slurm)
	TimeMin   time.Duration
	Begin     time.Time // -b; zero when not given
	Deadline  time.Time

	Array            *ArraySpec  // -a
	Dependency       *Dependency // -d
	KillOnInvalidDep *bool
	Hold             bool  // -H
	Requeue          *bool // --requeue / --no-requeue
	Signal           *SignalSpec

	Chdir    string // -D, absolute; the submission directory when not given
	Output   string // -o, absolute ("none" is /dev/null); "" for Slurm's default
	Error    string // -e, like Output
	Input    string // -i; /dev/null when not given
	OpenMode string // "append" or "truncate"; "" when not given
	Export   Export // --export; ALL when not given
	MailType string
	MailUser string
	WCKey    string

	Wrap     string // --wrap command ("" when a script is given)
	Parsable bool
	TestOnly bool
	Wait     bool // -W
	Verbose  int  // -v, repeated
	Quiet    bool // -Q

	// Other holds every option Slurm accepts that Berth does not model,
	// by long name ("cpu-freq": "high"); flags map to "".
	Other map[string]string

	set map[string]bool // long names given, for the --mem family rule
}

// PriorityOption is --priority: a number, or TOP.
type PriorityOption struct {
	Value uint32
	Top   bool
}

func newBatchOptions() BatchOptions {
	return BatchOptions{Mem: -1, MemPerCPU: -1, MemPerGPU: -1, TmpDisk: -1, Export: Export{Mode: ExportAll}}
}

type argKind int

const (
	argNone argKind = iota
	argRequired
	argOptional
)

type optionDef struct {
	name  string
	arg   argKind
	short byte
	early bool // processed in sbatch's first pass only
}

// sbatchOptions is Slurm 22.05's option table for sbatch, in its own order:
// getopt_long lists ambiguous abbreviations in this order.
var sbatchOptions = []optionDef{
	{"account", argRequired, 'A', false},
	{"acctg-freq", argRequired, 0, false},
	{"array", argRequired, 'a', false},
	{"batch", argRequired, 0, false},
	{"begin", argRequired, 'b', false},
	{"bb", argRequired, 0, false},
	{"bbf", argRequired, 0, false},
	{"cluster-constraint", argRequired, 0, false},
	{"chdir", argRequired, 'D', false},
	{"cluster", argRequired, 0, false},
	{"clusters", argRequired, 'M', false},
	{"comment", argRequired, 0, false},
	{"container", argRequired, 0, false},
	{"context", argRequired, 0, false},
	{"contiguous", argNone, 0, false},
	{"constraint", argRequired, 'C', false},
	{"core-spec", argRequired, 'S', false},
	{"cores-per-socket", argRequired, 0, false},
	{"cpu-freq", argRequired, 0, false},
	{"cpus-per-gpu", argRequired, 0, false},
	{"cpus-per-task", argRequired, 'c', false},
	{"deadline", argRequired, 0, false},
	{"delay-boot", argRequired, 0, false},
	{"dependency", argRequired, 'd', false},
	{"distribution", argRequired, 'm', false},
	{"error", argRequired, 'e', false},
	{"exclude", argRequired, 'x', false},
	{"exclusive", argOptional, 0, false},
	{"export", argRequired, 0, false},
	{"export-file", argRequired, 0, false},
	{"extra-node-info", argRequired, 'B', false},
	{"get-user-env", argOptional, 0, false},
	{"gid", argRequired, 0, false},
	{"gpu-bind", argRequired, 0, false},
	{"gpu-freq", argRequired, 0, false},
	{"gpus", argRequired, 'G', false},
	{"gpus-per-node", argRequired, 0, false},
	{"gpus-per-socket", argRequired, 0, false},
	{"gpus-per-task", argRequired, 0, false},
	{"gres", argRequired, 0, false},
	{"gres-flags", argRequired, 0, false},
	{"help", argNone, 'h', true},
	{"hint", argRequired, 0, false},
	{"hold", argNone, 'H', false},
	{"ignore-pbs", argNone, 0, false},
	{"input", argRequired, 'i', false},
	{"job-name", argRequired, 'J', false},
	{"kill-on-invalid-dep", argRequired, 0, false},
	{"licenses", argRequired, 'L', false},
	{"mail-type", argRequired, 0, false},
	{"mail-user", argRequired, 0, false},
	{"mcs-label", argRequired, 0, false},
	{"mem", argRequired, 0, false},
	{"mem-bind", argRequired, 0, false},
	{"mem-per-cpu", argRequired, 0, false},
	{"mem-per-gpu", argRequired, 0, false},
	{"mincpus", argRequired, 0, false},
	{"network", argRequired, 0, false},
	{"nice", argOptional, 0, false},
	{"no-kill", argOptional, 'k', false},
	{"no-requeue", argNone, 0, false},
	{"nodefile", argRequired, 'F', false},
	{"nodelist", argRequired, 'w', false},
	{"nodes", argRequired, 'N', false},
	{"ntasks", argRequired, 'n', false},
	{"ntasks-per-core", argRequired, 0, false},
	{"ntasks-per-gpu", argRequired, 0, false},
	{"ntasks-per-node", argRequired, 0, false},
	{"ntasks-per-socket", argRequired, 0, false},
	{"ntasks-per-tres", argRequired, 0, false},
	{"open-mode", argRequired, 0, false},
	{"output", argRequired, 'o', false},
	{"overcommit", argNone, 'O', false},
	{"oversubscribe", argNone, 's', false},
	{"parsable", argNone, 0, false},
	{"partition", argRequired, 'p', false},
	{"power", argRequired, 0, false},
	{"prefer", argRequired, 0, false},
	{"priority", argRequired, 0, false},
	{"profile", argRequired, 0, false},
	{"propagate", argOptional, 0, false},
	{"qos", argRequired, 'q', false},
	{"quiet", argNone, 'Q', true},
	{"reboot", argNone, 0, false},
	{"requeue", argNone, 0, false},
	{"reservation", argRequired, 0, false},
	{"signal", argRequired, 0, false},
	{"sockets-per-node", argRequired, 0, false},
	{"spread-job", argNone, 0, false},
	{"switches", argRequired, 0, false},
	{"tasks-per-node", argRequired, 0, false},
	{"test-only", argNone, 0, false},
	{"thread-spec", argRequired, 0, false},
	{"threads-per-core", argRequired, 0, false},
	{"time", argRequired, 't', false},
	{"time-min", argRequired, 0, false},
	{"tmp", argRequired, 0, false},
	{"uid", argRequired, 0, false},
	{"use-min-nodes", argNone, 0, false},
	{"verbose", argNone, 'v', true},
	{"version", argNone, 'V', true},
	{"usage", argNone, 0, true},
	{"wait", argNone, 'W', false},
	{"wait-all-nodes", argRequired, 0, false},
	{"wckey", argRequired, 0, false},
	{"wrap", argRequired, 0, true},
}

// canonical names the one option that several long names set.
var canonicalOption = map[string]string{"tasks-per-node": "ntasks-per-node", "cluster": "clusters"}

// sbatchEnv maps the SBATCH_* variables sbatch reads to the options they set
// (env_vars in sbatch/opt.c). They apply after the script's directives and
// before the command line.
var sbatchEnv = []struct{ env, option string }{
	{"SBATCH_ACCOUNT", "account"}, {"SBATCH_ARRAY_INX", "array"},
	{"SBATCH_ACCTG_FREQ", "acctg-freq"}, {"SBATCH_BATCH", "batch"},
	{"SBATCH_BURST_BUFFER", "bb"}, {"SBATCH_CLUSTER_CONSTRAINT", "cluster-constraint"},
	{"SBATCH_CLUSTERS", "clusters"}, {"SLURM_CLUSTERS", "clusters"},
	{"SBATCH_CONTAINER", "container"}, {"SBATCH_CONSTRAINT", "constraint"},
	{"SBATCH_CORE_SPEC", "core-spec"}, {"SBATCH_CPU_FREQ_REQ", "cpu-freq"},
	{"SBATCH_CPUS_PER_GPU", "cpus-per-gpu"}, {"SBATCH_DEBUG", "verbose"},
	{"SBATCH_DELAY_BOOT", "delay-boot"}, {"SBATCH_DISTRIBUTION", "distribution"},
	{"SBATCH_EXCLUSIVE", "exclusive"}, {"SBATCH_EXPORT", "export"},
	{"SBATCH_GET_USER_ENV", "get-user-env"}, {"SBATCH_GRES", "gres"},
	{"SBATCH_GRES_FLAGS", "gres-flags"}, {"SBATCH_GPUS", "gpus"},
	{"SBATCH_GPU_BIND", "gpu-bind"}, {"SBATCH_GPU_FREQ", "gpu-freq"},
	{"SBATCH_GPUS_PER_NODE", "gpus-per-node"}, {"SBATCH_GPUS_PER_SOCKET", "gpus-per-socket"},
	{"SBATCH_GPUS_PER_TASK", "gpus-per-task"}, {"SLURM_HINT", "hint"}, {"SBATCH_HINT", "hint"},
	{"SBATCH_JOB_NAME", "job-name"}, {"SBATCH_MEM_BIND", "mem-bind"},
	{"SBATCH_MEM_PER_CPU", "mem-per-cpu"}, {"SBATCH_MEM_PER_GPU", "mem-per-gpu"},
	{"SBATCH_MEM_PER_NODE", "mem"}, {"SBATCH_NETWORK", "network"},
	{"SBATCH_NO_KILL", "no-kill"}, {"SBATCH_NO_REQUEUE", "no-requeue"},
	{"SBATCH_OPEN_MODE", "open-mode"}, {"SBATCH_OVERCOMMIT", "overcommit"},
	{"SBATCH_PARTITION", "partition"}, {"SBATCH_POWER", "power"},
	{"SBATCH_PROFILE", "profile"}, {"SBATCH_QOS", "qos"},
	{"SBATCH_REQ_SWITCH", "switches"}, {"SBATCH_REQUEUE", "requeue"},
	{"SBATCH_RESERVATION", "reservation"}, {"SBATCH_SIGNAL", "signal"},
	{"SBATCH_SPREAD_JOB", "spread-job"}, {"SBATCH_THREAD_SPEC", "thread-spec"},
	{"SBATCH_THREADS_PER_CORE", "threads-per-core"}, {"SBATCH_TIMELIMIT", "time"},
	{"SBATCH_USE_MIN_NODES", "use-min-nodes"}, {"SBATCH_WAIT", "wait"},
	{"SBATCH_WAIT_ALL_NODES", "wait-all-nodes"}, {"SBATCH_WCKEY", "wckey"},
	{"SBATCH_ERROR", "error"}, {"SBATCH_INPUT", "input"}, {"SBATCH_OUTPUT", "output"},
}

// optError is an option value sbatch refuses: the message after
// "sbatch: error: " and the exit status.
type optError struct {
	msgs []string // "error: ..." lines; a line starting with "!" is printed bare
	code int
}

func valueError(msg string) *optError { return &optError{msgs: []string{msg}, code: 255} }

// parseIntOption is Slurm's parse_int for a positive count: its errors exit
// with status 1, not 255.
func parseIntOption(flag, v string) (int, *optError) {
	num := leadingInt(v)
	rest := v
	if num != "" {
		rest = v[strings.Index(v, num)+len(num):]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case num != "" && rest == "" && err != nil && num[0] == '-':
		return 0, &optError{msgs: []string{fmt.Sprintf("Numeric argument (%d) to small for %s.", int64(math.MinInt64), flag)}, code: 1}
	case num != "" && rest == "" && err != nil:
		return 0, &optError{msgs: []string{fmt.Sprintf("Numeric argument (%d) to big for %s.", int64(math.MaxInt64), flag)}, code: 1}
	case num == "" || rest != "" || n <= 0:
		return 0, &optError{msgs: []string{fmt.Sprintf("Invalid numeric value \"%s\" for %s.", v, flag)}, code: 1}
	}
	return int(int32(n)), nil // C's (int) cast of a long
}

// apply sets one option. value is nil for an option given without a value.
func (o *BatchOptions) apply(name string, value *string, fromEnv bool, cwd string, now time.Time) *optError {
	if c, ok := canonicalOption[name]; ok {
		name = c
	}
	v := ""
	if value != nil {
		v = *value
	}
	def := findOption(name)
	if def != nil && def.arg == argNone && value != nil {
		// Only environment variables give a flag a value: "", "yes" or a
		// non-zero number set it, anything else clears it.
		n, err := strconv.ParseInt(v, 10, 64)
		if !(v == "" || strings.EqualFold(v, "yes") || (err == nil && n != 0)) {
			o.reset(name)
			return nil
		}
		value = nil
	}
	if o.set == nil {
		o.set = map[string]bool{}
	}
	if !fromEnv {
		o.set[name] = true
	}
	switch name {
	case "job-name":
		o.JobName = v
	case "account":
		o.Account = v
	case "partition":
		o.Partition = strings.Split(v, ",")
	case "qos":
		o.QOS = v
	case "comment":
		o.Comment = v
	case "constraint":
		o.Constraint = v
	case "nodelist":
		o.Nodelist = v
	case "exclude":
		o.Exclude = v
	case "licenses":
		o.Licenses = v
	case "reservation":
		o.Reservation = v
	case "mail-type":
		o.MailType = v
	case "mail-user":
		o.MailUser = v
	case "wckey":
		o.WCKey = v
	case "nice":
		n := 100
		if value != nil {
			x, _ := strtol(v)
			if x > math.MaxInt32-3 || x < -(math.MaxInt32-3) {
				return valueError(fmt.Sprintf("Invalid --nice value, out of range (+/- %d)", math.MaxInt32-2))
			}
			n = int(x)
		}
		o.Nice = &n
	case "priority":
		if strings.EqualFold(v, "TOP") {
			o.Priority = &PriorityOption{Top: true}
			break
		}
		p, _ := strtol(v)
		if p < 0 {
			return valueError("Priority must be >= 0")
		}
		if p >= 0xfffffffe {
			return valueError(fmt.Sprintf("Priority must be < %d", uint32(0xfffffffe)))
		}
		o.Priority = &PriorityOption{Value: uint32(p)}
	case "nodes":
		lo, hi, err := parseNodeCount(v)
		if err != nil {
			return err
		}
		o.Nodes, o.MaxNodes = lo, hi
	case "ntasks":
		n, err := parseIntOption("--ntasks", v)
		if err != nil {
			return err
		}
		o.NTasks = n
	case "ntasks-per-node":
		n, err := parseIntOption("--ntasks-per-node", v)
		if err != nil {
			return err
		}
		o.NTasksPerNode = n
	case "cpus-per-task":
		n, err := parseIntOption("--cpus-per-task", v)
		if err != nil {
			return err
		}
		o.CPUsPerTask = n
	case "mincpus":
		n, err := parseIntOption("--mincpus", v)
		if err != nil {
			return err
		}
		o.MinCPUsPerNode = n
	case "cpus-per-gpu":
		n, err := parseIntOption("--cpus-per-gpu", v)
		if err != nil {
			return err
		}
		o.CPUsPerGPU = n
	case "mem", "mem-per-cpu", "mem-per-gpu", "tmp":
		b, err := ParseMemory(v)
		if err != nil {
			return valueError("Invalid --" + name + " specification")
		}
		switch name {
		case "mem":
			o.Mem = b
		case "mem-per-cpu":
			o.MemPerCPU = b
		case "mem-per-gpu":
			o.MemPerGPU = b
		default:
			o.TmpDisk = b
		}
	case "gres":
		if strings.EqualFold(v, "help") || strings.EqualFold(v, "list") {
			o.setOther(name, v) // the CLI prints the GRES it knows
			break
		}
		g, err := ParseGRES(v)
		if err != nil {
			return &optError{msgs: []string{"Invalid generic resource (gres) specification"}, code: 1}
		}
		o.GRES = g
	case "gpus", "gpus-per-node", "gpus-per-task":
		g, err := ParseGPUs(v)
		if err != nil {
			return &optError{msgs: []string{"Invalid generic resource (gres) specification"}, code: 1}
		}
		switch name {
		case "gpus":
			o.GPUs = g
		case "gpus-per-node":
			o.GPUsPerNode = g
		default:
			o.GPUsPerTask = g
		}
	case "exclusive":
		switch {
		case value == nil || strings.EqualFold(v, "exclusive"):
			o.Exclusive = "exclusive"
		case strings.EqualFold(v, "oversubscribe"), strings.EqualFold(v, "user"), strings.EqualFold(v, "mcs"):
			o.Exclusive = strings.ToLower(v)
		default:
			return valueError("Invalid --exclusive specification")
		}
	case "contiguous":
		o.Contiguous = true
	case "overcommit":
		o.Overcommit = true
	case "time", "time-min":
		d, err := ParseTimeLimit(v)
		if err != nil {
			return valueError("Invalid --" + name + " specification")
		}
		if d == 0 {
			d = Unlimited
		}
		if name == "time" {
			o.TimeLimit = d
		} else {
			o.TimeMin = d
		}
	case "begin", "deadline":
		t, err := ParseBegin(v, now, false)
		if err != nil {
			e := valueError("Invalid --" + name + " specification")
			if be, ok := err.(*BeginError); ok && !be.Quiet {
				e.msgs = append([]string{"!" + be.Error()}, e.msgs...)
			}
			return e
		}
		if name == "begin" {
			o.Begin = t
		} else {
			o.Deadline = t
		}
	case "array":
		a, err := ParseArray(v, 0)
		if err != nil {
			return &optError{msgs: []string{"Batch job submission failed: Invalid job array specification"}, code: 1}
		}
		o.Array = &a
	case "dependency":
		d, err := ParseDependency(v)
		if err != nil {
			return &optError{msgs: []string{"Batch job submission failed: Job dependency problem"}, code: 1}
		}
		o.Dependency = d
	case "kill-on-invalid-dep":
		var b bool
		switch {
		case strings.EqualFold(v, "yes"):
			b = true
		case strings.EqualFold(v, "no"):
		default:
			return valueError("Invalid --kill-on-invalid-dep specification")
		}
		o.KillOnInvalidDep = &b
	case "hold":
		o.Hold = true
	case "requeue", "no-requeue":
		b := name == "requeue"
		o.Requeue = &b
	case "signal":
		s, err := ParseSignal(v)
		if err != nil {
			return valueError("Invalid --signal specification")
		}
		o.Signal = &s
	case "chdir":
		o.Chdir = absPath(v, cwd)
	case "output", "error":
		if strings.EqualFold(v, "none") {
			v = "/dev/null"
		}
		if name == "output" {
			o.Output = v
		} else {
			o.Error = v
		}
	case "input":
		if strings.EqualFold(v, "none") {
			v = "/dev/null"
		}
		o.Input = v
	case "open-mode":
		switch {
		case hasPrefixFold(v, "a"):
			o.OpenMode = "append"
		case hasPrefixFold(v, "t"):
			o.OpenMode = "truncate"
		default:
			return valueError("Invalid --open-mode specification")
		}
	case "export":
		o.Export = ParseExport(v)
	case "wrap":
		o.Wrap = v
	case "parsable":
		o.Parsable = true
	case "test-only":
		o.TestOnly = true
	case "wait":
		o.Wait = true
	case "verbose":
		o.Verbose++
	case "quiet":
		o.Quiet = true
	default:
		o.setOther(name, v)
	}
	return nil
}

func (o *BatchOptions) setOther(name, v string) {
	if o.Other == nil {
		o.Other = map[string]string{}
	}
	o.Other[name] = v
}

// reset clears an option, as an environment variable with a false value
// does for a flag.
func (o *BatchOptions) reset(name string) {
	switch name {
	case "contiguous":
		o.Contiguous = false
	case "overcommit":
		o.Overcommit = false
	case "hold":
		o.Hold = false
	case "requeue", "no-requeue":
		o.Requeue = nil
	case "parsable":
		o.Parsable = false
	case "test-only":
		o.TestOnly = false
	case "wait":
		o.Wait = false
	case "verbose":
		o.Verbose = 0
	case "quiet":
		o.Quiet = false
	default:
		delete(o.Other, name)
	}
}

func findOption(name string) *optionDef {
	for i := range sbatchOptions {
		if sbatchOptions[i].name == name {
			return &sbatchOptions[i]
		}
	}
	return nil
}

// parseNodeCount is verify_node_count: "N" or "min-max", with k/m
// multipliers.
func parseNodeCount(v string) (int, int, *optError) {
	one := func(s string) (int64, string) {
		n, rest := strtol(s)
		if rest == s {
			return -1, s
		}
		if strings.HasPrefix(rest, "k") || strings.HasPrefix(rest, "K") {
			n *= 1024
			rest = rest[1:]
		}
		if strings.HasPrefix(rest, "m") || strings.HasPrefix(rest, "M") {
			n *= 1024 * 1024
			rest = rest[1:]
		}
		return int64(int32(n)), rest
	}
	bad := func(s string) *optError { return valueError(fmt.Sprintf("\"%s\" is not a valid node count", s)) }
	var lo, hi int64
	if minStr, maxStr, ok := strings.Cut(v, "-"); ok {
		var rest string
		lo, rest = one(minStr)
		if strings.TrimSpace(rest) != "" {
			return 0, 0, bad(minStr)
		}
		if lo < 0 {
			lo = 1
		}
		hi, rest = one(maxStr)
		if strings.TrimSpace(rest) != "" {
			return 0, 0, bad(maxStr)
		}
	} else {
		var rest string
		lo, rest = one(v)
		if strings.TrimSpace(rest) != "" || lo < 0 {
			return 0, 0, bad(v)
		}
		hi = lo
	}
	if hi != 0 && hi < lo {
		return 0, 0, valueError(fmt.Sprintf("Maximum node count %d is less than minimum node count %d", hi, lo))
	}
	return int(lo), int(hi), nil
}

func absPath(p, cwd string) string {
	if p == "" || strings.HasPrefix(p, "/") || cwd == "" {
		return p
	}
	return strings.TrimSuffix(cwd, "/") + "/" + p
}

// TresPerNode is the job's per-node generic resources as Slurm records
// them (scontrol's TresPerNode, squeue's %b): --gpus-per-node as
// "gres:gpu:N", then --gres, "" when neither was given.
func (o *BatchOptions) TresPerNode() string {
	var parts []string
	if len(o.GPUsPerNode) > 0 {
		parts = append(parts, TRESString(o.GPUsPerNode))
	}
	if len(o.GRES) > 0 {
		parts = append(parts, TRESString(o.GRES))
	}
	return strings.Join(parts, ",")
}

// TresPerJob is --gpus as Slurm records it ("gres:gpu:4").
func (o *BatchOptions) TresPerJob() string { return TRESString(o.GPUs) }

// Given reports whether an option (by long name) was set by a directive or
// on the command line, not only by an SBATCH_* variable.
func (o *BatchOptions) Given(name string) bool { return o.set[name] }

// GivenOptions lists the long names of the options set, sorted.
func (o *BatchOptions) GivenOptions() []string {
	out := make([]string, 0, len(o.set))
	for k := range o.set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
