package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// readSlurmGolden reads a capture of real Slurm 22.05 from
// internal/slurm/testdata/golden: the command line and what it printed.
func readSlurmGolden(t *testing.T, name string) (cmd, stdout string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "slurm", "testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	if i := strings.Index(rest, "--- stderr ---\n"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "--- exit "); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimPrefix(first, "$ "), rest
}

// The golden scenario's day: times are printed in local time, so the
// fixtures are built in it.
func at(hms string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", "2026-11-22T"+hms, time.Local)
	if err != nil {
		panic(err)
	}
	return t
}

func atPtr(hms string) *time.Time { t := at(hms); return &t }

// runBuilder makes the runs a Berth server would list for the golden
// scenario's jobs: sbatch --wrap jobs of root in partition debug, one CPU
// and 1000M per CPU each.
type runBuilder struct{ r api.Run }

func aRun(id int64, name string) *runBuilder {
	one := 1
	mem := spec.Bytes(1000) * spec.MB
	return &runBuilder{api.Run{ID: id, Name: runNameFor(name), Project: "root", User: "admin", Status: api.StatusSubmitted,
		Reason: "Priority", SubmittedAt: at("01:26:07"),
		Spec: &spec.Task{Nodes: 1, Fleets: []string{"debug"}, WorkingDir: "/home/alice/jobs/demo",
			Resources: spec.Resources{CPU: &spec.CPUSpec{Count: spec.IntRange{Min: 1, Max: &one}}, Memory: &spec.ByteRange{Min: mem, Max: &mem}},
			Tags: map[string]string{tagJobName: name, tagUser: "root", tagGroup: "root", tagTool: "sbatch", tagMemPerCPU: "1000",
				tagStdout: "/dev/null", tagSubmitHost: "localhost"}}}}
}

func (b *runBuilder) pending(reason string) *runBuilder {
	b.r.Status, b.r.Reason = api.StatusSubmitted, reason
	return b
}

func (b *runBuilder) running(start string) *runBuilder {
	b.r.Status, b.r.Reason, b.r.StartedAt = api.StatusRunning, "", atPtr(start)
	b.r.Nodes = []string{"localhost"}
	b.r.Jobs = []api.Job{{Num: 0, Node: "localhost", Status: api.StatusRunning, Alloc: api.Alloc{CPUs: 1, Memory: 1000 << 20}}}
	return b
}

func (b *runBuilder) ended(status api.Status, reason string, code int, start, end string) *runBuilder {
	b.running(start)
	b.r.Status, b.r.Reason, b.r.ExitCode, b.r.FinishedAt = status, reason, &code, atPtr(end)
	b.r.Jobs[0].Status, b.r.Jobs[0].ExitCode = status, &code
	return b
}

func (b *runBuilder) task(array int64, index int) *runBuilder {
	b.r.ArrayID, b.r.ArrayIndex = array, &index
	b.r.Name = b.r.Name + "_" + strconv.Itoa(index)
	return b
}

func (b *runBuilder) with(f func(*api.Run)) *runBuilder { f(&b.r); return b }
func (b *runBuilder) build() api.Run                    { return b.r }

