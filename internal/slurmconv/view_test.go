package slurmconv

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
	"github.com/berth-hq/berth/internal/spec"
)

// The squeue outputs of the golden scenario, byte for byte, from the runs
// a Berth server lists for the same jobs.
func TestSqueueFromRuns(t *testing.T) {
	runs, prio := convtest.QueueAt0118()
	v := NewView(runs, convtest.GoldenNodes(), convtest.At("01:26:18"))
	v.Prio = prio
	for _, tc := range []struct {
		file string
		opts slurm.SqueueOptions
	}{
		{"squeue.txt", slurm.SqueueOptions{}},
		{"squeue-l.txt", slurm.SqueueOptions{Long: true}},
		{"squeue-o-i-t-r.txt", slurm.SqueueOptions{Format: "%i %t %r"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, want := convtest.ReadGolden(t, tc.file)
			o := tc.opts
			o.Now = v.Now
			got, _, err := slurm.FormatSqueue(slurm.FilterJobs(v.Jobs(), slurm.JobFilter{}), o)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
				t.Errorf("%s differs from Slurm's (-want +got):\n%s", tc.file, d)
			}
		})
	}
}

// Throttled array tasks that exist but wait are shown waiting for the
// throttle, so squeue folds them with the tasks not created yet under one
// reason, as Slurm does.
func TestSqueueFoldsThrottledTasks(t *testing.T) {
	runs := []api.Run{
		convtest.ARun(4, "wrap").Pending("Priority").With(func(r *api.Run) {
			r.Array = &api.ArrayInfo{Indices: "1-6", Count: 6, Throttle: 2, Waiting: "4-6", NWaiting: 3}
		}).Build(),
		convtest.ARun(5, "wrap").Task(4, 1).Running("01:26:09").Build(),
		convtest.ARun(6, "wrap").Task(4, 2).Running("01:26:09").Build(),
		convtest.ARun(8, "wrap").Task(4, 3).Pending("Priority").Build(),
	}
	v := NewView(runs, convtest.GoldenNodes(), convtest.At("01:26:18"))
	got, _, err := slurm.FormatSqueue(v.Jobs(), slurm.SqueueOptions{Format: "%i %t %r", NoHeader: true, Now: v.Now})
	if err != nil {
		t.Fatal(err)
	}
	want := "4_[3-6%2] PD JobArrayTaskLimit\n4_1 R None\n4_2 R None\n"
	if got != want {
		t.Errorf("squeue -h -o '%%i %%t %%r':\n%s\nwant:\n%s", got, want)
	}
}

// sacct -P of a failed and a timed-out job, byte for byte: the job line
// and its batch step, as sacct lists them.
func TestSacctFromRuns(t *testing.T) {
	limit := spec.Duration(60)
	runs := []api.Run{
		convtest.ARun(3, "timeout").Ended(api.StatusTerminated, api.ReasonMaxDuration, 143, "01:24:32", "01:25:54").With(func(r *api.Run) {
			r.Spec.MaxDuration = &limit
		}).Build(),
		convtest.ARun(4, "fail3").Ended(api.StatusFailed, api.ReasonExitedWithError, 3, "01:24:32", "01:24:32").Build(),
	}
	v := NewView(runs, convtest.GoldenNodes(), convtest.At("01:30:00"))
	for _, tc := range []struct {
		file string
		id   uint32
	}{{"sacct-j-parsable2.txt", 4}, {"sacct-j-parsable2-timeout.txt", 3}} {
		_, want := convtest.ReadGolden(t, tc.file)
		recs := slurm.FilterAcct(v.Acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{{JobID: tc.id, Task: slurm.NoArrayTask}}, Now: v.Now})
		got, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, Format: "JobID,State,ExitCode,NodeList"})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.file, got, want)
		}
	}
}

