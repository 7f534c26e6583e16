package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func withState(jobs []Job, ids []uint32, f func(*Job)) []Job {
	for i := range jobs {
		for _, id := range ids {
			if jobs[i].JobID == id {
				f(&jobs[i])
			}
		}
	}
	return jobs
}

// pick returns the jobs with these raw ids, in this order.
func pick(jobs []Job, ids ...uint32) []Job {
	var out []Job
	for _, id := range ids {
		for _, j := range jobs {
			if j.JobID == id {
				out = append(out, j)
			}
		}
	}
	return out
}

// The squeue outputs of testdata/golden, each from the data it shows.
func TestSqueueGolden(t *testing.T) {
	now := at("01:26:18")
	queue := queueAt0118()
	// After `scancel 10_5`: task 5 is gone from the array record.
	afterCancel := withState(queueAt0118(), []uint32{10}, func(j *Job) { j.ArrayTasks = []int{3, 4} })
	// The finished jobs squeue -t all still held at 01:24:52.
	finished := []Job{
		aJob(1, "wrap").ended(JobCompleted, ReasonNone, "01:23:12", "01:23:13").prio(4294901759).build(),
		aJob(2, "wrap").ended(JobCompleted, ReasonNone, "01:24:01", "01:24:02").prio(4294901758).build(),
		aJob(3, "timeout").with(func(j *Job) { j.TimeLimit = time.Minute }).running("01:24:32").prio(4294901757).build(),
		aJob(4, "fail3").ended(JobFailed, ReasonNonZeroExitCode, "01:24:32", "01:24:32").prio(4294901756).build(),
		aJob(5, "envjob").ended(JobCompleted, ReasonNone, "01:24:35", "01:24:35").prio(4294901755).build(),
		aJob(6, "envarr").task(6, 2, 0).ended(JobCompleted, ReasonNone, "01:24:41", "01:24:41").prio(4294901754).build(),
		aJob(7, "envarr").task(6, 1, 0).ended(JobCompleted, ReasonNone, "01:24:38", "01:24:38").prio(4294901754).build(),
		aJob(8, "envgpu").ended(JobCompleted, ReasonNone, "01:24:44", "01:24:44").prio(4294901753).build(),
	}
	// Tasks 3 and 4 running at 01:26:35; 10_4 kept the array's record.
	tasks34 := []Job{
		aJob(10, "wrap").task(10, 4, 2).running("01:26:30").prio(4294901751).build(),
		aJob(23, "wrap").task(10, 3, 2).running("01:26:30").prio(4294901751).build(),
	}
	queue0135 := append(pick(queueAt0118(), 13, 14, 15, 16, 18, 19),
		aJob(22, "wrap").pending(ReasonPriority).prio(4294901742).build())
	// Jobs 13 and 14 running at 01:26:54, 10 and 17 gone.
	running1314 := append(withState(pick(queueAt0118(), 15, 16, 18, 19), []uint32{19}, func(j *Job) { j.Reason = ReasonResources }),
		aJob(22, "wrap").pending(ReasonPriority).prio(4294901742).build(),
		aJob(13, "wrap").running("01:26:50").prio(4294901750).build(),
		aJob(14, "wrap").running("01:26:50").prio(4294901749).build())
	baddep := []Job{
		aJob(20, "wrap").pending(ReasonPartitionConfig).prio(4294901744).build(),
		aJob(22, "wrap").pending(ReasonPriority).prio(4294901742).build(),
	}
	// Multinode cluster, 01:57:27.
	multi := []Job{
		aJob(13707, "multi").running("01:57:24").with(func(j *Job) { j.NumNodes, j.NumCPUs, j.NodeList = 2, 4, "n[1-2]" }).build(),
		aJob(13708, "gpu2n").running("01:57:24").with(func(j *Job) {
			j.NumNodes, j.NumCPUs, j.NodeList, j.TresPerNode = 2, 2, "n[3-4]", "gres:gpu:3"
		}).build(),
		aJob(13709, "single").running("01:57:24").with(func(j *Job) { j.NodeList = "n3" }).build(),
	}

	tests := []struct {
		file string
		jobs []Job
		opts SqueueOptions
		f    JobFilter
	}{
		{"squeue.txt", queue, SqueueOptions{}, JobFilter{}},
		{"squeue-l.txt", queue, SqueueOptions{Long: true}, JobFilter{}},
		{"squeue-r.txt", queue, SqueueOptions{Array: true}, JobFilter{}},
		{"squeue-start.txt", queue, SqueueOptions{Start: true}, JobFilter{States: []JobState{JobPending}}},
		{"squeue-o-i-t-r.txt", queue, SqueueOptions{Format: "%i %t %r"}, JobFilter{}},
		{"squeue-format-common.txt", queue, SqueueOptions{Format: "%.18i %.9P %.30j %.8u %.8T %.10M %.9l %.6D %.4C %.10m %b %R"}, JobFilter{}},
		{"squeue-format-parsable.txt", queue, SqueueOptions{NoHeader: true, Format: "%i|%A|%F|%K|%j|%T|%t|%r|%M|%l|%L|%D|%C|%m|%b|%N|%V|%S|%e|%Q|%p|%E|%Z"}, JobFilter{}},
		{"squeue-O-long.txt", queue, SqueueOptions{LongFormat: "JobID:12,ArrayJobID:10,ArrayTaskID:8,Name:10,State:12,Reason:26,TimeUsed:8,TimeLimit:10,NumCPUs:5,MinMemory:8,tres-per-node:14,Dependency:24,NodeList:12"}, JobFilter{}},
		{"squeue-after-scancel-array-task.txt", afterCancel, SqueueOptions{}, JobFilter{}},
		{"squeue-tall-arraytask-cancelled.txt", pick(afterCancel, 10, 12, 11), SqueueOptions{Format: "%i %t %r"}, JobFilter{AllStates: true, Jobs: []JobSelector{{JobID: 10, Task: NoArrayTask}}}},
		{"squeue-tall.txt", finished, SqueueOptions{}, JobFilter{AllStates: true}},
		{"squeue-array-r.txt", tasks34, SqueueOptions{Array: true}, JobFilter{Jobs: []JobSelector{{JobID: 10, Task: NoArrayTask}}}},
		// Listing every job, slurmctld happened to send task 3 (job 23) first.
		{"squeue-array-tasks-3-4-running.txt", append(queue0135, tasks34[1], tasks34[0]), SqueueOptions{}, JobFilter{}},
		{"squeue-13-14-running.txt", running1314, SqueueOptions{}, JobFilter{}},
		{"squeue-pending-depnever-begintime.txt", pick(queue, 16, 18), SqueueOptions{}, JobFilter{}},
		{"squeue-h-pending-depnever-begintime.txt", pick(queue, 16, 18), SqueueOptions{NoHeader: true}, JobFilter{}},
		{"squeue-empty.txt", nil, SqueueOptions{}, JobFilter{}},
		{"squeue-h-empty.txt", nil, SqueueOptions{NoHeader: true}, JobFilter{}},
		{"squeue-j-partitionconfig-and-baddep.txt", baddep, SqueueOptions{Format: "%i %t %r %E"}, JobFilter{Jobs: []JobSelector{{20, NoArrayTask}, {22, NoArrayTask}}}},
		{"squeue-h-j-T-pending.txt", queue, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{Jobs: []JobSelector{{13, NoArrayTask}}}},
		{"squeue-h-j-T-running-arraytask.txt", queue, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{Jobs: []JobSelector{{10, 1}}}},
		{"squeue-h-j-T-running.txt", finished, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{Jobs: []JobSelector{{3, NoArrayTask}}}},
		{"squeue-h-j-T-completed.txt", finished, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{Jobs: []JobSelector{{5, NoArrayTask}}}},
		{"squeue-h-j-T-completed-tall.txt", finished, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{AllStates: true, Jobs: []JobSelector{{5, NoArrayTask}}}},
		{"squeue-h-j-T-failed.txt", finished, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{Jobs: []JobSelector{{4, NoArrayTask}}}},
		{"squeue-h-j-T-failed-tall.txt", finished, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{AllStates: true, Jobs: []JobSelector{{4, NoArrayTask}}}},
		{"squeue-h-j-T-timeout-tall.txt", []Job{aJob(3, "timeout").ended(JobTimeout, ReasonTimeLimit, "01:24:32", "01:25:54").build()}, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{AllStates: true, Jobs: []JobSelector{{3, NoArrayTask}}}},
		{"squeue-h-j-T-cancelled.txt", []Job{aJob(17, "held").with(func(j *Job) { j.State = JobCancelled }).build()}, SqueueOptions{NoHeader: true, Format: "%T"}, JobFilter{AllStates: true, Jobs: []JobSelector{{17, NoArrayTask}}}},
		{"multinode/squeue.txt", multi, SqueueOptions{}, JobFilter{}},
		{"multinode/squeue-fmt.txt", multi, SqueueOptions{Format: "%i %j %t %D %C %b %N %R"}, JobFilter{}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			g := readGolden(t, tc.file)
			o := tc.opts
			o.Now = now
			switch tc.file {
			case "squeue-tall.txt":
				o.Now = at("01:24:52")
			case "squeue-array-r.txt", "squeue-array-tasks-3-4-running.txt":
				o.Now = at("01:26:35")
			case "squeue-after-scancel-array-task.txt":
				o.Now = at("01:26:21")
			case "squeue-13-14-running.txt":
				o.Now = at("01:26:54")
			case "multinode/squeue.txt":
				o.Now = at("01:57:27")
			}
			out, warnings, err := FormatSqueue(FilterJobs(tc.jobs, tc.f), o)
			if err != nil || len(warnings) > 0 {
				t.Fatalf("FormatSqueue: %v %v", err, warnings)
			}
			assertGolden(t, tc.file, g.stdout, out)
		})
	}
}