// queueAt0118 is the golden queue at 01:26:18 as Berth holds it: array 10
// with tasks 1 and 2 running and 3-5 not created yet, jobs 13 to 19
// waiting for their reasons.
func queueAt0118() ([]api.Run, map[int64]int64) {
	runs := []api.Run{
		aRun(10, "wrap").pending("JobArrayTaskLimit").with(func(r *api.Run) {
			r.Spec.Array = "1-5%2"
			r.Array = &api.ArrayInfo{Indices: "1-5", Count: 5, Throttle: 2, Waiting: "3-5", NWaiting: 3}
		}).build(),
		aRun(11, "wrap").task(10, 1).running("01:26:09").build(),
		aRun(12, "wrap").task(10, 2).running("01:26:09").build(),
		aRun(13, "wrap").pending("Resources").build(),
		aRun(14, "wrap").pending("Priority").build(),
		aRun(15, "dep").pending("Dependency").build(),
		aRun(16, "depnever").pending("DependencyNeverSatisfied").build(),
		aRun(17, "held").pending("JobHeldUser").build(),
		aRun(18, "later").pending("BeginTime").build(),
		aRun(19, "gpujob").pending("Priority").with(func(r *api.Run) {
			d := spec.Duration(600)
			r.Spec.MaxDuration = &d
		}).build(),
	}
	prio := map[int64]int64{10: 4294901751, 13: 4294901750, 14: 4294901749, 15: 4294901748, 16: 4294901747, 18: 4294901746, 19: 4294901745}
	return runs, prio
}

func goldenNodes() []api.Node {
	return []api.Node{{NodeInfo: api.NodeInfo{Name: "localhost", Fleet: "debug", CPUs: 2, Memory: 20000 << 20}, Status: "idle"}}
}

// The squeue outputs of the golden scenario, byte for byte, from the runs
// a Berth server lists for the same jobs.
func TestSqueueFromRuns(t *testing.T) {
	runs, prio := queueAt0118()
	v := newSlurmView(runs, goldenNodes(), at("01:26:18"))
	v.prio = prio
	for _, tc := range []struct {
		file string
		opts slurm.SqueueOptions
	}{
		{"squeue.txt", slurm.SqueueOptions{}},
		{"squeue-l.txt", slurm.SqueueOptions{Long: true}},
		{"squeue-o-i-t-r.txt", slurm.SqueueOptions{Format: "%i %t %r"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, want := readSlurmGolden(t, tc.file)
			o := tc.opts
			o.Now = v.now
			got, _, err := slurm.FormatSqueue(slurm.FilterJobs(v.jobs(), slurm.JobFilter{}), o)
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
		aRun(4, "wrap").pending("Priority").with(func(r *api.Run) {
			r.Array = &api.ArrayInfo{Indices: "1-6", Count: 6, Throttle: 2, Waiting: "4-6", NWaiting: 3}
		}).build(),
		aRun(5, "wrap").task(4, 1).running("01:26:09").build(),
		aRun(6, "wrap").task(4, 2).running("01:26:09").build(),
		aRun(8, "wrap").task(4, 3).pending("Priority").build(),
	}
	v := newSlurmView(runs, goldenNodes(), at("01:26:18"))
	got, _, err := slurm.FormatSqueue(v.jobs(), slurm.SqueueOptions{Format: "%i %t %r", NoHeader: true, Now: v.now})
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
		aRun(3, "timeout").ended(api.StatusTerminated, api.ReasonMaxDuration, 143, "01:24:32", "01:25:54").with(func(r *api.Run) {
			r.Spec.MaxDuration = &limit
		}).build(),
		aRun(4, "fail3").ended(api.StatusFailed, api.ReasonExitedWithError, 3, "01:24:32", "01:24:32").build(),
	}
	v := newSlurmView(runs, goldenNodes(), at("01:30:00"))
	for _, tc := range []struct {
		file string
		id   uint32
	}{{"sacct-j-parsable2.txt", 4}, {"sacct-j-parsable2-timeout.txt", 3}} {
		_, want := readSlurmGolden(t, tc.file)
		recs := slurm.FilterAcct(v.acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{{JobID: tc.id, Task: slurm.NoArrayTask}}, Now: v.now})
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
	_, out := readSlurmGolden(t, file)
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
		aRun(4, "fail3").ended(api.StatusFailed, api.ReasonExitedWithError, 3, "01:24:32", "01:24:32").build(),
		aRun(8, "envgpu").ended(api.StatusDone, "", 0, "01:24:44", "01:24:44").with(gpu).build(),
	}
	v := newSlurmView(runs, goldenNodes(), at("01:30:00"))
	cols := []string{"JobID", "State", "AllocCPUS", "ReqMem", "AllocTRES", "NodeList"}
	want := goldenColumns(t, "sacct-X-all-states.txt", cols, "4", "8")
	recs := slurm.FilterAcct(v.acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{
		{JobID: 4, Task: slurm.NoArrayTask}, {JobID: 8, Task: slurm.NoArrayTask}}, Now: v.now})
	got, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, NoHeader: true, NoSteps: true, Format: strings.Join(cols, ",")})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sacct -X -P (-want +got):\n%s", d)
	}
	// Steps: no billing (sacct-long-fmt.txt: "4.batch ... cpu=1,mem=1000M,node=1").
	var steps []string
	for _, r := range v.acct() {
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
		aRun(13, "wrap").running("01:26:09").with(func(r *api.Run) { r.Status = api.StatusProvisioning }).build(),
		aRun(14, "wrap").running("01:26:09").with(func(r *api.Run) { r.Status = api.StatusPulling }).build(),
		aRun(15, "wrap").running("01:26:09").with(func(r *api.Run) { r.Status = api.StatusTerminating }).build(),
	}
	v := newSlurmView(runs, goldenNodes(), at("01:26:18"))
	recs := slurm.FilterAcct(v.acct(), slurm.AcctFilter{Now: v.now})
	got, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, Format: "JobID,State,ExitCode"})
	if err != nil {
		t.Fatal(err)
	}
	want := "JobID|State|ExitCode\n13|RUNNING|0:0\n13.batch|RUNNING|0:0\n14|RUNNING|0:0\n14.batch|RUNNING|0:0\n15|RUNNING|0:0\n15.batch|RUNNING|0:0\n"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sacct -P -o JobID,State,ExitCode (-want +got):\n%s", d)
	}
	st := slurm.FilterAcct(v.acct(), slurm.AcctFilter{States: []slurm.JobState{slurm.JobRunning}, Now: v.now})
	if len(st) != 6 {
		t.Errorf("sacct -s R kept %d records, want the 3 jobs and their steps", len(st))
	}
}

