package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// scheduled fills the times slurmctld keeps for a job it has looked at.
func scheduled(eligible, accrue, lastEval string) func(*Job) {
	return func(j *Job) {
		if eligible != "" {
			j.Eligible = at(eligible)
		}
		if accrue != "" {
			j.Accrue = at(accrue)
		}
		j.LastSchedEval = at(lastEval)
	}
}

func fromQueue(id uint32) *jobBuilder {
	for _, j := range queueAt0118() {
		if j.JobID == id {
			return &jobBuilder{j}
		}
	}
	panic(id)
}

func TestScontrolShowJobGolden(t *testing.T) {
	arrayRecords := []Job{
		fromQueue(10).with(scheduled("", "01:26:09", "01:26:09")).build(),
		fromQueue(12).with(scheduled("01:26:09", "01:26:09", "01:26:09")).build(),
		fromQueue(11).with(scheduled("01:26:09", "01:26:09", "01:26:09")).build(),
	}
	timeout := func() *jobBuilder {
		return aJob(3, "timeout").with(func(j *Job) { j.TimeLimit = time.Minute }).running("01:24:32").
			prio(4294901757).submit("01:24:32").with(scheduled("01:24:32", "01:24:32", "01:24:32"))
	}
	tests := []struct {
		file     string
		jobs     []Job
		now      time.Time
		oneLiner bool
	}{
		{"scontrol-show-job-array.txt", arrayRecords, at("01:26:18"), false},
		{"scontrol-o-show-job-array.txt", arrayRecords, at("01:26:18"), true},
		{"scontrol-show-job-pending-arraytask-limit.txt", FilterJobs(arrayRecords[:1], JobFilter{AllStates: true, Jobs: []JobSelector{{10, 5}}}), at("01:26:18"), false},
		{"scontrol-show-job-pending-resources.txt", []Job{fromQueue(13).with(scheduled("01:26:09", "01:26:09", "01:26:12")).build()}, at("01:26:18"), false},
		{"scontrol-show-job-pending-dependency.txt", []Job{fromQueue(15).with(scheduled("", "", "01:26:09")).build()}, at("01:26:18"), false},
		{"scontrol-show-job-pending-depnever.txt", []Job{fromQueue(16).with(scheduled("", "", "01:26:09")).build()}, at("01:26:18"), false},
		{"scontrol-show-job-pending-held.txt", []Job{fromQueue(17).with(scheduled("", "", "01:26:09")).build()}, at("01:26:18"), false},
		{"scontrol-show-job-pending-begin.txt", []Job{fromQueue(18).with(scheduled("02:26:09", "02:26:09", "01:26:09")).build()}, at("01:26:18"), false},
		{"scontrol-show-job-pending-gpu.txt", []Job{fromQueue(19).with(scheduled("01:26:09", "01:26:09", "01:26:12")).build()}, at("01:26:18"), false},
		{"scontrol-show-job-pending-partitionconfig.txt", []Job{aJob(20, "wrap").prio(4294901744).submit("01:26:22").pending(ReasonPartitionConfig).with(func(j *Job) {
			j.NumCPUs, j.CPUsPerTask, j.MinCPUsNode = 4, 4, 4
			j.TRES = "cpu=4,mem=4000M,node=1,billing=4"
			j.StdOut = ""
		}).with(scheduled("01:26:22", "01:26:22", "01:26:22")).build()}, at("01:26:30"), false},
		{"scontrol-show-job-baddep.txt", []Job{aJob(22, "wrap").prio(4294901742).submit("01:26:22").pending(ReasonPriority).with(func(j *Job) {
			j.StdOut = ""
			j.Start = time.Date(2027, 11, 22, 1, 26, 9, 0, time.UTC) // the backfill scheduler's estimate
			j.End = j.Start.AddDate(1, 0, 0)
			j.Backfill, j.BackfillLast = true, true
		}).with(scheduled("01:26:22", "01:26:22", "01:26:24")).build()}, at("01:26:30"), false},
		{"scontrol-show-job-cancelled.txt", []Job{fromQueue(17).with(scheduled("", "", "01:26:09")).with(func(j *Job) {
			j.State = JobCancelled
			j.Start, j.End = at("01:26:21"), at("01:26:21")
			j.NumTasks = 0
		}).build()}, at("01:26:30"), false},
		{"scontrol-show-job-completed-array-task.txt", []Job{aJob(7, "envarr").task(6, 1, 0).prio(4294901754).submit("01:24:38").
			ended(JobCompleted, ReasonNone, "01:24:38", "01:24:38").with(scheduled("01:24:38", "", "01:24:38")).build()}, at("01:26:30"), false},
		{"scontrol-show-job-failed.txt", []Job{aJob(4, "fail3").prio(4294901756).submit("01:24:32").ended(JobFailed, ReasonNonZeroExitCode, "01:24:32", "01:24:32").
			with(scheduled("01:24:32", "01:24:32", "01:24:32")).with(func(j *Job) {
			j.ExitCode = 3
			j.StdOut = demoDir + "/fail3.out"
		}).build()}, at("01:26:30"), false},
		{"scontrol-show-job-gpu.txt", []Job{aJob(8, "envgpu").prio(4294901753).submit("01:24:43").ended(JobCompleted, ReasonNone, "01:24:44", "01:24:44").
			with(scheduled("01:24:43", "01:24:43", "01:24:44")).with(func(j *Job) {
			j.MinMemoryMB, j.MemPerCPU = 2048, false
			j.TRES = "cpu=1,mem=2G,node=1,billing=1,gres/gpu=2"
			j.TresPerNode = "gres:gpu:2"
		}).build()}, at("01:26:30"), false},
		{"scontrol-show-job-running.txt", []Job{timeout().build()}, at("01:24:50"), false},
		{"scontrol-show-job-timeout.txt", []Job{timeout().ended(JobTimeout, ReasonTimeLimit, "01:24:32", "01:25:54").with(func(j *Job) { j.ExitSignal = 15 }).build()}, at("01:26:30"), false},
		{"multinode/scontrol-show-job-N2.txt", []Job{aJob(13707, "multi").prio(4294888656).submit("01:57:23").running("01:57:24").
			with(scheduled("01:57:23", "01:57:23", "01:57:24")).with(func(j *Job) {
			j.NumNodes, j.NumCPUs, j.NumTasks = 2, 4, 4
			j.NodeList, j.BatchHost = "n[1-2]", "n1"
			j.TRES = "cpu=4,mem=4000M,node=2,billing=4"
			j.StdOut = demoDir + "/multi.out"
		}).build()}, at("01:57:27"), false},
		{"multinode/scontrol-show-job-gpu-2nodes.txt", []Job{aJob(13708, "gpu2n").prio(4294888655).submit("01:57:23").running("01:57:24").
			with(scheduled("01:57:23", "01:57:23", "01:57:24")).with(func(j *Job) {
			j.NumNodes, j.NumCPUs, j.NumTasks = 2, 2, 2
			j.NodeList, j.BatchHost = "n[3-4]", "n3"
			j.TRES = "cpu=2,mem=2000M,node=2,billing=2,gres/gpu=6"
			j.TresPerNode = "gres:gpu:3"
		}).build()}, at("01:57:27"), false},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			g := readGolden(t, tc.file)
			assertGolden(t, tc.file, g.stdout, ShowJobs(tc.jobs, tc.oneLiner, tc.now))
		})
	}
}

