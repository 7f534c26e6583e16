package slurm

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// SinfoOptions selects sinfo's output.
type SinfoOptions struct {
	Format     string    // -o ("%P %a %l %D %t %N"); "" for the default
	LongFormat string    // -O ("partition:9 ,nodes:.6"); "" for the default
	Nodes      bool      // -N: one line per node (and partition)
	Long       bool      // -l, preceded by the date
	Summarize  bool      // -s
	NoHeader   bool      // -h
	Now        time.Time // for the -l date line
}

// The default formats of sinfo 22.05.
const (
	sinfoDefault       = "partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statecompact:.6 ,nodelist:0"
	sinfoDefaultLong   = "partition:9 ,available:.5 ,time:.10 ,size:.10 ,root:.4 ,oversubscribe:.8 ,groups:.10 ,nodes:.6 ,statelong:.11 ,nodelist:0"
	sinfoNodes         = "nodelist:0 ,nodes:.6 ,partition:.9 ,statecompact:6"
	sinfoNodesLong     = "nodelist:0 ,nodes:.6 ,partition:.9 ,statelong:.11 ,cpus:4 ,socketcorethread:.8 ,memory:.6 ,disk:.8 ,weight:.6 ,features:.8 ,reason:20"
	sinfoSummarize     = "partition:9 ,available:.5 ,time:.10 ,nodeaiot:.16 ,nodelist:0"
	minNodeFieldSize   = 9
	minPartitionFieldS = 9
)

// sinfoRec is one line of sinfo: nodes of one partition that look alike.
type sinfoRec struct {
	part    *Partition
	partIdx int
	nodes   []*Node
	state   NodeState

	allocNodes, idleNodes, otherNodes int
	allocCPUs, idleCPUs, otherCPUs    int
	totalCPUs                         int
}

// FormatSinfo prints partitions and their nodes as sinfo does, byte for
// byte: nodes of a partition that share what the format shows (state,
// features, GRES, reason) are one line; with Nodes, every node has its own
// line. Partitions are listed in the order given, nodes in theirs; a node
// is in a partition when the partition's Nodes hostlist names it.
func FormatSinfo(parts []Partition, nodes []Node, o SinfoOptions) (string, []string) {
	long := o.LongFormat
	nodeWidth, partWidth := false, false
	if o.Format == "" && long == "" {
		switch {
		case o.Summarize:
			long, partWidth = sinfoSummarize, true
		case o.Nodes && o.Long:
			long, nodeWidth, partWidth = sinfoNodesLong, true, true
		case o.Nodes:
			long, nodeWidth, partWidth = sinfoNodes, true, true
		case o.Long:
			long, partWidth = sinfoDefaultLong, true
		default:
			long, partWidth = sinfoDefault, true
		}
	}
	var fields []sinfoField
	var warnings []string
	if long != "" {
		fields, warnings = parseSinfoLongFormat(long)
	} else {
		fields, warnings = parseSinfoFormat(o.Format)
	}
	match := map[string]bool{}
	for _, f := range fields {
		if f.def != nil {
			match[f.def.match] = true
		}
	}
	recs := buildSinfo(parts, nodes, match, o.Nodes)
	sortSinfo(recs, o.Nodes)
	if nodeWidth {
		w := minNodeFieldSize
		for _, r := range recs {
			w = max(w, len(r.nodeList()))
		}
		setWidth(fields, "nodelist", w)
	}
	if partWidth {
		w := minPartitionFieldS
		for _, r := range recs {
			n := len(r.part.Name)
			if r.part.Default {
				n++
			}
			w = max(w, n)
		}
		setWidth(fields, "partition", w)
	}
	var b strings.Builder
	if o.Long && !o.NoHeader {
		b.WriteString(o.Now.Format("Mon Jan _2 15:04:05 2006"))
		b.WriteByte('\n')
	}
	if !o.NoHeader {
		for _, f := range fields {
			if f.def != nil {
				sinfoPrint(&b, f.def.title, f.width, f.right, f.def.name != "nodelist")
			}
			b.WriteString(f.suffix)
		}
		b.WriteByte('\n')
	}
	for _, r := range recs {
		for _, f := range fields {
			if f.def != nil {
				v := f.def.value(r)
				if f.def.name == "partition" && r.part.Default && f.width > 0 && len(r.part.Name) >= f.width {
					v = r.part.Name[:f.width-1] + "*" // the mark replaces the last character that fits
				}
				sinfoPrint(&b, v, f.width, f.right, true)
			}
			b.WriteString(f.suffix)
		}
		b.WriteByte('\n')
	}
	return b.String(), warnings
}