func TestSqueueInvalidFormat(t *testing.T) {
	out, warnings, err := FormatSqueue([]Job{aJob(1, "x").build()}, SqueueOptions{Format: "%i %Ä %j"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "squeue: error: Invalid job format specification") {
		t.Errorf("warnings %q", warnings)
	}
	if !strings.HasPrefix(out, "JOBID ") {
		t.Errorf("out %q", out)
	}
	_, _, err = FormatSqueue(nil, SqueueOptions{Sort: "i,X"})
	if err == nil || err.Error() != "squeue: error: Invalid sort specification: X" {
		t.Errorf("sort error %v", err)
	}
}

func TestSqueueFoldsBerthTasks(t *testing.T) {
	// Berth lists array tasks one by one; pending ones fold as Slurm's
	// array record shows them, with the throttle and merged reasons.
	var jobs []Job
	for task := 3; task <= 100; task++ {
		reason := ReasonJobArrayTaskLimit
		if task == 50 {
			reason = ReasonPriority
		}
		jobs = append(jobs, aJob(uint32(200+task), "sweep").task(200, task, 10).pending(reason).build())
	}
	jobs = append(jobs, aJob(201, "sweep").task(200, 1, 10).running("01:00:00").build())
	out, _, err := FormatSqueue(jobs, SqueueOptions{Format: "%i %r %A", Now: at("01:00:05")})
	if err != nil {
		t.Fatal(err)
	}
	want := "JOBID REASON JOBID\n200_[3-100%10] JobArrayTaskLimit,Priority 200\n200_1 None 201\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// One pending task stays itself.
	out, _, _ = FormatSqueue(jobs[:1], SqueueOptions{Format: "%i", NoHeader: true})
	if out != "200_3\n" {
		t.Errorf("lone task %q", out)
	}
	// A 31-byte cut, as squeue's buffer does.
	var odd []Job
	for task := 1; task < 60; task += 2 {
		odd = append(odd, aJob(uint32(300+task), "odd").task(300, task, 0).pending(ReasonPriority).build())
		odd = append(odd, aJob(uint32(400+task), "odd").task(300, task+1, 0).with(func(j *Job) { j.Name = "x" }).pending(ReasonPriority).build())
	}
	out, _, _ = FormatSqueue(odd, SqueueOptions{Format: "%i", NoHeader: true})
	if first := strings.Split(out, "\n")[0]; first != "300_[1-59:2]" {
		t.Errorf("stepped %q", first)
	}
}

func TestFilterJobs(t *testing.T) {
	jobs := queueAt0118()
	ids := func(js []Job) []string {
		var s []string
		for _, j := range js {
			s = append(s, jobIDColumn(&squeueRec{Job: &j}))
		}
		return s
	}
	tests := map[string]struct {
		f    JobFilter
		want []string
	}{
		"task of folded": {JobFilter{Jobs: []JobSelector{{10, 5}}}, []string{"10_5"}},
		"two tasks":      {JobFilter{Jobs: []JobSelector{{10, 4}, {10, 5}}}, []string{"10_[4-5%2]"}},
		"whole array":    {JobFilter{Jobs: []JobSelector{{10, NoArrayTask}}}, []string{"10_[3-5%2]", "10_1", "10_2"}},
		"state R":        {JobFilter{States: []JobState{JobRunning}}, []string{"10_1", "10_2"}},
		"user":           {JobFilter{Users: []string{"bob"}}, nil},
		"name":           {JobFilter{Names: []string{"DEP"}}, []string{"15"}},
		"account":        {JobFilter{Accounts: []string{"root"}, Names: []string{"later"}}, []string{"18"}},
	}
	for name, tc := range tests {
		if diff := cmp.Diff(tc.want, ids(FilterJobs(jobs, tc.f))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	multi := []Job{aJob(5, "m").with(func(j *Job) { j.Partition = "a,b,c" }).build()}
	got := FilterJobs(multi, JobFilter{Partitions: []string{"c", "a"}})
	if len(got) != 2 || got[0].Partition != "a" || got[1].Partition != "c" {
		t.Errorf("partitions %+v", got)
	}
	if _, _, err := ParseStateList("pd,R,cg,all"); err != nil {
		t.Error(err)
	}
	if _, _, err := ParseStateList("PD,bogus"); err == nil || !strings.Contains(err.Error(), "Invalid job state specified: bogus") {
		t.Errorf("bad state: %v", err)
	}
	sels, err := ParseJobSelectors("10,10_3,12")
	if err != nil || len(sels) != 3 || sels[1] != (JobSelector{10, 3}) || sels[1].String() != "10_3" {
		t.Errorf("selectors %v %v", sels, err)
	}
}

func TestInvalidJobIDGolden(t *testing.T) {
	for _, file := range []string{"squeue-j-unknown.txt", "squeue-h-j-T-unknown.txt", "scontrol-show-job-unknown.txt"} {
		g := readGolden(t, file)
		e := InvalidJobIDError()
		if got := strings.Join(e.Stderr, "\n") + "\n"; got != g.stderr || e.ExitCode != g.exit || g.stdout != "" {
			t.Errorf("%s: stderr %q exit %d, want %q exit %d", file, got, e.ExitCode, g.stderr, g.exit)
		}
	}
}
