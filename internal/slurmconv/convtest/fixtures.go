// Package convtest holds the fixtures of the Slurm translation's tests
// (internal/slurmconv, internal/cli, and the Slurm commands): runs and
// nodes as a Berth server lists them for the jobs of the golden captures
// of real Slurm 22.05, and a reader of those captures. Only tests import
// it.
package convtest

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// Root is the module's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// ReadGolden reads a capture of real Slurm 22.05 from
// internal/slurm/testdata/golden: the command line and what it printed.
func ReadGolden(t *testing.T, name string) (cmd, stdout string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(), "internal", "slurm", "testdata", "golden", name))
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
func At(hms string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", "2026-11-22T"+hms, time.Local)
	if err != nil {
		panic(err)
	}
	return t
}

func AtPtr(hms string) *time.Time { t := At(hms); return &t }

// RunBuilder makes the runs a Berth server would list for the golden
// scenario's jobs: sbatch --wrap jobs of root in partition debug, one CPU
// and 1000M per CPU each.
type RunBuilder struct{ r api.Run }

func ARun(id int64, name string) *RunBuilder {
	one := 1
	mem := spec.Bytes(1000) * spec.MB
	return &RunBuilder{api.Run{ID: id, Name: name, Project: "root", User: "admin", Status: api.StatusSubmitted,
		Reason: "Priority", SubmittedAt: At("01:26:07"),
		Spec: &spec.Task{Nodes: 1, Fleets: []string{"debug"}, WorkingDir: "/home/alice/jobs/demo",
			Resources: spec.Resources{CPU: &spec.CPUSpec{Count: spec.IntRange{Min: 1, Max: &one}}, Memory: &spec.ByteRange{Min: mem, Max: &mem}},
			Tags: map[string]string{"slurm.job_name": name, "slurm.user": "root", "slurm.group": "root", "slurm.tool": "sbatch", "slurm.mem_per_cpu": "1000",
				"slurm.stdout": "/dev/null", "slurm.submit_host": "localhost"}}}}
}

func (b *RunBuilder) Pending(reason string) *RunBuilder {
	b.r.Status, b.r.Reason = api.StatusSubmitted, reason
	return b
}

func (b *RunBuilder) Running(start string) *RunBuilder {
	b.r.Status, b.r.Reason, b.r.StartedAt = api.StatusRunning, "", AtPtr(start)
	b.r.Nodes = []string{"localhost"}
	b.r.Jobs = []api.Job{{Num: 0, Node: "localhost", Status: api.StatusRunning, Alloc: api.Alloc{CPUs: 1, Memory: 1000 << 20}}}
	return b
}

func (b *RunBuilder) Ended(status api.Status, reason string, code int, start, end string) *RunBuilder {
	b.Running(start)
	b.r.Status, b.r.Reason, b.r.ExitCode, b.r.FinishedAt = status, reason, &code, AtPtr(end)
	b.r.Jobs[0].Status, b.r.Jobs[0].ExitCode = status, &code
	return b
}

func (b *RunBuilder) Task(array int64, index int) *RunBuilder {
	b.r.ArrayID, b.r.ArrayIndex = array, &index
	b.r.Name = b.r.Name + "_" + strconv.Itoa(index)
	return b
}

func (b *RunBuilder) With(f func(*api.Run)) *RunBuilder { f(&b.r); return b }
func (b *RunBuilder) Build() api.Run                    { return b.r }

// QueueAt0118 is the golden queue at 01:26:18 as Berth holds it: array 10
// with tasks 1 and 2 running and 3-5 not created yet, jobs 13 to 19
// waiting for their reasons.
func QueueAt0118() ([]api.Run, map[int64]int64) {
	runs := []api.Run{
		ARun(10, "wrap").Pending("JobArrayTaskLimit").With(func(r *api.Run) {
			r.Spec.Array = "1-5%2"
			r.Array = &api.ArrayInfo{Indices: "1-5", Count: 5, Throttle: 2, Waiting: "3-5", NWaiting: 3}
		}).Build(),
		ARun(11, "wrap").Task(10, 1).Running("01:26:09").Build(),
		ARun(12, "wrap").Task(10, 2).Running("01:26:09").Build(),
		ARun(13, "wrap").Pending("Resources").Build(),
		ARun(14, "wrap").Pending("Priority").Build(),
		ARun(15, "dep").Pending("Dependency").Build(),
		ARun(16, "depnever").Pending("DependencyNeverSatisfied").Build(),
		ARun(17, "held").Pending("JobHeldUser").Build(),
		ARun(18, "later").Pending("BeginTime").Build(),
		ARun(19, "gpujob").Pending("Priority").With(func(r *api.Run) {
			d := spec.Duration(600)
			r.Spec.MaxDuration = &d
		}).Build(),
	}
	prio := map[int64]int64{10: 4294901751, 13: 4294901750, 14: 4294901749, 15: 4294901748, 16: 4294901747, 18: 4294901746, 19: 4294901745}
	return runs, prio
}

func GoldenNodes() []api.Node {
	return []api.Node{{NodeInfo: api.NodeInfo{Name: "localhost", Fleet: "debug", CPUs: 2, Memory: 20000 << 20}, Status: "idle"}}
}

// Run is the run being built, to change in place.
func (b *RunBuilder) Run() *api.Run { return &b.r }