func setWidth(fields []sinfoField, name string, w int) {
	for i := range fields {
		if fields[i].def != nil && fields[i].def.name == name {
			fields[i].width = w
		}
	}
}

// sinfoPrint is sinfo's _print_str: like squeue's, but a negative width
// right-justifies too.
func sinfoPrint(b *strings.Builder, s string, width int, right, cut bool) {
	if width < 0 {
		width = -width
	}
	printField(b, s, width, right, cut)
}

func buildSinfo(parts []Partition, nodes []Node, match map[string]bool, perNode bool) []*sinfoRec {
	var recs []*sinfoRec
	for pi := range parts {
		p := &parts[pi]
		members := map[string]bool{}
		if hosts, err := ExpandHostlist(p.Nodes); err == nil {
			for _, h := range hosts {
				members[h] = true
			}
		}
		var mine []*sinfoRec
		for ni := range nodes {
			n := &nodes[ni]
			if !members[n.Name] {
				continue
			}
			var rec *sinfoRec
			if !perNode {
				for _, r := range mine {
					if r.matches(n, match) {
						rec = r
						break
					}
				}
			}
			if rec == nil {
				rec = &sinfoRec{part: p, partIdx: pi, state: n.shownState()}
				mine = append(mine, rec)
			}
			rec.add(n)
		}
		if len(mine) == 0 {
			mine = append(mine, &sinfoRec{part: p, partIdx: pi})
		}
		recs = append(recs, mine...)
	}
	return recs
}

func (r *sinfoRec) matches(n *Node, match map[string]bool) bool {
	first := r.nodes[0]
	switch {
	case match["state"] && n.shownState().String() != r.state.String():
		return false
	case match["features"] && n.Features != first.Features:
		return false
	case match["features_act"] && n.ActiveFeatures != first.ActiveFeatures:
		return false
	case match["gres"] && n.Gres != first.Gres:
		return false
	case match["gres_used"] && n.GresUsed != first.GresUsed:
		return false
	case match["reason"] && n.Reason != first.Reason:
		return false
	case match["reason_time"] && !n.ReasonTime.Equal(first.ReasonTime):
		return false
	case match["reason_user"] && n.ReasonUser != first.ReasonUser:
		return false
	case match["statecomplete"] && n.shownState().Complete() != r.state.Complete():
		return false
	}
	return true
}

func (r *sinfoRec) add(n *Node) {
	r.nodes = append(r.nodes, n)
	st := n.State
	base := st.Base()
	switch {
	case base == NodeAllocated || base == NodeMixed || st.has(NodeCompleting) || n.CPUsAlloc > 0:
		r.allocNodes++
	case st.has(NodeDrain) || base == NodeDown:
		r.otherNodes++
	default:
		r.idleNodes++
	}
	r.totalCPUs += n.CPUs
	r.allocCPUs += n.CPUsAlloc
	if st.has(NodeDrain) || base == NodeDown {
		r.otherCPUs += n.CPUs - n.CPUsAlloc
	} else {
		r.idleCPUs += n.CPUs - n.CPUsAlloc
	}
}

func (r *sinfoRec) nodeList() string {
	names := make([]string, len(r.nodes))
	for i, n := range r.nodes {
		names[i] = n.Name
	}
	return CompressHostlist(names)
}