// goldenColumns is the lines of a --parsable2 capture for the given jobs,
// cut to the named columns.
func goldenColumns(t *testing.T, file string, cols []string, jobs ...string) string {
	t.Helper()
	_, out := convtest.ReadGolden(t, file)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	idx := map[string]int{}
	for i, h := range strings.Split(lines[0], "|") {
		idx[h] = i
	}
	keep := map[string]bool{}
	for _, j := range jobs {
		keep[j] = true
	}
	var b strings.Builder
	for _, l := range lines[1:] {
		f := strings.Split(l, "|")
		if !keep[f[0]] {
			continue
		}
		for i, c := range cols {
			if i > 0 {
				b.WriteByte('|')
			}
			b.WriteString(f[idx[c]])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ReqMem and the mem= of ReqTRES/AllocTRES are the job's memory in
// Slurm's units: --mem=1000M is 1000M (it was printed as 1000T), 2G is 2G.
func TestSacctMemory(t *testing.T) {
	gpu := func(r *api.Run) {
		mem := spec.Bytes(2) * spec.GB
		r.Spec.Resources.Memory = &spec.ByteRange{Min: mem, Max: &mem}
		r.Spec.Resources.GPU = &spec.GPUSpec{Count: spec.IntRange{Min: 2}}
		r.Jobs[0].Alloc.Memory = 2 << 30
		r.Jobs[0].Alloc.GPUs = make([]int, 2)
	}
	runs := []api.Run{
		convtest.ARun(4, "fail3").Ended(api.StatusFailed, api.ReasonExitedWithError, 3, "01:24:32", "01:24:32").Build(),
		convtest.ARun(8, "envgpu").Ended(api.StatusDone, "", 0, "01:24:44", "01:24:44").With(gpu).Build(),
	}
	v := NewView(runs, convtest.GoldenNodes(), convtest.At("01:30:00"))
	cols := []string{"JobID", "State", "AllocCPUS", "ReqMem", "AllocTRES", "NodeList"}
	want := goldenColumns(t, "sacct-X-all-states.txt", cols, "4", "8")
	recs := slurm.FilterAcct(v.Acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{
		{JobID: 4, Task: slurm.NoArrayTask}, {JobID: 8, Task: slurm.NoArrayTask}}, Now: v.Now})
	got, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, NoHeader: true, NoSteps: true, Format: strings.Join(cols, ",")})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sacct -X -P (-want +got):\n%s", d)
	}
	// Steps: no billing (sacct-long-fmt.txt: "4.batch ... cpu=1,mem=1000M,node=1").
	var steps []string
	for _, r := range v.Acct() {
		if r.Step != "" {
			steps = append(steps, r.AllocTRES)
		}
	}
	if d := cmp.Diff([]string{"cpu=1,mem=1000M,node=1", "cpu=1,gres/gpu=2,mem=2G,node=1"}, steps); d != "" {
		t.Errorf("the batch steps' AllocTRES (-want +got):\n%s", d)
	}
}

// sacct prints the base state slurmdbd records (as_mysql_job.c keeps
// job_state & JOB_STATE_BASE): a job whose node is still being set up, or
// whose processes are being stopped, is RUNNING there, never CONFIGURING or
// COMPLETING, which a tool polling sacct would take for a final state.
func TestSacctPrintsBaseStates(t *testing.T) {
	runs := []api.Run{
		convtest.ARun(13, "wrap").Running("01:26:09").With(func(r *api.Run) { r.Status = api.StatusProvisioning }).Build(),
		convtest.ARun(14, "wrap").Running("01:26:09").With(func(r *api.Run) { r.Status = api.StatusPulling }).Build(),
		convtest.ARun(15, "wrap").Running("01:26:09").With(func(r *api.Run) { r.Status = api.StatusTerminating }).Build(),
	}
	v := NewView(runs, convtest.GoldenNodes(), convtest.At("01:26:18"))
	recs := slurm.FilterAcct(v.Acct(), slurm.AcctFilter{Now: v.Now})
	got, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, Format: "JobID,State,ExitCode"})
	if err != nil {
		t.Fatal(err)
	}
	want := "JobID|State|ExitCode\n13|RUNNING|0:0\n13.batch|RUNNING|0:0\n14|RUNNING|0:0\n14.batch|RUNNING|0:0\n15|RUNNING|0:0\n15.batch|RUNNING|0:0\n"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sacct -P -o JobID,State,ExitCode (-want +got):\n%s", d)
	}
	st := slurm.FilterAcct(v.Acct(), slurm.AcctFilter{States: []slurm.JobState{slurm.JobRunning}, Now: v.Now})
	if len(st) != 6 {
		t.Errorf("sacct -s R kept %d records, want the 3 jobs and their steps", len(st))
	}
}