func TestScontrolJobNotFoundGolden(t *testing.T) {
	g := readGolden(t, "scontrol-show-job-cancelled-array-task.txt")
	e := JobNotFoundError("10_5")
	if e.Stdout != g.stdout || e.ExitCode != g.exit || len(e.Stderr) != 0 || g.stderr != "" {
		t.Errorf("got %q exit %d, want %q exit %d", e.Stdout, e.ExitCode, g.stdout, g.exit)
	}
}

func goldenNode() Node {
	load := 1.59
	free := uint64(18790)
	return Node{
		Name: "localhost", Arch: "x86_64", Sockets: 1, CoresPerSocket: 2, ThreadsPerCore: 1, Boards: 1,
		CPUs: 2, CPULoad: &load, Gres: "gpu:4", GresUsed: "gpu:0", Addr: "localhost", Hostname: "localhost",
		Version: "22.05.8", OS: "Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0", RealMemoryMB: 20000,
		FreeMemMB: &free, State: NodeIdle, Weight: 1, Partitions: []string{"debug"},
		BootTime: at("01:17:54"), SlurmdStart: at("01:23:53"), LastBusy: at("01:27:38"),
		CfgTRES: "cpu=2,mem=20000M,billing=2,gres/gpu=4",
	}
}

func TestScontrolShowNodeGolden(t *testing.T) {
	idle := goldenNode()
	alloc := goldenNode()
	alloc.State, alloc.CPUsAlloc, alloc.AllocMemMB = NodeAllocated, 2, 2000
	alloc.LastBusy, alloc.AllocTRES = at("01:25:54"), "cpu=2,mem=2000M"
	n1 := goldenNode()
	load, free := 0.44, uint64(22690)
	n1.Name, n1.Addr, n1.Port, n1.CPULoad, n1.FreeMemMB = "n1", "127.0.0.1", 17001, &load, &free
	n1.RealMemoryMB, n1.AllocMemMB, n1.State, n1.CPUsAlloc = 5000, 2000, NodeAllocated, 2
	n1.SlurmdStart, n1.LastBusy = at("01:57:17"), at("01:57:17")
	n1.CfgTRES, n1.AllocTRES = "cpu=2,mem=5000M,billing=2,gres/gpu=4", "cpu=2,mem=2000M"
	tests := []struct {
		file     string
		node     Node
		oneLiner bool
	}{
		{"scontrol-show-node.txt", idle, false},
		{"scontrol-o-show-node.txt", idle, true},
		{"scontrol-show-node-alloc.txt", alloc, false},
		{"multinode/scontrol-show-node-n1.txt", n1, false},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			g := readGolden(t, tc.file)
			assertGolden(t, tc.file, g.stdout, ShowNodes([]Node{tc.node}, tc.oneLiner))
		})
	}
}