func TestSlurmState(t *testing.T) {
	code := func(n int) *int { return &n }
	started := at("01:00:00")
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
			st := slurmState(&tc.run)
			c, s := exitCode(&tc.run, st)
			got := []string{st.String(), strconv.Itoa(c) + ":" + strconv.Itoa(s), slurmReason(&tc.run, st)}
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
		aRun(13, "wrap").running("01:26:09").build(),
		aRun(4, "fail3").ended(api.StatusFailed, "exited_with_error", 3, "01:24:32", "01:24:32").build(),
		aRun(15, "dep").pending("Dependency").with(func(r *api.Run) {
			r.Spec.DependsOn = []spec.Dependency{{Type: "afterok", Runs: []string{"13"}, IDs: []int64{13}}}
		}).build(),
		aRun(16, "depnever").pending("DependencyNeverSatisfied").with(func(r *api.Run) {
			r.Spec.DependsOn = []spec.Dependency{{Type: "afterok", Runs: []string{"4"}, IDs: []int64{4}}}
		}).build(),
	}
	v := newSlurmView(runs, goldenNodes(), at("01:26:18"))
	got := map[uint32]string{}
	for _, j := range v.jobs() {
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
	parts, sn := slurmNodes(nodes, at("01:00:00"), nil)
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

// Drained, draining, down and unhealthy nodes as sinfo shows them (they
// showed idle), sorted as sinfo sorts (by state, highest first), and
// sinfo -R's rows: the nodes down, drained or failing,
// each once whatever its partitions, with the reason, who gave it and
// when.
func TestSinfoNodeStates(t *testing.T) {
	since := at("01:00:00")
	nodes := []api.Node{
		{NodeInfo: api.NodeInfo{Name: "n1", CPUs: 2, Memory: 20000 << 20}, Status: "drained (bad DIMM)",
			Drain: &api.NodeDrain{Reason: "bad DIMM", By: "alice", Since: since}},
		{NodeInfo: api.NodeInfo{Name: "n2", Fleet: "gpu", CPUs: 2, Memory: 20000 << 20}, Status: "draining (reboot)", Jobs: 1, AllocCPUs: 1,
			Drain: &api.NodeDrain{Reason: "reboot", By: "root", Since: since}},
		{NodeInfo: api.NodeInfo{Name: "n3", CPUs: 2, Memory: 20000 << 20}, Status: "down (psu)",
			Drain: &api.NodeDrain{Reason: "psu", By: "root", Since: since, Down: true}},
		{NodeInfo: api.NodeInfo{Name: "n4", CPUs: 2, Memory: 20000 << 20}, Status: "idle (failure)",
			Health: &api.NodeHealth{Status: api.HealthFailure, Reason: "ECC errors", CheckedAt: since}},
		{NodeInfo: api.NodeInfo{Name: "n5", CPUs: 2, Memory: 20000 << 20}, Status: "offline", LastSeen: since},
		{NodeInfo: api.NodeInfo{Name: "n6", Fleet: "gpu", CPUs: 2, Memory: 20000 << 20}, Status: "busy", Jobs: 1, AllocCPUs: 1},
		{NodeInfo: api.NodeInfo{Name: "n7", CPUs: 2, Memory: 20000 << 20}, Status: "busy", Jobs: 1, AllocCPUs: 2},
		{NodeInfo: api.NodeInfo{Name: "n8", CPUs: 2, Memory: 20000 << 20}, Status: "idle (warning)",
			Health: &api.NodeHealth{Status: api.HealthWarning, Reason: "hot", CheckedAt: since}},
	}
	pol := &api.PolicyInfo{DownPartitions: []string{"gpu"}}
	parts, sn := slurmNodes(nodes, at("01:00:00"), pol)
	got, _ := slurm.FormatSinfo(parts, sn, slurm.SinfoOptions{})
	want := `PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
berth*       up   infinite      1  down* n5
berth*       up   infinite      1   drng n2
berth*       up   infinite      2  drain n[1,4]
berth*       up   infinite      1    mix n6
berth*       up   infinite      1  alloc n7
berth*       up   infinite      1   idle n8
berth*       up   infinite      1   down n3
gpu        down   infinite      1   drng n2
gpu        down   infinite      1    mix n6
`
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("sinfo (-want +got):\n%s", d)
	}
	reasons := filterNodes(sn, nil, []string{"down", "fail", "drain"}, false, false)
	got, _ = slurm.FormatSinfo(reasonPartition(parts, reasons), reasons,
		slurm.SinfoOptions{LongFormat: "reason:20 ,user:9 ,timestamp:19 ,nodelist:0"})
	want = `REASON               USER      TIMESTAMP           NODELIST
Not responding       berth     2026-11-22T01:00:00 n5
reboot               root      2026-11-22T01:00:00 n2
bad DIMM             alice     2026-11-22T01:00:00 n1
ECC errors           berth     2026-11-22T01:00:00 n4
psu                  root      2026-11-22T01:00:00 n3
`
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("sinfo -R (-want +got):\n%s", d)
	}
	show := slurm.ShowNodes(sn[:1], true)
	for _, w := range []string{" State=IDLE+DRAIN ", " Reason=bad DIMM [alice@2026-11-22T01:00:00]"} {
		if !strings.Contains(show, w) {
			t.Errorf("scontrol -o show node n1 lacks %q:\n%s", w, show)
		}
	}
}