// sortSinfo is sinfo's default order: partitions as configured, then node
// state, highest first ("#P,-t"); with -N, by node name ("N").
func sortSinfo(recs []*sinfoRec, perNode bool) {
	if perNode {
		sort.SliceStable(recs, func(a, b int) bool {
			if len(recs[a].nodes) == 0 || len(recs[b].nodes) == 0 {
				return len(recs[a].nodes) > len(recs[b].nodes)
			}
			ha, hb := parseHost(recs[a].nodes[0].Name), parseHost(recs[b].nodes[0].Name)
			return rangeCmp(&ha, &hb) < 0
		})
		return
	}
	sort.SliceStable(recs, func(a, b int) bool { return recs[a].state > recs[b].state })
	sort.SliceStable(recs, func(a, b int) bool { return recs[a].partIdx < recs[b].partIdx })
}

type sinfoDef struct {
	name  string // the -O name, also used to find the auto-sized columns
	title string
	match string // what lines must share when this column is shown
	value func(r *sinfoRec) string
}

type sinfoField struct {
	def    *sinfoDef
	width  int
	right  bool
	suffix string
}

func minMax(vals []int, suffix bool) string {
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	f := func(v int) string {
		if suffix {
			return convertNumUnit(float64(v), unitNone)
		}
		return itoa(v)
	}
	if lo == hi {
		return f(hi)
	}
	return f(lo) + "+"
}

func (r *sinfoRec) ints(get func(*Node) int) []int {
	out := make([]int, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = get(n)
	}
	if len(out) == 0 {
		return []int{0}
	}
	return out
}

func (r *sinfoRec) firstNode() *Node {
	if len(r.nodes) == 0 {
		return &Node{}
	}
	return r.nodes[0]
}

func partTime(d time.Duration) string {
	if d == Unlimited || d == 0 {
		return "infinite"
	}
	return FormatSqueueDuration(d.Truncate(time.Minute))
}

func stateOrNA(r *sinfoRec, f func(NodeState) string) string {
	if len(r.nodes) == 0 {
		return "n/a"
	}
	return strings.ToLower(f(r.state))
}