func TestSlurmState(t *testing.T) {
	code := func(n int) *int { return &n }
	started := convtest.At("01:00:00")
	tests := map[string]struct {
		run              api.Run
		state, exit, why string
	}{
		"waiting":           {api.Run{Status: api.StatusSubmitted, Reason: "Resources"}, "PENDING", "0:0", "Resources"},
		"held":              {api.Run{Status: api.StatusSubmitted, Reason: "JobHeldUser"}, "PENDING", "0:0", "JobHeldUser"},
		"provisioning":      {api.Run{Status: api.StatusProvisioning}, "CONFIGURING", "0:0", "None"},
		"running":           {api.Run{Status: api.StatusRunning}, "RUNNING", "0:0", "None"},
		"terminating":       {api.Run{Status: api.StatusTerminating}, "COMPLETING", "0:0", "None"},
		"done":              {api.Run{Status: api.StatusDone, ExitCode: code(0)}, "COMPLETED", "0:0", "None"},
		"failed":            {api.Run{Status: api.StatusFailed, Reason: "exited_with_error", ExitCode: code(3)}, "FAILED", "3:0", "NonZeroExitCode"},
		"killed by signal":  {api.Run{Status: api.StatusFailed, Reason: "exited_with_error", ExitCode: code(137)}, "FAILED", "0:9", "NonZeroExitCode"},
		"oom":               {api.Run{Status: api.StatusFailed, Reason: "OOM", ExitCode: code(137)}, "OUT_OF_MEMORY", "0:125", "OutOfMemory"},
		"node lost":         {api.Run{Status: api.StatusFailed, Reason: "instance_unreachable"}, "NODE_FAIL", "1:0", "NodeDown"},
		"failed to start":   {api.Run{Status: api.StatusFailed, Reason: "failed_to_start", ExitCode: code(127)}, "FAILED", "127:0", "JobLaunchFailure"},
		"cancelled running": {api.Run{Status: api.StatusTerminated, Reason: "terminated_by_user", StartedAt: &started, ExitCode: code(143)}, "CANCELLED", "0:15", "None"},
		"cancelled waiting": {api.Run{Status: api.StatusTerminated, Reason: "terminated_by_user"}, "CANCELLED", "0:0", "None"},
		"aborted":           {api.Run{Status: api.StatusAborted, Reason: "aborted_by_user", StartedAt: &started}, "CANCELLED", "0:9", "None"},
		"timeout":           {api.Run{Status: api.StatusTerminated, Reason: "max_duration_exceeded", StartedAt: &started}, "TIMEOUT", "0:15", "TimeLimit"},
		"preempted":         {api.Run{Status: api.StatusTerminated, Reason: "preempted", StartedAt: &started}, "PREEMPTED", "0:15", "Preempted"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st, why := JobState(tc.run.Status, lifecycle.Reason(tc.run.Reason))
			c, s := ExitCode(&tc.run, st)
			got := []string{st.String(), strconv.Itoa(c) + ":" + strconv.Itoa(s), why}
			if d := cmp.Diff([]string{tc.state, tc.exit, tc.why}, got); d != "" {
				t.Errorf("state, exit code, reason (-want +got):\n%s", d)
			}
		})
	}
}

// A job that waits on another shows Slurm's dependency string, with the
// state of each condition.
func TestDependencyShown(t *testing.T) {
	runs := []api.Run{
		convtest.ARun(13, "wrap").Running("01:26:09").Build(),
		convtest.ARun(4, "fail3").Ended(api.StatusFailed, "exited_with_error", 3, "01:24:32", "01:24:32").Build(),
		convtest.ARun(15, "dep").Pending("Dependency").With(func(r *api.Run) {
			r.Spec.DependsOn = []spec.Dependency{{Type: "afterok", Runs: []string{"13"}, IDs: []int64{13}}}
		}).Build(),
		convtest.ARun(16, "depnever").Pending("DependencyNeverSatisfied").With(func(r *api.Run) {
			r.Spec.DependsOn = []spec.Dependency{{Type: "afterok", Runs: []string{"4"}, IDs: []int64{4}}}
		}).Build(),
	}
	v := NewView(runs, convtest.GoldenNodes(), convtest.At("01:26:18"))
	got := map[uint32]string{}
	for _, j := range v.Jobs() {
		got[j.JobID] = j.Dependency.String()
	}
	want := map[uint32]string{4: "(null)", 13: "(null)", 15: "afterok:13(unfulfilled)", 16: "afterok:4(failed)"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("dependencies (-want +got):\n%s", d)
	}
}

