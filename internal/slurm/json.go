package slurm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Slurm 22.05 prints --json with json-c's pretty printer: two-space indent,
// `"key": value`, empty containers on two lines, "/" escaped as "\/", and
// no newline at the end. jobj and friends reproduce it exactly.

type jkv struct {
	k string
	v any
}

// jobj is a JSON object that keeps its keys in order.
type jobj []jkv

func (o *jobj) add(k string, v any) { *o = append(*o, jkv{k, v}) }

func writeJSON(b *strings.Builder, v any, level int) {
	indent := func(l int) { b.WriteString(strings.Repeat("  ", l)) }
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case uint32:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case float64:
		s := strconv.FormatFloat(x, 'g', 17, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		b.WriteString(s)
	case string:
		writeJSONString(b, x)
	case jobj:
		b.WriteString("{\n")
		for i, kv := range x {
			if i > 0 {
				b.WriteString(",\n")
			}
			indent(level + 1)
			writeJSONString(b, kv.k)
			b.WriteString(": ")
			writeJSON(b, kv.v, level+1)
		}
		if len(x) > 0 {
			b.WriteByte('\n')
		}
		indent(level)
		b.WriteByte('}')
	case []any:
		b.WriteString("[\n")
		for i, e := range x {
			if i > 0 {
				b.WriteString(",\n")
			}
			indent(level + 1)
			writeJSON(b, e, level+1)
		}
		if len(x) > 0 {
			b.WriteByte('\n')
		}
		indent(level)
		b.WriteByte(']')
	default:
		panic(fmt.Sprintf("slurm: no JSON form for %T", v))
	}
}

