package slurm

import (
	"fmt"
	"strings"
	"time"
)

// ShowJob prints one job as `scontrol show job` does (slurm_sprint_job_info):
// Key=Value pairs, several to a line indented by three spaces, a blank line
// after the record; with oneLiner (scontrol -o) all on one line. now is
// for RunTime and EndTime.
func ShowJob(j *Job, oneLiner bool, now time.Time) string {
	end := "\n   "
	if oneLiner {
		end = " "
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	w("JobId=%d ", j.JobID)
	switch {
	case j.ArrayJobID != 0:
		if j.ArrayTasks != nil {
			w("ArrayJobId=%d ArrayTaskId=%s ", j.ArrayJobID, FormatArrayTasks(j.ArrayTasks, j.ArrayThrottle))
		} else {
			w("ArrayJobId=%d ArrayTaskId=%d ", j.ArrayJobID, j.ArrayTaskID)
		}
		if j.ArrayThrottle > 0 {
			w("ArrayTaskThrottle=%d ", j.ArrayThrottle)
		}
	case j.HetJobID != 0:
		w("HetJobId=%d HetJobOffset=%d ", j.HetJobID, j.HetJobOffset)
	}
	w("JobName=%s%s", j.Name, end)
	w("UserId=%s(%d) GroupId=%s(%d) MCS_label=N/A%s", userName(j), j.UID, groupName(j), j.GID, end)
	w("Priority=%d Nice=%d Account=%s QOS=%s%s", j.Priority, j.Nice, nullStr(j.Account), nullStr(j.QOS), end)
	reason := j.Reason
	if reason == "" {
		reason = ReasonNone
	}
	w("JobState=%s Reason=%s Dependency=%s%s", j.State, strings.ReplaceAll(reason, " ", "_"), j.Dependency, end)
	w("Requeue=%d Restarts=%d BatchFlag=%d Reboot=%d ExitCode=%d:%d%s",
		boolInt(j.Requeue), j.Restarts, boolInt(j.BatchFlag), boolInt(j.Reboot), j.ExitCode, j.ExitSignal, end)

	limit := "Partition_Limit"
	if j.TimeLimit != 0 {
		limit = FormatTimeLimit(j.TimeLimit)
	}
	timeMin := "N/A"
	if j.TimeMin != 0 {
		timeMin = FormatTimeLimit(j.TimeMin)
	}
	w("RunTime=%s TimeLimit=%s TimeMin=%s%s", FormatElapsed(j.runTime(now)), limit, timeMin, end)
	w("SubmitTime=%s EligibleTime=%s%s", FormatTimestamp(j.Submit), FormatTimestamp(j.Eligible), end)
	w("AccrueTime=%s%s", FormatTimestamp(j.Accrue), end)
	endTime := FormatTimestamp(j.End)
	if j.TimeLimit == Unlimited && j.End.After(now) {
		endTime = "Unknown"
	}
	w("StartTime=%s EndTime=%s Deadline=N/A%s", FormatTimestamp(j.Start), endTime, end)
	suspend := "None"
	if !j.SuspendTime.IsZero() {
		suspend = FormatTimestamp(j.SuspendTime)
	}
	scheduler := "Main"
	if j.Backfill {
		scheduler = "Backfill"
	}
	if j.BackfillLast {
		scheduler += ":*"
	}
	w("SuspendTime=%s SecsPreSuspend=%d LastSchedEval=%s Scheduler=%s%s",
		suspend, int64(j.PreSuspend/time.Second), FormatTimestamp(j.LastSchedEval), scheduler, end)
	w("Partition=%s AllocNode:Sid=%s:%d%s", j.Partition, nullStr(j.AllocNode), j.AllocSID, end)
	w("ReqNodeList=%s ExcNodeList=%s%s", nullStr(j.ReqNodes), nullStr(j.ExcNodes), end)
	w("NodeList=%s", j.NodeList)
	if j.SchedNodes != "" {
		w(" SchedNodeList=%s", j.SchedNodes)
	}
	b.WriteString(end)
	if j.BatchHost != "" {
		w("BatchHost=%s%s", j.BatchHost, end)
	}
	nodes := sprintRange(j.NumNodes, 0)
	if j.State.Pending() {
		nodes = sprintRange(j.NumNodes, j.MaxNodes)
	}
	tasks := "N/A"
	if j.NumTasks > 0 {
		tasks = itoa(j.NumTasks)
	}
	w("NumNodes=%s NumCPUs=%s NumTasks=%s CPUs/Task=%s ReqB:S:C:T=0:0:*:*%s",
		nodes, sprintRange(j.NumCPUs, j.MaxCPUs), tasks, cpusPerTaskColumn(j.CPUsPerTask), end)
	w("TRES=%s%s", nullStr(j.TRES), end)
	w("Socks/Node=* NtasksPerN:B:S:C=%d:0:*:* CoreSpec=*%s", j.NTasksPerNode, end)
	memKind := "Node"
	if j.MemPerCPU {
		memKind = "CPU"
	}
	w("MinCPUsNode=%d MinMemory%s=%s MinTmpDiskNode=%s%s", j.MinCPUsNode, memKind,
		FormatMemoryMB(j.MinMemoryMB), FormatMemoryMB(j.MinTmpDiskMB), end)
	w("Features=%s DelayBoot=00:00:00%s", nullStr(j.Features), end)
	w("OverSubscribe=%s Contiguous=%d Licenses=%s Network=%s%s",
		overSubscribe(j.OverSubscribe), boolInt(j.Contiguous), nullStr(j.Licenses), nullStr(j.Network), end)
	w("Command=%s%s", nullStr(j.Command), end)
	w("WorkDir=%s", j.WorkDir)
	if j.Comment != "" {
		w("%sComment=%s ", end, j.Comment)
	}
	if j.BatchFlag {
		w("%sStdErr=%s", end, jobStderrPath(j))
		stdin := j.StdIn
		if stdin == "" {
			stdin = "/dev/null"
		}
		w("%sStdIn=%s", end, stdin)
		w("%sStdOut=%s", end, jobStdoutPath(j))
	}
	w("%sPower=", end)
	if j.KillOnInvalidDep != nil {
		if *j.KillOnInvalidDep {
			w("%sKillOInInvalidDependent=Yes", end)
		} else {
			w("%sKillOInInvalidDependent=No", end)
		}
	}
	if j.TresPerJob != "" {
		w("%sTresPerJob=%s", end, j.TresPerJob)
	}
	if j.TresPerNode != "" {
		w("%sTresPerNode=%s", end, j.TresPerNode)
	}
	if j.TresPerTask != "" {
		w("%sTresPerTask=%s", end, j.TresPerTask)
	}
	b.WriteString(end)
	if oneLiner {
		b.WriteString("\n")
	} else {
		b.WriteString("\n\n")
	}
	return b.String()
}

// ShowJobs prints jobs one after another, as `scontrol show job` does.
func ShowJobs(jobs []Job, oneLiner bool, now time.Time) string {
	var b strings.Builder
	for i := range jobs {
		b.WriteString(ShowJob(&jobs[i], oneLiner, now))
	}
	return b.String()
}

// JobNotFoundError is what `scontrol show job 10_5` prints, and how it
// exits, for an array task that is no longer there.
func JobNotFoundError(id string) *CommandError {
	return &CommandError{Stdout: "Job " + id + " not found\n", ExitCode: 1}
}

func sprintRange(lo, hi int) string {
	if hi > 0 {
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	return itoa(lo)
}

func jobStdoutPath(j *Job) string {
	switch {
	case j.StdOut != "":
		return displayPath(j.StdOut, j)
	case j.ArrayJobID != 0 && j.ArrayTasks == nil:
		return fmt.Sprintf("%s/slurm-%d_%d.out", j.WorkDir, j.ArrayJobID, j.ArrayTaskID)
	}
	return fmt.Sprintf("%s/slurm-%d.out", j.WorkDir, j.JobID)
}

func jobStderrPath(j *Job) string {
	if j.StdErr != "" {
		return displayPath(j.StdErr, j)
	}
	return jobStdoutPath(j)
}

// ShowNode prints one node as `scontrol show node` does
// (slurm_sprint_node_table).
func ShowNode(n *Node, oneLiner bool) string {
	end := "\n   "
	if oneLiner {
		end = " "
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("NodeName=%s ", n.Name)
	if n.Arch != "" {
		w("Arch=%s ", n.Arch)
	}
	w("CoresPerSocket=%d %s", n.CoresPerSocket, end)
	w("CPUAlloc=%d CPUEfctv=%d CPUTot=%d ", n.CPUsAlloc, n.cpusEffective(), n.CPUs)
	if n.CPULoad == nil {
		b.WriteString("CPULoad=N/A")
	} else {
		w("CPULoad=%.2f", *n.CPULoad)
	}
	b.WriteString(end)
	w("AvailableFeatures=%s%s", nullStr(n.Features), end)
	w("ActiveFeatures=%s%s", nullStr(n.ActiveFeatures), end)
	w("Gres=%s%s", nullStr(n.Gres), end)
	line := ""
	if n.Addr != "" {
		line += "NodeAddr=" + n.Addr + " "
	}
	if n.Hostname != "" {
		line += "NodeHostName=" + n.Hostname + " "
	}
	if n.Port != 0 {
		line += fmt.Sprintf("Port=%d ", n.Port)
	}
	if n.Version != "" {
		line += "Version=" + n.Version
	}
	if line != "" {
		b.WriteString(line + end)
	}
	if n.OS != "" {
		w("OS=%s %s", n.OS, end)
	}
	w("RealMemory=%d AllocMem=%d ", n.RealMemoryMB, n.AllocMemMB)
	if n.FreeMemMB == nil {
		b.WriteString("FreeMem=N/A ")
	} else {
		w("FreeMem=%d ", *n.FreeMemMB)
	}
	w("Sockets=%d Boards=%d%s", n.Sockets, max(n.Boards, 1), end)
	w("State=%s ThreadsPerCore=%d TmpDisk=%d Weight=%d Owner=N/A MCS_label=N/A%s",
		n.shownState().Complete(), n.ThreadsPerCore, n.TmpDiskMB, max(n.Weight, 1), end)
	if len(n.Partitions) > 0 {
		w("Partitions=%s %s", strings.Join(n.Partitions, ","), end)
	}
	boot, start := "None", "None"
	if !n.BootTime.IsZero() {
		boot = FormatTimestamp(n.BootTime)
	}
	if !n.SlurmdStart.IsZero() {
		start = FormatTimestamp(n.SlurmdStart)
	}
	w("BootTime=%s SlurmdStartTime=%s%s", boot, start, end)
	w("LastBusyTime=%s%s", FormatTimestamp(n.LastBusy), end)
	w("CfgTRES=%s%s", n.CfgTRES, end)
	w("AllocTRES=%s%s", n.AllocTRES, end)
	w("CapWatts=n/a%s", end)
	w("CurrentWatts=0 AveWatts=0%s", end)
	b.WriteString("ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s")
	if n.Reason != "" {
		for i, l := range strings.Split(n.Reason, "\n") {
			b.WriteString(end)
			if i == 0 {
				b.WriteString("Reason=" + l)
				if !n.ReasonTime.IsZero() {
					w(" [%s@%s]", n.ReasonUser, FormatTimestamp(n.ReasonTime))
				}
			} else {
				b.WriteString("       " + l)
			}
		}
	}
	if n.Comment != "" {
		w("%sComment=%s", end, n.Comment)
	}
	if oneLiner {
		b.WriteString("\n")
	} else {
		b.WriteString("\n\n")
	}
	return b.String()
}

// ShowNodes prints nodes one after another, as `scontrol show node` does.
func ShowNodes(nodes []Node, oneLiner bool) string {
	var b strings.Builder
	for i := range nodes {
		b.WriteString(ShowNode(&nodes[i], oneLiner))
	}
	return b.String()
}

// ShowPartition prints one partition as `scontrol show partition` does
// (slurm_sprint_partition_info).
func ShowPartition(p *Partition, oneLiner bool) string {
	end := "\n   "
	if oneLiner {
		end = " "
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	yesNo := func(v bool) string {
		if v {
			return "YES"
		}
		return "NO"
	}
	w("PartitionName=%s%s", p.Name, end)
	w("AllowGroups=%s AllowAccounts=%s AllowQos=%s%s", orDefault(p.AllowGroups, "ALL"), orDefault(p.AllowAccounts, "ALL"), orDefault(p.AllowQOS, "ALL"), end)
	qos := p.QOS
	if qos == "" {
		qos = "N/A"
	}
	w("AllocNodes=ALL Default=%s QoS=%s%s", yesNo(p.Default), qos, end)
	defTime := "NONE"
	if p.DefaultTime == Unlimited {
		defTime = "UNLIMITED"
	} else if p.DefaultTime > 0 {
		defTime = FormatElapsed(p.DefaultTime.Truncate(time.Minute))
	}
	w("DefaultTime=%s DisableRootJobs=NO ExclusiveUser=%s GraceTime=%d Hidden=%s%s",
		defTime, yesNo(p.ExclusiveUser), int64(p.GraceTime/time.Second), yesNo(p.Hidden), end)
	maxNodes := "UNLIMITED"
	if p.MaxNodes > 0 {
		maxNodes = itoa(p.MaxNodes)
	}
	maxTime := "UNLIMITED"
	if p.MaxTime != Unlimited && p.MaxTime != 0 {
		maxTime = FormatElapsed(p.MaxTime.Truncate(time.Minute))
	}
	w("MaxNodes=%s MaxTime=%s MinNodes=%d LLN=NO MaxCPUsPerNode=UNLIMITED%s", maxNodes, maxTime, p.MinNodes, end)
	w("Nodes=%s%s", nullStr(p.Nodes), end)
	over := p.OverSubscribe
	if over == "" {
		over = "NO"
	}
	w("PriorityJobFactor=%d PriorityTier=%d RootOnly=%s ReqResv=NO OverSubscribe=%s%s",
		p.priorityFactor(), p.priorityTier(), yesNo(p.RootOnly), over, end)
	preempt := p.PreemptMode
	if preempt == "" {
		preempt = "OFF"
	}
	w("OverTimeLimit=NONE PreemptMode=%s%s", preempt, end)
	w("State=%s TotalCPUs=%d TotalNodes=%d SelectTypeParameters=NONE%s", p.State, p.TotalCPUs, p.TotalNodes, end)
	w("JobDefaults=(null)%s", end)
	switch {
	case p.DefMemPerCPU > 0:
		w("DefMemPerCPU=%d", p.DefMemPerCPU)
	case p.DefMemPerNode > 0:
		w("DefMemPerNode=%d", p.DefMemPerNode)
	default:
		b.WriteString("DefMemPerNode=UNLIMITED")
	}
	if p.MaxMemPerNode > 0 {
		w(" MaxMemPerNode=%d", p.MaxMemPerNode)
	} else {
		b.WriteString(" MaxMemPerNode=UNLIMITED")
	}
	w("%sTRES=%s", end, p.TRES)
	if oneLiner {
		b.WriteString("\n")
	} else {
		b.WriteString("\n\n")
	}
	return b.String()
}

// ShowPartitions prints partitions one after another.
func ShowPartitions(parts []Partition, oneLiner bool) string {
	var b strings.Builder
	for i := range parts {
		b.WriteString(ShowPartition(&parts[i], oneLiner))
	}
	return b.String()
}

// ShowHostnames is `scontrol show hostnames`: one host per line. An
// invalid expression gives scontrol's messages, with exit status 0 as
// scontrol exits.
func ShowHostnames(expr string) (string, error) {
	if expr == "" {
		return "", &CommandError{Stderr: []string{"scontrol: error: host list is empty"}}
	}
	hosts, err := ExpandHostlist(expr)
	if err != nil {
		var lines []string
		if he, ok := err.(*HostlistError); ok && strings.HasPrefix(he.Msg, "Invalid range") {
			lines = append(lines, "scontrol: error: _parse_single_range: "+he.Msg)
		}
		return "", &CommandError{Stderr: append(lines, "Invalid hostlist: "+expr)}
	}
	var b strings.Builder
	for _, h := range hosts {
		b.WriteString(h)
		b.WriteByte('\n')
	}
	return b.String(), nil
}
