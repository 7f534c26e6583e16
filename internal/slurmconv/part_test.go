package slurmconv

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
)

// oldStoredSpec is a run's spec as sbatch stored it before spec.Slurm:
// the Slurm facts as "slurm.*" string tags (taken from a database of
// session 7, less its long commands and environment).
const oldStoredSpec = `{"type":"task","name":"train-big","nodes":2,"working_dir":"/home/alice/work",
 "commands":["set +e\n..."],"Resources":{"cpu":{"count":{"min":32,"max":32}},"gpu":{"count":{"min":4,"max":4},"name":["a100"]}},
 "priority":0,"project":"proj42","nice":10,"exclusive":true,"array":"0-9%3","max_duration":86400,"signal":"B:USR1@90",
 "depends_on":[{"type":"afterok","runs":["12"]},{"type":"afterany","runs":["13"]}],"dependency_policy":"any",
 "fleets":["gpu"],"retry":{"on_events":["interruption"]},
 "tags":{"slurm.job_name":"Train_Big","slurm.tool":"sbatch","slurm.user":"alice","slurm.uid":"1000","slurm.gid":"100",
  "slurm.group":"users","slurm.account":"proj42","slurm.comment":"nightly run","slurm.command":"/home/alice/work/job.sh",
  "slurm.stdout":"/home/alice/work/logs/%x-%A_%a.out","slurm.ntasks":"8","slurm.ntasks_per_node":"4","slurm.cpus_per_task":"8",
  "slurm.tres_per_node":"gres:gpu:a100:4","slurm.dependency":"afterok:12?afterok:999?afterany:13","slurm.signal":"B:USR1@90",
  "slurm.requeue":"1","slurm.submit_host":"login1"}}`

// A run stored with the old string tags still shows in squeue, scontrol
// and sacct exactly as the same submission stored today, with its typed
// Slurm part.
func TestSlurmPartOfOldRecord(t *testing.T) {
	script := `#!/bin/bash -l
#SBATCH --job-name=Train_Big
#SBATCH -N 2 --ntasks-per-node=4 -c 8
#SBATCH --gres=gpu:a100:4
#SBATCH -t 1-00:00:00
#SBATCH -p gpu
#SBATCH -A proj42 --comment "nightly run"
#SBATCH --array=0-9%3
#SBATCH --dependency=afterok:12:999?afterany:13
#SBATCH --requeue --signal=B:USR1@90 --nice=10 --exclusive
#SBATCH -o logs/%x-%A_%a.out
srun python train.py
`
	br, err := buildFrom(t, []string{"job.sh"}, script, []string{"PATH=/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	submitted := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	newRun := api.Run{ID: 41, Name: "train-big", Project: "proj42", User: "alice", Status: api.StatusSubmitted, SubmittedAt: submitted, Spec: br.Req.Spec}
	oldRun := newRun
	oldRun.ID, oldRun.Spec = 42, nil
	if err := json.Unmarshal([]byte(oldStoredSpec), &oldRun.Spec); err != nil {
		t.Fatal(err)
	}
	if oldRun.Spec.Slurm != nil || newRun.Spec.Slurm == nil || len(newRun.Spec.Tags) != 0 {
		t.Fatalf("fixtures: old record has a typed part or the new one tags")
	}
	old, cur := Part(&oldRun), Part(&newRun)
	// What the old tags never held: the layout the server applies at
	// placement, and facts sbatch had no tag for.
	want := *cur
	want.SubmitDir, want.CPUsPerNode, want.GPUsPerNode, want.NTasksGiven, want.TasksPerNode = "", 0, 0, 0, 4
	want.PerNodeGiven, want.Script, want.Args = 0, false, nil
	if d := cmp.Diff(&want, old); d != "" {
		t.Errorf("the old record's Slurm part (-want +got):\n%s", d)
	}

	now := submitted.Add(time.Minute)
	v := NewView([]api.Run{newRun, oldRun}, nil, now)
	jNew, jOld := v.Job(&v.Runs[0]), v.Job(&v.Runs[1])
	jOld.JobID = jNew.JobID
	if d := cmp.Diff(slurm.ShowJob(&jNew, false, now), slurm.ShowJob(&jOld, false, now)); d != "" {
		t.Errorf("scontrol show job of the old record (-new +old):\n%s", d)
	}
	aNew, aOld := v.acctRecord(&v.Runs[0]), v.acctRecord(&v.Runs[1])
	aOld.JobID = aNew.JobID
	if d := cmp.Diff(aNew, aOld); d != "" {
		t.Errorf("sacct of the old record (-new +old):\n%s", d)
	}
	if j := v.Job(&api.Run{ID: 43, Status: api.StatusSubmitted, SubmittedAt: submitted}); j.Name != "" || j.BatchFlag {
		t.Errorf("a run without spec: %q batch=%v", j.Name, j.BatchFlag)
	}
}