var sinfoDefs = []*sinfoDef{
	{"available", "AVAIL", "avail", func(r *sinfoRec) string { return strings.ToLower(r.part.State.String()) }},
	{"nodeai", "NODES(A/I)", "", func(r *sinfoRec) string { return fmt.Sprintf("%d/%d", r.allocNodes, r.idleNodes) }},
	{"features_act", "ACTIVE_FEATURES", "features_act", func(r *sinfoRec) string { return nullStr(r.firstNode().ActiveFeatures) }},
	{"maxcpuspernode", "MAX_CPUS_PER_NODE", "", func(*sinfoRec) string { return "UNLIMITED" }},
	{"cpus", "CPUS", "cpus", func(r *sinfoRec) string { return minMax(r.ints(func(n *Node) int { return n.CPUs }), true) }},
	{"cpusstate", "CPUS(A/I/O/T)", "", func(r *sinfoRec) string {
		return fmt.Sprintf("%d/%d/%d/%d", r.allocCPUs, r.idleCPUs, r.otherCPUs, r.totalCPUs)
	}},
	{"disk", "TMP_DISK", "disk", func(r *sinfoRec) string { return minMax(r.ints(func(n *Node) int { return int(n.TmpDiskMB) }), false) }},
	{"nodes", "NODES", "", func(r *sinfoRec) string { return itoa(len(r.nodes)) }},
	{"freemem", "FREE_MEM", "free_mem", func(r *sinfoRec) string {
		vals := r.ints(func(n *Node) int {
			if n.FreeMemMB == nil {
				return -1
			}
			return int(*n.FreeMemMB)
		})
		s := minMax(vals, false)
		return strings.ReplaceAll(s, "-1", "N/A")
	}},
	{"reason", "REASON", "reason", func(r *sinfoRec) string {
		reason := r.firstNode().Reason
		if reason == "" || strings.HasPrefix(reason, "(null)") {
			return "none"
		}
		return reason
	}},
	{"features", "AVAIL_FEATURES", "features", func(r *sinfoRec) string { return nullStr(r.firstNode().Features) }},
	{"nodeaiot", "NODES(A/I/O/T)", "", func(r *sinfoRec) string {
		return fmt.Sprintf("%d/%d/%d/%d", r.allocNodes, r.idleNodes, r.otherNodes, len(r.nodes))
	}},
	{"groups", "GROUPS", "groups", func(r *sinfoRec) string {
		if r.part.AllowGroups == "" {
			return "all"
		}
		return r.part.AllowGroups
	}},
	{"gres", "GRES", "gres", func(r *sinfoRec) string { return nullStr(r.firstNode().Gres) }},
	{"gresused", "GRES_USED", "gres_used", func(r *sinfoRec) string { return nullStr(r.firstNode().GresUsed) }},
	{"oversubscribe", "OVERSUBSCRIBE", "oversubscribe", func(r *sinfoRec) string {
		if r.part.OverSubscribe == "" {
			return "NO"
		}
		return r.part.OverSubscribe
	}},
	{"timestamp", "TIMESTAMP", "reason_time", func(r *sinfoRec) string {
		if r.firstNode().ReasonTime.IsZero() {
			return "Unknown"
		}
		return FormatTimestamp(r.firstNode().ReasonTime)
	}},
	{"priorityjobfactor", "PRIO_JOB_FACTOR", "", func(r *sinfoRec) string { return itoa(r.part.priorityFactor()) }},
	{"time", "TIMELIMIT", "max_time", func(r *sinfoRec) string { return partTime(r.part.MaxTime) }},
	{"defaulttime", "DEFAULTTIME", "default_time", func(r *sinfoRec) string {
		if r.part.DefaultTime == 0 {
			return "n/a"
		}
		return partTime(r.part.DefaultTime)
	}},
	{"memory", "MEMORY", "memory", func(r *sinfoRec) string {
		return minMax(r.ints(func(n *Node) int { return int(n.RealMemoryMB) }), false)
	}},
	{"preemptmode", "PREEMPT_MODE", "", func(r *sinfoRec) string { return strings.ToLower(upperOr(r.part.PreemptMode, "OFF")) }},
	{"nodehost", "HOSTNAMES", "hostnames", func(r *sinfoRec) string {
		var hs []string
		for _, n := range r.nodes {
			hs = append(hs, n.Hostname)
		}
		return RangedHostlist(hs)
	}},
	{"nodelist", "NODELIST", "", func(r *sinfoRec) string { return r.nodeList() }},
	{"nodeaddr", "NODE_ADDR", "node_addr", func(r *sinfoRec) string {
		var hs []string
		for _, n := range r.nodes {
			hs = append(hs, n.Addr)
		}
		return RangedHostlist(hs)
	}},
	{"cpusload", "CPU_LOAD", "cpu_load", func(r *sinfoRec) string {
		if l := r.firstNode().CPULoad; l != nil {
			return fmt.Sprintf("%.2f", *l)
		}
		return "N/A"
	}},
	{"prioritytier", "PRIO_TIER", "", func(r *sinfoRec) string { return itoa(r.part.priorityTier()) }},
	{"partition", "PARTITION", "partition", func(r *sinfoRec) string {
		if r.part.Default { // the default partition is marked with "*"
			return r.part.Name + "*"
		}
		return r.part.Name
	}},
	{"root", "ROOT", "root", func(r *sinfoRec) string {
		if r.part.RootOnly {
			return "yes"
		}
		return "no"
	}},
	{"partitionname", "PARTITION", "partition", func(r *sinfoRec) string { return r.part.Name }},
	{"size", "JOB_SIZE", "job_size", func(r *sinfoRec) string {
		lo := max(r.part.MinNodes, 1)
		if r.part.MaxNodes == 0 {
			return itoa(lo) + "-infinite"
		}
		if lo == r.part.MaxNodes {
			return itoa(lo)
		}
		return fmt.Sprintf("%d-%d", lo, r.part.MaxNodes)
	}},
	{"allocnodes", "ALLOCNODES", "", func(*sinfoRec) string { return "all" }},
	{"statecompact", "STATE", "state", func(r *sinfoRec) string { return stateOrNA(r, NodeState.Compact) }},
	{"statelong", "STATE", "state", func(r *sinfoRec) string { return stateOrNA(r, NodeState.String) }},
	{"statecomplete", "STATECOMPLETE", "statecomplete", func(r *sinfoRec) string { return stateOrNA(r, NodeState.Complete) }},
	{"user", "USER", "reason_user", func(r *sinfoRec) string {
		if u := r.firstNode().ReasonUser; u != "" {
			return u
		}
		return "Unknown"
	}},
	{"version", "VERSION", "version", func(r *sinfoRec) string { return naStr(r.firstNode().Version) }},
	{"weight", "WEIGHT", "weight", func(r *sinfoRec) string {
		return minMax(r.ints(func(n *Node) int { return max(n.Weight, 1) }), false)
	}},
	{"sockets", "SOCKETS", "sockets", func(r *sinfoRec) string { return minMax(r.ints(func(n *Node) int { return n.Sockets }), true) }},
	{"cores", "CORES", "cores", func(r *sinfoRec) string { return minMax(r.ints(func(n *Node) int { return n.CoresPerSocket }), true) }},
	{"threads", "THREADS", "threads", func(r *sinfoRec) string { return minMax(r.ints(func(n *Node) int { return n.ThreadsPerCore }), true) }},
	{"socketcorethread", "S:C:T", "sct", func(r *sinfoRec) string {
		return minMax(r.ints(func(n *Node) int { return n.Sockets }), true) + ":" +
			minMax(r.ints(func(n *Node) int { return n.CoresPerSocket }), true) + ":" +
			minMax(r.ints(func(n *Node) int { return n.ThreadsPerCore }), true)
	}},
	{"allocmem", "ALLOCMEM", "alloc_mem", func(r *sinfoRec) string { return itoa(int(r.firstNode().AllocMemMB)) }},
	{"comment", "COMMENT", "comment", func(r *sinfoRec) string { return nullStr(r.firstNode().Comment) }},
}