func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '/':
			b.WriteString(`\/`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

func jsonDocument(plugin, name, listKey string, items []any) string {
	var meta jobj
	var pl jobj
	pl.add("type", plugin)
	pl.add("name", name)
	meta.add("plugin", pl)
	var ver jobj
	ver.add("major", 22)
	ver.add("micro", 8)
	ver.add("minor", 5)
	var sl jobj
	sl.add("version", ver)
	sl.add("release", "22.05.8")
	meta.add("Slurm", sl)
	var doc jobj
	doc.add("meta", meta)
	doc.add("errors", []any{})
	doc.add(listKey, items)
	var b strings.Builder
	writeJSON(&b, doc, 0)
	return b.String()
}

func unix(t time.Time) int64 {
	if t.IsZero() || t.Equal(TimeNone) {
		return 0
	}
	return t.Unix()
}

func orNil(cond bool, v any) any {
	if cond {
		return v
	}
	return nil
}

// SinfoJSON prints nodes as `sinfo --json` does.
func SinfoJSON(nodes []Node) string {
	items := make([]any, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		st := n.shownState()
		var o jobj
		o.add("architecture", n.Arch)
		o.add("burstbuffer_network_address", "")
		o.add("boards", max(n.Boards, 1))
		o.add("boot_time", unix(n.BootTime))
		o.add("comment", n.Comment)
		o.add("cores", n.CoresPerSocket)
		o.add("cpu_binding", 0)
		load := 0
		if n.CPULoad != nil {
			load = int(*n.CPULoad*100 + 0.5)
		}
		o.add("cpu_load", load)
		o.add("extra", "")
		free := int64(0)
		if n.FreeMemMB != nil {
			free = int64(*n.FreeMemMB)
		}
		o.add("free_memory", free)
		o.add("cpus", n.CPUs)
		o.add("last_busy", unix(n.LastBusy))
		o.add("features", n.Features)
		o.add("active_features", n.ActiveFeatures)
		o.add("gres", n.Gres)
		o.add("gres_drained", "N/A")
		o.add("gres_used", n.GresUsed)
		o.add("mcs_label", "")
		o.add("name", n.Name)
		o.add("next_state_after_reboot", "invalid")
		o.add("address", n.Addr)
		o.add("hostname", n.Hostname)
		o.add("state", strings.ToLower(nodeBaseNames[min(int(st.Base()), len(nodeBaseNames)-1)]))
		var flags []any
		for _, f := range strings.Split(st.Complete(), "+")[1:] {
			flags = append(flags, f)
		}
		o.add("state_flags", append([]any{}, flags...))
		o.add("next_state_after_reboot_flags", []any{})
		o.add("operating_system", n.OS)
		o.add("owner", nil)
		parts := make([]any, len(n.Partitions))
		for i, p := range n.Partitions {
			parts[i] = p
		}
		o.add("partitions", parts)
		port := n.Port
		if port == 0 {
			port = 6818
		}
		o.add("port", port)
		o.add("real_memory", n.RealMemoryMB)
		o.add("reason", n.Reason)
		o.add("reason_changed_at", unix(n.ReasonTime))
		o.add("reason_set_by_user", orNil(n.ReasonUser != "", n.ReasonUser))
		o.add("slurmd_start_time", unix(n.SlurmdStart))
		o.add("sockets", n.Sockets)
		o.add("threads", n.ThreadsPerCore)
		o.add("temporary_disk", n.TmpDiskMB)
		o.add("weight", max(n.Weight, 1))
		o.add("tres", n.CfgTRES)
		o.add("slurmd_version", n.Version)
		o.add("alloc_memory", n.AllocMemMB)
		o.add("alloc_cpus", n.CPUsAlloc)
		o.add("idle_cpus", n.cpusEffective()-n.CPUsAlloc)
		o.add("tres_used", orNil(n.AllocTRES != "", n.AllocTRES))
		o.add("tres_weighted", 0.0)
		items[i] = o
	}
	return jsonDocument("openapi/v0.0.38", "Slurm OpenAPI v0.0.38", "nodes", items)
}

// SqueueJSON prints jobs as `squeue --json` does: every field of Slurm's
// v0.0.38 job record, in its order, from the Job (fields Berth has no
// notion of keep Slurm's empty values). Array records are not folded.
func SqueueJSON(jobs []Job, cluster string) string {
	items := make([]any, len(jobs))
	for i := range jobs {
		items[i] = squeueJSONJob(&jobs[i], cluster)
	}
	return jsonDocument("openapi/v0.0.38", "Slurm OpenAPI v0.0.38", "jobs", items)
}

func squeueJSONJob(j *Job, cluster string) jobj {
	started := !j.State.Pending() && !j.Start.IsZero()
	var o jobj
	o.add("account", j.Account)
	o.add("accrue_time", unix(j.Accrue))
	o.add("admin_comment", "")
	o.add("array_job_id", j.ArrayJobID)
	o.add("array_task_id", orNil(j.isArrayTask(), j.ArrayTaskID))
	o.add("array_max_tasks", j.ArrayThrottle)
	tasks := ""
	if j.ArrayTasks != nil {
		tasks = FormatArrayTasks(j.ArrayTasks, j.ArrayThrottle)
	}
	o.add("array_task_string", tasks)
	o.add("association_id", 0)
	o.add("batch_features", "")
	o.add("batch_flag", j.BatchFlag)
	o.add("batch_host", j.BatchHost)
	o.add("flags", []any{})
	o.add("burst_buffer", "")
	o.add("burst_buffer_state", "")
	o.add("cluster", cluster)
	o.add("cluster_features", "")
	o.add("command", j.Command)
	o.add("comment", j.Comment)
	o.add("container", "")
	o.add("contiguous", j.Contiguous)
	o.add("core_spec", nil)
	o.add("thread_spec", nil)
	o.add("cores_per_socket", nil)
	billing, _ := strconv.Atoi(tresCount(j.TRES, "billing"))
	o.add("billable_tres", orNil(started, float64(billing)))
	o.add("cpus_per_task", nil)
	o.add("cpu_frequency_minimum", nil)
	o.add("cpu_frequency_maximum", nil)
	o.add("cpu_frequency_governor", nil)
	o.add("cpus_per_tres", "")
	o.add("deadline", 0)
	o.add("delay_boot", 0)
	dep := ""
	if j.Dependency != nil {
		if s := j.Dependency.String(); s != "(null)" {
			dep = s
		}
	}
	o.add("dependency", dep)
	o.add("derived_exit_code", 0)
	o.add("eligible_time", unix(j.Eligible))
	o.add("end_time", unix(j.End))
	o.add("excluded_nodes", j.ExcNodes)
	o.add("exit_code", waitStatus(j.ExitCode, j.ExitSignal))
	o.add("features", j.Features)
	o.add("federation_origin", "")
	o.add("federation_siblings_active", "")
	o.add("federation_siblings_viable", "")
	o.add("gres_detail", []any{})
	o.add("group_id", j.GID)
	o.add("group_name", groupName(j))
	o.add("job_id", j.JobID)
	if started {
		o.add("job_resources", jobResources(j))
	}
	o.add("job_state", j.State.String())
	o.add("last_sched_evaluation", unix(j.LastSchedEval))
	o.add("licenses", j.Licenses)
	o.add("max_cpus", j.MaxCPUs)
	o.add("max_nodes", j.MaxNodes)
	o.add("mcs_label", "")
	o.add("memory_per_tres", "")
	o.add("name", j.Name)
	o.add("nodes", j.NodeList)
	o.add("nice", orNil(j.Nice != 0, j.Nice))
	o.add("tasks_per_core", nil)
	o.add("tasks_per_node", j.NTasksPerNode)
	o.add("tasks_per_socket", nil)
	o.add("tasks_per_board", 0)
	o.add("cpus", j.NumCPUs)
	o.add("node_count", j.NumNodes)
	o.add("tasks", j.NumTasks)
	o.add("het_job_id", j.HetJobID)
	o.add("het_job_id_set", "")
	o.add("het_job_offset", j.HetJobOffset)
	o.add("partition", j.Partition)
	o.add("prefer", "")
	o.add("memory_per_node", orNil(!j.MemPerCPU, j.MinMemoryMB))
	o.add("memory_per_cpu", orNil(j.MemPerCPU, j.MinMemoryMB))
	o.add("minimum_cpus_per_node", j.MinCPUsNode)
	o.add("minimum_tmp_disk_per_node", j.MinTmpDiskMB)
	o.add("preempt_time", 0)
	o.add("pre_sus_time", int64(j.PreSuspend/time.Second))
	o.add("priority", j.Priority)
	o.add("profile", nil)
	o.add("qos", j.QOS)
	o.add("reboot", j.Reboot)
	o.add("required_nodes", j.ReqNodes)
	o.add("requeue", j.Requeue)
	o.add("resize_time", 0)
	o.add("restart_cnt", j.Restarts)
	o.add("resv_name", "")
	o.add("shared", nil)
	o.add("show_flags", []any{"SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"})
	o.add("sockets_per_board", 0)
	o.add("sockets_per_node", nil)
	o.add("start_time", unix(j.Start))
	o.add("state_description", "")
	reason := j.Reason
	if reason == "" {
		reason = ReasonNone
	}
	o.add("state_reason", reason)
	o.add("standard_error", j.StdErr)
	o.add("standard_input", j.StdIn)
	o.add("standard_output", j.StdOut)
	o.add("submit_time", unix(j.Submit))
	o.add("suspend_time", unix(j.SuspendTime))
	o.add("system_comment", "")
	limit := any(nil)
	if j.TimeLimit != Unlimited && j.TimeLimit != 0 {
		limit = int64(j.TimeLimit / time.Minute)
	}
	o.add("time_limit", limit)
	o.add("time_minimum", int64(j.TimeMin/time.Minute))
	o.add("threads_per_core", nil)
	o.add("tres_bind", "")
	o.add("tres_freq", "")
	o.add("tres_per_job", j.TresPerJob)
	o.add("tres_per_node", j.TresPerNode)
	o.add("tres_per_socket", "")
	o.add("tres_per_task", j.TresPerTask)
	o.add("tres_req_str", j.TRES)
	alloc := ""
	if started {
		alloc = j.TRES
	}
	o.add("tres_alloc_str", alloc)
	o.add("user_id", j.UID)
	o.add("user_name", userName(j))
	o.add("wckey", "")
	o.add("current_working_directory", j.WorkDir)
	return o
}

// jobResources describes a started job's allocation: its CPUs spread evenly
// over its nodes, numbered from core 0 of socket 0 (Berth does not report
// core ids), and its memory.
func jobResources(j *Job) jobj {
	hosts, _ := ExpandHostlist(j.NodeList)
	var o jobj
	o.add("nodes", j.NodeList)
	o.add("allocated_cores", j.NumCPUs)
	o.add("allocated_hosts", len(hosts))
	var nodes []any
	for _, h := range hosts {
		cpus := j.NumCPUs / max(len(hosts), 1)
		var cores jobj
		for c := 0; c < cpus; c++ {
			cores.add(strconv.Itoa(c), "allocated")
		}
		var sock jobj
		sock.add("cores", cores)
		var sockets jobj
		sockets.add("0", sock)
		mem := j.MinMemoryMB
		if j.MemPerCPU {
			mem *= uint64(cpus)
		}
		var n jobj
		n.add("sockets", sockets)
		n.add("nodename", h)
		n.add("cpus_used", 0)
		n.add("memory_used", 0)
		n.add("memory_allocated", mem)
		nodes = append(nodes, n)
	}
	o.add("allocated_nodes", append([]any{}, nodes...))
	return o
}

// tresIDs are the ids slurmdbd gives the built-in TRES types, in order.
var tresIDs = []struct {
	typ  string
	name string
	id   int
}{{"cpu", "", 1}, {"mem", "", 2}, {"energy", "", 3}, {"node", "", 4}, {"billing", "", 5}}

// tresList turns a sacct-style TRES string into slurmdbd's list, energy
// (unknown) included when withEnergy.
func tresList(tres string, withEnergy bool) []any {
	var out []any
	entry := func(typ string, name any, id int, count any) jobj {
		var o jobj
		o.add("type", typ)
		o.add("name", name)
		o.add("id", id)
		o.add("count", count)
		return o
	}
	for _, t := range tresIDs {
		if t.typ == "energy" {
			if withEnergy {
				out = append(out, entry("energy", nil, 3, nil))
			}
			continue
		}
		v := tresCount(tres, t.typ)
		if v == "" {
			continue
		}
		n := int64(0)
		if t.typ == "mem" {
			if b, err := ParseMemory(v); err == nil {
				n = b / MiB
			}
		} else {
			n, _ = strconv.ParseInt(v, 10, 64)
		}
		out = append(out, entry(t.typ, nil, t.id, n))
	}
	for i, kv := range strings.Split(tres, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutPrefix(k, "gres/"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			out = append(out, entry("gres", name, 1001+i, n))
		}
	}
	return append([]any{}, out...)
}

func exitCodeJSON(code, sig int, pending bool) jobj {
	var o jobj
	switch {
	case pending:
		o.add("status", "PENDING")
		o.add("return_code", nil)
	case sig != 0:
		o.add("status", "SIGNALED")
		o.add("return_code", nil)
		var s jobj
		s.add("signal_id", sig)
		s.add("name", signalDescription(sig))
		o.add("signal", s)
	default:
		// Slurm 22.05 reports every normal exit as SUCCESS with code 0,
		// whatever the code was; tools reading --json see that, so do we.
		o.add("status", "SUCCESS")
		o.add("return_code", 0)
	}
	return o
}

func signalDescription(sig int) string {
	names := map[int]string{1: "Hangup", 2: "Interrupt", 3: "Quit", 6: "Aborted", 9: "Killed", 10: "User defined signal 1",
		12: "User defined signal 2", 14: "Alarm clock", 15: "Terminated", 18: "Continued", 19: "Stopped (signal)",
		24: "CPU time limit exceeded"}
	if n, ok := names[sig]; ok {
		return n
	}
	return "Unknown signal " + strconv.Itoa(sig)
}

func cpuTimeJSON(d time.Duration) jobj {
	var o jobj
	o.add("seconds", int64(d/time.Second))
	o.add("microseconds", int64(d%time.Second/time.Microsecond))
	return o
}

// SacctJSON prints accounting records as `sacct --json` does (Slurm's
// dbv0.0.38 schema): one object per job, its steps nested in it.
func SacctJSON(recs []AcctRecord, cluster string) string {
	var items []any
	for i := 0; i < len(recs); i++ {
		r := &recs[i]
		if r.Step != "" {
			continue
		}
		var steps []any
		for k := i + 1; k < len(recs) && recs[k].Step != "" && recs[k].JobID == r.JobID; k++ {
			steps = append(steps, sacctJSONStep(&recs[k]))
		}
		items = append(items, sacctJSONJob(r, cluster, steps))
	}
	return jsonDocument("openapi/dbv0.0.38", "Slurm OpenAPI DB v0.0.38", "jobs", items)
}

func sacctJSONJob(r *AcctRecord, cluster string, steps []any) jobj {
	var o jobj
	o.add("account", r.Account)
	var comment jobj
	comment.add("administrator", nil)
	comment.add("job", orNil(r.Extra["Comment"] != "", r.Extra["Comment"]))
	comment.add("system", nil)
	o.add("comment", comment)
	nodes, _ := strconv.Atoi(func() string { s, _ := r.field("NNodes"); return s }())
	o.add("allocation_nodes", nodes)
	var array, limits, maxo, running jobj
	array.add("job_id", r.ArrayJobID)
	running.add("tasks", 0)
	maxo.add("running", running)
	limits.add("max", maxo)
	array.add("limits", limits)
	switch {
	case r.ArrayTasks != "":
		array.add("task", r.ArrayTasks)
		array.add("task_id", nil)
	default:
		array.add("task", orNil(r.ArrayJobID != 0, strconv.Itoa(r.ArrayTaskID)))
		array.add("task_id", orNil(r.ArrayJobID != 0, r.ArrayTaskID))
	}
	o.add("array", array)
	var assoc jobj
	assoc.add("account", r.Account)
	assoc.add("cluster", cluster)
	assoc.add("partition", nil)
	assoc.add("user", r.User)
	o.add("association", assoc)
	o.add("cluster", cluster)
	o.add("constraints", r.Extra["Constraints"])
	o.add("container", nil)
	o.add("derived_exit_code", exitCodeJSON(r.DerivedCode, r.DerivedSig, false))
	var tm jobj
	tm.add("elapsed", int64(r.Elapsed/time.Second))
	tm.add("eligible", unix(r.Eligible))
	tm.add("end", unix(r.End))
	tm.add("start", unix(r.Start))
	tm.add("submission", unix(r.Submit))
	tm.add("suspended", 0)
	tm.add("system", cpuTimeJSON(0))
	limit := any(nil)
	if r.TimeLimit != Unlimited && r.TimeLimit != 0 {
		limit = int64(r.TimeLimit / time.Minute)
	}
	tm.add("limit", limit)
	tm.add("total", cpuTimeJSON(0))
	tm.add("user", cpuTimeJSON(0))
	o.add("time", tm)
	o.add("exit_code", exitCodeJSON(r.ExitCode, r.ExitSignal, r.State.Pending()))
	flags := []any{}
	if r.Extra["Flags"] != "" {
		for _, f := range strings.Split(r.Extra["Flags"], ",") {
			flags = append(flags, f)
		}
	}
	o.add("flags", flags)
	o.add("group", r.Group)
	var het jobj
	het.add("job_id", r.HetJobID)
	het.add("job_offset", orNil(r.HetJobID != 0, r.HetJobOffset))
	o.add("het", het)
	o.add("job_id", r.JobID)
	o.add("name", r.JobName)
	var mcs jobj
	mcs.add("label", "")
	o.add("mcs", mcs)
	o.add("nodes", r.NodeList)
	o.add("partition", r.Partition)
	o.add("priority", r.Priority)
	o.add("qos", r.QOS)
	var req jobj
	cpus, _ := strconv.Atoi(tresCount(r.ReqTRES, "cpu"))
	req.add("CPUs", cpus)
	mem := int64(0)
	if b, err := ParseMemory(tresCount(r.ReqTRES, "mem")); err == nil {
		mem = b / MiB
	}
	req.add("memory", mem)
	o.add("required", req)
	o.add("kill_request_user", nil)
	var resv jobj
	resv.add("id", 0)
	resv.add("name", 0)
	o.add("reservation", resv)
	var state jobj
	state.add("current", r.State.String())
	reason := r.Reason
	if reason == "" {
		reason = ReasonNone
	}
	state.add("reason", reason)
	o.add("state", state)
	o.add("steps", append([]any{}, steps...))
	var tres jobj
	tres.add("allocated", tresList(r.AllocTRES, true))
	tres.add("requested", tresList(r.ReqTRES, false))
	o.add("tres", tres)
	o.add("user", r.User)
	var wckey jobj
	wckey.add("wckey", "")
	wckey.add("flags", []any{})
	o.add("wckey", wckey)
	o.add("working_directory", r.WorkDir)
	return o
}

func sacctJSONStep(s *AcctRecord) jobj {
	var o jobj
	hosts, _ := ExpandHostlist(s.NodeList)
	var nodes jobj
	list := make([]any, len(hosts))
	for i, h := range hosts {
		list[i] = h
	}
	nodes.add("list", list)
	nodes.add("count", len(hosts))
	nodes.add("range", s.NodeList)
	o.add("nodes", nodes)
	energy := func() []any {
		var e jobj
		e.add("type", "energy")
		e.add("name", nil)
		e.add("id", 3)
		e.add("count", 0)
		return []any{e}
	}
	usage := func() jobj {
		var u jobj
		u.add("max", []any{})
		u.add("min", []any{})
		u.add("average", energy())
		u.add("total", energy())
		return u
	}
	var tres jobj
	tres.add("requested", usage())
	tres.add("consumed", usage())
	tres.add("allocated", tresList(s.AllocTRES, false))
	o.add("tres", tres)
	var tm jobj
	tm.add("elapsed", int64(s.Elapsed/time.Second))
	tm.add("end", unix(s.End))
	tm.add("start", unix(s.Start))
	tm.add("suspended", 0)
	sys, user := stepCPU(s)
	tm.add("system", cpuTimeJSON(sys))
	tm.add("total", cpuTimeJSON(sys+user))
	tm.add("user", cpuTimeJSON(user))
	o.add("time", tm)
	o.add("exit_code", exitCodeJSON(s.ExitCode, s.ExitSignal, false))
	var tasks jobj
	tasks.add("count", max(s.NTasks, 1))
	o.add("tasks", tasks)
	o.add("pid", nil)
	var cpu, freq jobj
	freq.add("min", 0)
	freq.add("max", 0)
	cpu.add("requested_frequency", freq)
	cpu.add("governor", []any{})
	o.add("CPU", cpu)
	o.add("kill_request_user", nil)
	o.add("state", s.State.String())
	var stats, scpu, sen jobj
	scpu.add("actual_frequency", 0)
	sen.add("consumed", 0)
	stats.add("CPU", scpu)
	stats.add("energy", sen)
	o.add("statistics", stats)
	var step, het jobj
	step.add("job_id", s.JobID)
	het.add("component", nil)
	step.add("het", het)
	step.add("id", s.Step)
	step.add("name", s.JobName)
	o.add("step", step)
	var task jobj
	task.add("distribution", "Unknown")
	o.add("task", task)
	return o
}

// stepCPU reads the SystemCPU and UserCPU a step used from Extra, as sacct
// prints them ("00:00.001731").
func stepCPU(s *AcctRecord) (sys, user time.Duration) {
	parse := func(v string) time.Duration {
		m, rest, ok := strings.Cut(v, ":")
		if !ok {
			return 0
		}
		mins, _ := strconv.Atoi(m)
		secs, _ := strconv.ParseFloat(rest, 64)
		return time.Duration(mins)*time.Minute + time.Duration(secs*float64(time.Second)+0.5)
	}
	return parse(s.Extra["SystemCPU"]), parse(s.Extra["UserCPU"])
}
