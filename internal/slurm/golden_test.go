package slurm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// golden is one capture of testdata/golden (see its README): the command
// line, what it printed, and its exit status.
type golden struct {
	cmd    string
	stdout string
	stderr string
	exit   int
}

func readGolden(t *testing.T, name string) golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	var g golden
	first, rest, _ := strings.Cut(s, "\n")
	g.cmd = strings.TrimPrefix(first, "$ ")
	exitAt := strings.LastIndex(rest, "--- exit ")
	if exitAt < 0 {
		t.Fatalf("%s: no exit line", name)
	}
	code := strings.TrimSuffix(strings.TrimSpace(rest[exitAt+len("--- exit "):]), " ---")
	if g.exit, err = strconv.Atoi(code); err != nil {
		t.Fatalf("%s: exit %q", name, code)
	}
	body := rest[:exitAt]
	if i := strings.Index(body, "--- stderr ---\n"); i >= 0 {
		g.stdout, g.stderr = body[:i], body[i+len("--- stderr ---\n"):]
	} else {
		g.stdout = body
	}
	return g
}

// readRaw reads a golden file that is not a command capture (job-env*).
func readRaw(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// assertGolden compares byte for byte, showing the difference line by line.
func assertGolden(t *testing.T, name, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	t.Errorf("%s differs from Slurm's output (-want +got):\n%s", name,
		cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")))
}

// The scenario of testdata/golden: one node "localhost", partition debug,
// everything run as root, times of 2026-11-22 (UTC here; the capture's zone
// does not matter, the times are printed as they were).
func at(hms string) time.Time {
	t, err := time.Parse("2006-01-02T15:04:05", "2026-11-22T"+hms)
	if err != nil {
		panic(err)
	}
	return t
}

const demoDir = "/home/alice/jobs/demo"

// aJob is a fluent builder for the scenario's jobs: defaults are those of
// `sbatch --wrap` on the golden cluster (1 CPU, 1000M per CPU, UNLIMITED).
type jobBuilder struct{ j Job }

func aJob(id uint32, name string) *jobBuilder {
	return &jobBuilder{Job{
		JobID: id, Name: name, User: "root", Group: "root", Account: "root", Partition: "debug", QOS: "normal",
		State: JobPending, Reason: ReasonPriority, TimeLimit: Unlimited,
		NumNodes: 1, NumCPUs: 1, NumTasks: 1, CPUsPerTask: 1, MinCPUsNode: 1, MinMemoryMB: 1000, MemPerCPU: true,
		TRES: "cpu=1,mem=1000M,node=1,billing=1", WorkDir: demoDir, StdIn: "/dev/null", StdOut: "/dev/null",
		BatchFlag: true, Requeue: true, AllocNode: "localhost", AllocSID: 8851, OverSubscribe: "OK",
	}}
}

func (b *jobBuilder) prio(p uint32) *jobBuilder { b.j.Priority = p; return b }
func (b *jobBuilder) pending(reason string) *jobBuilder {
	b.j.State, b.j.Reason = JobPending, reason
	return b
}

// running starts the job; like slurmctld, it expects the end at the time
// limit, or a year on for UNLIMITED (so squeue's %e prints NONE).
func (b *jobBuilder) running(start string) *jobBuilder {
	b.j.State, b.j.Reason, b.j.Start = JobRunning, ReasonNone, at(start)
	b.j.End = b.j.Start.AddDate(1, 0, 0)
	if b.j.TimeLimit != Unlimited {
		b.j.End = b.j.Start.Add(b.j.TimeLimit)
	}
	b.j.NodeList, b.j.BatchHost = "localhost", "localhost"
	return b
}
func (b *jobBuilder) ended(state JobState, reason, start, end string) *jobBuilder {
	b.j.State, b.j.Reason, b.j.Start, b.j.End = state, reason, at(start), at(end)
	b.j.NodeList, b.j.BatchHost = "localhost", "localhost"
	return b
}
func (b *jobBuilder) submit(hms string) *jobBuilder { b.j.Submit = at(hms); return b }
func (b *jobBuilder) task(arrayID uint32, task int, throttle int) *jobBuilder {
	b.j.ArrayJobID, b.j.ArrayTaskID, b.j.ArrayThrottle = arrayID, task, throttle
	return b
}
func (b *jobBuilder) tasks(arrayID uint32, throttle int, tasks ...int) *jobBuilder {
	b.j.ArrayJobID, b.j.ArrayTasks, b.j.ArrayThrottle = arrayID, tasks, throttle
	return b
}
func (b *jobBuilder) dep(s string) *jobBuilder {
	d, err := ParseDependency(s)
	if err != nil {
		panic(err)
	}
	b.j.Dependency = d
	return b
}
func (b *jobBuilder) with(f func(*Job)) *jobBuilder { f(&b.j); return b }
func (b *jobBuilder) build() Job                    { return b.j }

// gpuJob is job 19: --gres=gpu:2 -c 2 --mem=4G -t 10.
func gpuJob() *jobBuilder {
	return aJob(19, "gpujob").prio(4294901745).submit("01:26:09").with(func(j *Job) {
		j.NumCPUs, j.CPUsPerTask, j.MinCPUsNode = 2, 2, 2
		j.MinMemoryMB, j.MemPerCPU = 4096, false
		j.TimeLimit = 10 * time.Minute
		j.TresPerNode = "gres:gpu:2"
		j.TRES = "cpu=2,mem=4G,node=1,billing=2,gres/gpu=2"
	})
}

// queueAt0118 is the queue at 01:26:18: array 10 running tasks 1 and 2
// with 3-5 pending behind its throttle, jobs 13 to 19 pending.
func queueAt0118() []Job {
	return []Job{
		aJob(10, "wrap").tasks(10, 2, 3, 4, 5).pending(ReasonJobArrayTaskLimit).prio(4294901751).submit("01:26:07").build(),
		aJob(11, "wrap").task(10, 1, 2).running("01:26:09").prio(4294901751).submit("01:26:07").build(),
		aJob(12, "wrap").task(10, 2, 2).running("01:26:09").prio(4294901751).submit("01:26:07").build(),
		aJob(13, "wrap").pending(ReasonResources).prio(4294901750).submit("01:26:09").build(),
		aJob(14, "wrap").pending(ReasonPriority).prio(4294901749).submit("01:26:09").build(),
		aJob(15, "dep").pending(ReasonDependency).prio(4294901748).submit("01:26:09").dep("afterok:13").build(),
		aJob(16, "depnever").pending(ReasonDependencyNeverSatisfied).prio(4294901747).submit("01:26:09").dep("afterok:4(failed)").build(),
		aJob(17, "held").pending(ReasonJobHeldUser).prio(0).submit("01:26:09").build(),
		aJob(18, "later").pending(ReasonBeginTime).prio(4294901746).submit("01:26:09").with(func(j *Job) {
			j.Start = at("02:26:09")
			j.End = at("02:26:09").AddDate(1, 0, 0)
		}).build(),
		gpuJob().pending(ReasonPriority).build(),
	}
}

// useOracleConf points Slurm's commands at testdata/oracle-slurm.conf (a
// cluster that need not run: option parsing and hostlists work offline)
// unless SLURM_CONF is set.
func useOracleConf(t *testing.T) {
	t.Helper()
	if os.Getenv("SLURM_CONF") == "" {
		abs, err := filepath.Abs(filepath.Join("testdata", "oracle-slurm.conf"))
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("SLURM_CONF", abs)
	}
}