var sinfoLetters = map[byte]string{
	'a': "available", 'A': "nodeai", 'b': "features_act", 'B': "maxcpuspernode", 'c': "cpus", 'C': "cpusstate",
	'd': "disk", 'D': "nodes", 'e': "freemem", 'E': "reason", 'f': "features", 'F': "nodeaiot", 'g': "groups",
	'G': "gres", 'h': "oversubscribe", 'H': "timestamp", 'I': "priorityjobfactor", 'l': "time", 'L': "defaulttime",
	'm': "memory", 'M': "preemptmode", 'n': "nodehost", 'N': "nodelist", 'o': "nodeaddr", 'O': "cpusload",
	'p': "prioritytier", 'P': "partition", 'r': "root", 'R': "partitionname", 's': "size", 'S': "allocnodes",
	't': "statecompact", 'T': "statelong", 'u': "user", 'v': "version", 'w': "weight", 'X': "sockets",
	'Y': "cores", 'Z': "threads", 'z': "socketcorethread",
}

func sinfoDefByName(name string) *sinfoDef {
	for _, d := range sinfoDefs {
		if strings.EqualFold(d.name, name) {
			return d
		}
	}
	return nil
}

func parseSinfoFormat(format string) ([]sinfoField, []string) {
	var fields []sinfoField
	var warnings []string
	lead, toks := formatTokens(format)
	if lead != "" {
		fields = append(fields, sinfoField{suffix: lead})
	}
	for _, t := range toks {
		f := sinfoField{right: t.right, width: t.width, suffix: t.suffix}
		if name, ok := sinfoLetters[t.letter]; ok {
			f.def = sinfoDefByName(name)
		} else {
			f.suffix = "%" + t.raw
			warnings = append(warnings, fmt.Sprintf("sinfo: error: Invalid node format specification: %c", t.letter))
		}
		fields = append(fields, f)
	}
	return fields, warnings
}

func parseSinfoLongFormat(format string) ([]sinfoField, []string) {
	var fields []sinfoField
	var warnings []string
	for _, tok := range strings.Split(format, ",") {
		if tok == "" {
			continue
		}
		name, width, right, suffix := longFormatItem(tok)
		f := sinfoField{width: width, right: right, suffix: suffix}
		if f.def = sinfoDefByName(name); f.def == nil {
			warnings = append(warnings, "sinfo: error: Invalid node format specification: "+name)
		}
		fields = append(fields, f)
	}
	return fields, warnings
}