// sinfo of the golden node, from the node a Berth server lists: the
// default partition holds every node, and a fleet is a partition.
func TestSinfoFromNodes(t *testing.T) {
	nodes := []api.Node{
		{NodeInfo: api.NodeInfo{Name: "n1", Fleet: "gpu", CPUs: 2, Memory: 20000 << 20, GPUs: make([]api.GPU, 4)}, Status: "busy", AllocCPUs: 2},
		{NodeInfo: api.NodeInfo{Name: "n2", CPUs: 2, Memory: 20000 << 20}, Status: "idle"},
		{NodeInfo: api.NodeInfo{Name: "n3", CPUs: 2, Memory: 20000 << 20}, Status: "offline"},
	}
	parts, sn := Nodes(nodes, convtest.At("01:00:00"), nil)
	got, _ := slurm.FormatSinfo(parts, sn, slurm.SinfoOptions{})
	want := `PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
berth*       up   infinite      1  down* n3
berth*       up   infinite      1  alloc n1
berth*       up   infinite      1   idle n2
gpu          up   infinite      1  alloc n1
`
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("sinfo (-want +got):\n%s", d)
	}
}

// A job submitted with -p batch, where batch is a partition name the
// policy file gives the fleet cpu, stays in batch once it runs on cpu's
// node (it showed the fleet's name, so squeue -p batch and sacct -r batch
// lost it), and sinfo -p batch lists cpu's nodes.
func TestPartitionNamesSurvive(t *testing.T) {
	inBatch := func(r *api.Run) { r.Spec.Fleets = []string{"batch"} }
	runs := []api.Run{
		convtest.ARun(20, "wrap").Running("01:26:09").With(inBatch).Build(),
		convtest.ARun(21, "wrap").Pending("Resources").With(inBatch).Build(),
		convtest.ARun(22, "wrap").Running("01:26:09").With(func(r *api.Run) { r.Spec.Fleets = nil }).Build(),
	}
	nodes := []api.Node{{NodeInfo: api.NodeInfo{Name: "localhost", Fleet: "cpu", CPUs: 2, Memory: 20000 << 20}, Status: "busy", Jobs: 2, AllocCPUs: 2}}
	v := NewView(runs, nodes, convtest.At("01:26:18"))
	v.Policy = &api.PolicyInfo{Fleets: []api.FleetInfo{{Name: "cpu", Partitions: []string{"batch"}}}}
	got, _, err := slurm.FormatSqueue(slurm.FilterJobs(v.Jobs(), slurm.JobFilter{Partitions: []string{"batch"}}),
		slurm.SqueueOptions{Format: "%i %P %t", NoHeader: true, Now: v.Now})
	if err != nil {
		t.Fatal(err)
	}
	if want := "21 batch PD\n20 batch R\n"; got != want {
		t.Errorf("squeue -h -p batch -o '%%i %%P %%t':\n%s\nwant:\n%s", got, want)
	}
	var acct []string
	for _, r := range v.Acct() {
		if r.Step == "" && r.Partition == "batch" {
			acct = append(acct, strconv.Itoa(int(r.JobID)))
		}
	}
	if d := cmp.Diff([]string{"20", "21"}, acct); d != "" {
		t.Errorf("sacct -r batch (-want +got):\n%s", d)
	}
	parts, sn := Nodes(nodes, v.Now, v.Policy)
	var keep []slurm.Partition
	for _, p := range parts {
		if p.Name == "batch" {
			keep = append(keep, p)
		}
	}
	out, _ := slurm.FormatSinfo(keep, sn, slurm.SinfoOptions{NoHeader: true})
	if want := "batch        up   infinite      1  alloc localhost\n"; out != want {
		t.Errorf("sinfo -h -p batch:\n%q\nwant:\n%q", out, want)
	}
}

