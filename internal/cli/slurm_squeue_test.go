package cli

import (
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
	"github.com/google/go-cmp/cmp"
)

// squeue --start lists pending jobs only (squeue/opts.c sets -t PD when no
// state is given), byte for byte as Slurm printed the golden queue, which
// had array tasks 10_1 and 10_2 running.
func TestSqueueStartListsPendingJobs(t *testing.T) {
	runs, prio := convtest.QueueAt0118()
	for i := range runs {
		if runs[i].ID == 18 {
			runs[i].EstimatedStart = convtest.AtPtr("02:26:09")
		}
	}
	v := slurmconv.NewView(runs, convtest.GoldenNodes(), convtest.At("01:26:18"))
	v.Prio = prio
	o := slurm.SqueueOptions{Start: true, Now: v.Now}
	got, _, err := slurm.FormatSqueue(slurm.FilterJobs(v.Jobs(), startStates(o, slurm.JobFilter{}, false)), o)
	if err != nil {
		t.Fatal(err)
	}
	_, want := convtest.ReadGolden(t, "squeue-start.txt")
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("squeue --start differs from Slurm's (-want +got):\n%s", d)
	}
	o.Array = true
	if got, _, _ := slurm.FormatSqueue(slurm.FilterJobs(v.Jobs(), startStates(o, slurm.JobFilter{States: []slurm.JobState{slurm.JobRunning}}, false)), o); !strings.Contains(got, "10_1") {
		t.Errorf("squeue --start -t R -r: the running tasks are missing:\n%s", got)
	}
}