// A job submitted with -p batch, where batch is a partition name the
// policy file gives the fleet cpu, stays in batch once it runs on cpu's
// node (it showed the fleet's name, so squeue -p batch and sacct -r batch
// lost it), and sinfo -p batch lists cpu's nodes.
func TestPartitionNamesSurvive(t *testing.T) {
	inBatch := func(r *api.Run) { r.Spec.Fleets = []string{"batch"} }
	runs := []api.Run{
		aRun(20, "wrap").running("01:26:09").with(inBatch).build(),
		aRun(21, "wrap").pending("Resources").with(inBatch).build(),
		aRun(22, "wrap").running("01:26:09").with(func(r *api.Run) { r.Spec.Fleets = nil }).build(),
	}
	nodes := []api.Node{{NodeInfo: api.NodeInfo{Name: "localhost", Fleet: "cpu", CPUs: 2, Memory: 20000 << 20}, Status: "busy", Jobs: 2, AllocCPUs: 2}}
	v := newSlurmView(runs, nodes, at("01:26:18"))
	v.policy = &api.PolicyInfo{Fleets: []api.FleetInfo{{Name: "cpu", Partitions: []string{"batch"}}}}
	got, _, err := slurm.FormatSqueue(slurm.FilterJobs(v.jobs(), slurm.JobFilter{Partitions: []string{"batch"}}),
		slurm.SqueueOptions{Format: "%i %P %t", NoHeader: true, Now: v.now})
	if err != nil {
		t.Fatal(err)
	}
	if want := "21 batch PD\n20 batch R\n"; got != want {
		t.Errorf("squeue -h -p batch -o '%%i %%P %%t':\n%s\nwant:\n%s", got, want)
	}
	var acct []string
	for _, r := range v.acct() {
		if r.Step == "" && r.Partition == "batch" {
			acct = append(acct, strconv.Itoa(int(r.JobID)))
		}
	}
	if d := cmp.Diff([]string{"20", "21"}, acct); d != "" {
		t.Errorf("sacct -r batch (-want +got):\n%s", d)
	}
	parts, sn := slurmNodes(nodes, v.now, v.policy)
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
		j := api.Job{Num: 0, Attempt: a, Node: node, Status: st, Alloc: api.Alloc{CPUs: 1, Memory: 1000 << 20}, StartedAt: atPtr(start)}
		if end != "" {
			j.FinishedAt = atPtr(end)
		}
		return j
	}
	running := aRun(30, "wrap").running("01:10:00").with(func(r *api.Run) {
		r.Nodes = []string{"n1", "n2"}
		r.Jobs = []api.Job{attempt(0, "n1", "01:10:00", "01:15:00", api.StatusTerminated), attempt(1, "n2", "01:20:00", "", api.StatusRunning)}
	}).build()
	waiting := aRun(31, "wrap").pending("BeginTime").with(func(r *api.Run) {
		r.StartedAt = atPtr("01:10:00")
		r.Nodes = []string{"n1"}
		r.Jobs = []api.Job{attempt(0, "n1", "01:10:00", "01:15:00", api.StatusTerminated)}
	}).build()
	v := newSlurmView([]api.Run{running, waiting}, goldenNodes(), at("01:26:18"))
	got, _, err := slurm.FormatSqueue(v.jobs(), slurm.SqueueOptions{Format: "%i|%T|%D|%C|%N|%S", NoHeader: true, Now: v.now})
	if err != nil {
		t.Fatal(err)
	}
	if want := "31|PENDING|1|1||N/A\n30|RUNNING|1|1|n2|2026-11-22T01:20:00\n"; got != want {
		t.Errorf("squeue -o '%%i|%%T|%%D|%%C|%%N|%%S':\n%s\nwant:\n%s", got, want)
	}
	format := "JobID,State,ExitCode,Start,End,NNodes,AllocTRES,NodeList"
	sacct := func(dup bool) string {
		v.duplicates = dup
		recs := slurm.FilterAcct(v.acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{{JobID: 30, Task: slurm.NoArrayTask}, {JobID: 31, Task: slurm.NoArrayTask}}, Now: v.now})
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
		v := newSlurmView(runs, goldenNodes(), at("01:26:18"))
		recs := slurm.FilterAcct(v.acct(), slurm.AcctFilter{Jobs: []slurm.JobSelector{{JobID: 63, Task: slurm.NoArrayTask}}, Now: v.now})
		got, err := slurm.FormatSacct(recs, slurm.SacctOptions{Parsable2: true, NoHeader: true, Format: "JobID,JobIDRaw,State,Reason"})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	fresh := []api.Run{aRun(63, "wrap").pending("Priority").with(array("1-3", 3)).build()}
	if got, want := sacct(fresh), "63_[1-3%1]|63|PENDING|Priority\n"; got != want {
		t.Errorf("sacct of an array none of whose tasks exist:\n%s\nwant:\n%s", got, want)
	}
	// The array's run is running (a task runs), task 2 exists and waits.
	busy := []api.Run{
		aRun(63, "wrap").running("01:26:09").with(array("3", 1)).with(func(r *api.Run) { r.Jobs, r.Nodes = nil, nil }).build(),
		aRun(64, "wrap").task(63, 1).running("01:26:09").build(),
		aRun(65, "wrap").task(63, 2).pending("Priority").build(),
	}
	want := "63_1|64|RUNNING|None\n63_1.batch|64.batch|RUNNING|\n63_2|65|PENDING|Priority\n63_[3%1]|63|PENDING|JobArrayTaskLimit\n"
	if got := sacct(busy); got != want {
		t.Errorf("sacct of a throttled array:\n%s\nwant:\n%s", got, want)
	}
	v := newSlurmView(busy, goldenNodes(), at("01:26:18"))
	got, _, err := slurm.FormatSqueue(v.jobs(), slurm.SqueueOptions{Format: "%i %t %r", NoHeader: true, Now: v.now})
	if err != nil {
		t.Fatal(err)
	}
	if want := "63_[2-3%1] PD JobArrayTaskLimit\n63_1 R None\n"; got != want {
		t.Errorf("squeue -h -o '%%i %%t %%r':\n%s\nwant:\n%s", got, want)
	}
	got, _, err = slurm.FormatSqueue(v.jobs(), slurm.SqueueOptions{Format: "%i %t %r", NoHeader: true, Now: v.now, Array: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "63_3 PD JobArrayTaskLimit\n63_2 PD JobArrayTaskLimit\n63_1 R None\n"; got != want {
		t.Errorf("squeue -r -h -o '%%i %%t %%r':\n%s\nwant:\n%s", got, want)
	}
}

// squeue --start lists pending jobs only (squeue/opts.c sets -t PD when no
// state is given), byte for byte as Slurm printed the golden queue, which
// had array tasks 10_1 and 10_2 running.
func TestSqueueStartListsPendingJobs(t *testing.T) {
	runs, prio := queueAt0118()
	for i := range runs {
		if runs[i].ID == 18 {
			runs[i].EstimatedStart = atPtr("02:26:09")
		}
	}
	v := newSlurmView(runs, goldenNodes(), at("01:26:18"))
	v.prio = prio
	o := slurm.SqueueOptions{Start: true, Now: v.now}
	got, _, err := slurm.FormatSqueue(slurm.FilterJobs(v.jobs(), startStates(o, slurm.JobFilter{}, false)), o)
	if err != nil {
		t.Fatal(err)
	}
	_, want := readSlurmGolden(t, "squeue-start.txt")
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("squeue --start differs from Slurm's (-want +got):\n%s", d)
	}
	o.Array = true
	if got, _, _ := slurm.FormatSqueue(slurm.FilterJobs(v.jobs(), startStates(o, slurm.JobFilter{States: []slurm.JobState{slurm.JobRunning}}, false)), o); !strings.Contains(got, "10_1") {
		t.Errorf("squeue --start -t R -r: the running tasks are missing:\n%s", got)
	}
}