// A job requeued from n1 (preempted, scontrol requeue, node failure) and
// running again on n2 is a 1-node job on n2: NODES, TRES and NodeList of
// the current attempt only (it showed NODES 2, doubled TRES and n1), its
// start the current attempt's; sacct -D lists the earlier attempt as Slurm
// keeps it, REQUEUED with its batch step ended by the signal.
func TestRequeuedJobShowsCurrentAttempt(t *testing.T) {
	attempt := func(a int, node, start, end string, st api.Status) api.Job {
		j := api.Job{Num: 0, Attempt: a, Node: node, Status: st, Alloc: api.Alloc{CPUs: 1, Memory: 1000 << 20}, StartedAt: convtest.AtPtr(start)}
		if end != "" {
			j.FinishedAt = convtest.AtPtr(end)
		}
		return j
	}
	running := convtest.ARun(30, "wrap").Running("01:10:00").With(func(r *api.Run) {
		r.Nodes = []string{"n1", "n2"}
		r.Jobs = []api.Job{attempt(0, "n1", "01:10:00", "01:15:00", api.StatusTerminated), attempt(1, "n2", "01:20:00", "", api.StatusRunning)}
	}).Build()
	waiting := convtest.ARun(31, "wrap").Pending("BeginTime").With(func(r *api.Run) {
		r.StartedAt = convtest.AtPtr("01:10:00")
		r.Nodes = []string{"n1"}
		r.Jobs = []api.Job{attempt(0, "n1", "01:10:00", "01:15:00", api.StatusTerminated)}
	}).Build()
	v := NewView([]api.Run{running, waiting}, convtest.GoldenNodes(), convtest.At("01:26:18"))
	got, _, err := slurm.FormatSqueue(v.Jobs(), slurm.SqueueOptions{Format: "%i|%T|%D|%C|%N|%S", NoHeader: true, Now: v.Now})
	if err != nil {
		t.Fatal(err)
	}
	if want := "31|PENDING|1|1||N/A\n30|RUNNING|1|1|n2|2026-11-22T01:20:00\n"; got != want {
		t.Errorf("squeue -o '%%i|%%T|%%D|%%C|%%N|%%S':\n%s\nwant:\n%s", got, want)
	}
	format := "JobID,State,ExitCode,Start,End,NNodes,AllocTRES,NodeList"
	sacct := func(dup bool) string {
		v.Duplicates = dup
		recs := slurm.FilterAcct(v.Acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{{JobID: 30, Task: slurm.NoArrayTask}, {JobID: 31, Task: slurm.NoArrayTask}}, Now: v.Now})
		out, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, NoHeader: true, Format: format})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := `30|RUNNING|0:0|2026-11-22T01:20:00|Unknown|1|billing=1,cpu=1,mem=1000M,node=1|n2
30.batch|RUNNING|0:0|2026-11-22T01:20:00|Unknown|1|cpu=1,mem=1000M,node=1|n2
31|PENDING|0:0|Unknown|Unknown|1||None assigned
`
	if d := cmp.Diff(want, sacct(false)); d != "" {
		t.Errorf("sacct -j 30,31 (-want +got):\n%s", d)
	}
	want = `30|REQUEUED|0:0|2026-11-22T01:10:00|2026-11-22T01:15:00|1|billing=1,cpu=1,mem=1000M,node=1|n1
30.batch|CANCELLED|0:15|2026-11-22T01:10:00|2026-11-22T01:15:00|1|cpu=1,mem=1000M,node=1|n1
30|RUNNING|0:0|2026-11-22T01:20:00|Unknown|1|billing=1,cpu=1,mem=1000M,node=1|n2
30.batch|RUNNING|0:0|2026-11-22T01:20:00|Unknown|1|cpu=1,mem=1000M,node=1|n2
31|REQUEUED|0:0|2026-11-22T01:10:00|2026-11-22T01:15:00|1|billing=1,cpu=1,mem=1000M,node=1|n1
31.batch|CANCELLED|0:15|2026-11-22T01:10:00|2026-11-22T01:15:00|1|cpu=1,mem=1000M,node=1|n1
31|PENDING|0:0|Unknown|Unknown|1||None assigned
`
	if d := cmp.Diff(want, sacct(true)); d != "" {
		t.Errorf("sacct -D -j 30,31 (-want +got):\n%s", d)
	}
}