func goldenPartition() Partition {
	return Partition{Name: "debug", Default: true, State: PartitionUp, Nodes: "localhost", MaxTime: Unlimited,
		TotalCPUs: 2, TotalNodes: 1, TRES: "cpu=2,mem=20000M,node=1,billing=2,gres/gpu=4"}
}

func TestScontrolShowPartitionGolden(t *testing.T) {
	g := readGolden(t, "scontrol-show-partition.txt")
	assertGolden(t, "scontrol-show-partition.txt", g.stdout, ShowPartitions([]Partition{goldenPartition()}, false))
}

func TestShowHostnames(t *testing.T) {
	out, err := ShowHostnames("n[1-2],gpu01")
	if err != nil || out != "n1\nn2\ngpu01\n" {
		t.Errorf("ShowHostnames = %q, %v", out, err)
	}
	_, err = ShowHostnames("n[5-1]")
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 0 ||
		strings.Join(ce.Stderr, "\n") != "scontrol: error: _parse_single_range: Invalid range: `5-1'\nInvalid hostlist: n[5-1]" {
		t.Errorf("invalid: %#v", err)
	}
	if _, err := ShowHostnames(""); err == nil {
		t.Error("empty list accepted")
	}
}

func TestNodeStates(t *testing.T) {
	tests := []struct {
		s                       NodeState
		long, compact, complete string
	}{
		{NodeIdle, "IDLE", "IDLE", "IDLE"},
		{NodeAllocated, "ALLOCATED", "ALLOC", "ALLOCATED"},
		{NodeMixed, "MIXED", "MIX", "MIXED"},
		{NodeIdle | NodeDrain, "DRAINED", "DRAIN", "IDLE+DRAIN"},
		{NodeAllocated | NodeDrain, "DRAINING", "DRNG", "ALLOCATED+DRAIN"},
		{NodeDown | NodeNoRespond, "DOWN*", "DOWN*", "DOWN+NOT_RESPONDING"},
		{NodeIdle | NodeCompleting, "COMPLETING", "COMP", "IDLE+COMPLETING"},
		{NodeIdle | NodeMaint, "MAINT", "MAINT", "IDLE+MAINTENANCE"},
		{NodeIdle | NodePoweredDown, "IDLE~", "IDLE~", "IDLE+POWERED_DOWN"},
		{NodeAllocated | NodeCompleting, "ALLOCATED+", "ALLOC+", "ALLOCATED+COMPLETING"},
		{NodeIdle | NodeReserved, "RESERVED", "RESV", "IDLE+RESERVED"},
		{NodeIdle | NodeRebootRequested, "REBOOT", "BOOT", "IDLE+REBOOT_REQUESTED"},
		{NodeUnknown, "UNKNOWN", "UNK", "UNKNOWN"},
	}
	for _, tc := range tests {
		if got := tc.s.String(); got != tc.long {
			t.Errorf("%v String = %q, want %q", uint32(tc.s), got, tc.long)
		}
		if got := tc.s.Compact(); got != tc.compact {
			t.Errorf("%v Compact = %q, want %q", uint32(tc.s), got, tc.compact)
		}
		if got := tc.s.Complete(); got != tc.complete {
			t.Errorf("%v Complete = %q, want %q", uint32(tc.s), got, tc.complete)
		}
	}
}