// An array's tasks not created yet are one sacct line, PENDING, named as
// slurmdbd names the array's own record (63_[2-3%1]) and listed after the
// tasks that exist; while as many tasks run as the throttle allows, that
// line and every waiting task wait for JobArrayTaskLimit alone, in sacct,
// squeue (folded, where reasons merge) and scontrol.
func TestWaitingArrayTasks(t *testing.T) {
	array := func(waiting string, n int) func(*api.Run) {
		return func(r *api.Run) {
			r.Spec.Array = "1-3%1"
			r.Array = &api.ArrayInfo{Indices: "1-3", Count: 3, Throttle: 1, Waiting: waiting, NWaiting: n}
		}
	}
	sacct := func(runs []api.Run) string {
		v := NewView(runs, convtest.GoldenNodes(), convtest.At("01:26:18"))
		recs := slurm.FilterAcct(v.Acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{{JobID: 63, Task: slurm.NoArrayTask}}, Now: v.Now})
		got, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, NoHeader: true, Format: "JobID,JobIDRaw,State,Reason"})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	fresh := []api.Run{convtest.ARun(63, "wrap").Pending("Priority").With(array("1-3", 3)).Build()}
	if got, want := sacct(fresh), "63_[1-3%1]|63|PENDING|Priority\n"; got != want {
		t.Errorf("sacct of an array none of whose tasks exist:\n%s\nwant:\n%s", got, want)
	}
	// The array's run is running (a task runs), task 2 exists and waits.
	busy := []api.Run{
		convtest.ARun(63, "wrap").Running("01:26:09").With(array("3", 1)).With(func(r *api.Run) { r.Jobs, r.Nodes = nil, nil }).Build(),
		convtest.ARun(64, "wrap").Task(63, 1).Running("01:26:09").Build(),
		convtest.ARun(65, "wrap").Task(63, 2).Pending("Priority").Build(),
	}
	want := "63_1|64|RUNNING|None\n63_1.batch|64.batch|RUNNING|\n63_2|65|PENDING|Priority\n63_[3%1]|63|PENDING|JobArrayTaskLimit\n"
	if got := sacct(busy); got != want {
		t.Errorf("sacct of a throttled array:\n%s\nwant:\n%s", got, want)
	}
	v := NewView(busy, convtest.GoldenNodes(), convtest.At("01:26:18"))
	got, _, err := slurm.FormatSqueue(v.Jobs(), slurm.SqueueOptions{Format: "%i %t %r", NoHeader: true, Now: v.Now})
	if err != nil {
		t.Fatal(err)
	}
	if want := "63_[2-3%1] PD JobArrayTaskLimit\n63_1 R None\n"; got != want {
		t.Errorf("squeue -h -o '%%i %%t %%r':\n%s\nwant:\n%s", got, want)
	}
	got, _, err = slurm.FormatSqueue(v.Jobs(), slurm.SqueueOptions{Format: "%i %t %r", NoHeader: true, Now: v.Now, Array: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "63_3 PD JobArrayTaskLimit\n63_2 PD JobArrayTaskLimit\n63_1 R None\n"; got != want {
		t.Errorf("squeue -r -h -o '%%i %%t %%r':\n%s\nwant:\n%s", got, want)
	}
}

// sacct's AllocTRES bills what the fleets' weights gave the run's jobs,
// once each job that ran has its usage; before, its CPUs (Slurm's default).
func TestSacctBilling(t *testing.T) {
	started := time.Unix(1_700_000_000, 0)
	r := &api.Run{Jobs: []api.Job{{StartedAt: &started, Usage: &api.JobUsage{Billing: 10.4}}, {StartedAt: &started, Usage: &api.JobUsage{Billing: 6}}, {}}}
	if b, ok := runBilling(r); !ok || b != 16 {
		t.Errorf("billing = %d %v, want 16", b, ok)
	}
	if got := billedTRES(2, 4, 2048, 2, 16); got != "billing=16,cpu=4,gres/gpu=2,mem=2G,node=2" {
		t.Errorf("AllocTRES = %q", got)
	}
	r.Jobs[1].Usage = nil // still running
	if _, ok := runBilling(r); ok {
		t.Error("a run with a job still running has its billing")
	}
}
