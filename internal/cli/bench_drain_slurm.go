//go:build !slim

package cli

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/spec"
)

// drainTask is the run `berth bench drain` queues: `true` as berth apply
// submits it, or with --slurm what `sbatch --wrap true -o /dev/null`
// submits (its typed Slurm part, the script run by the node as slurmd
// does), or with --slurm=wrapper what sbatch submitted before Slurm was
// applied at placement: the same job as a bash wrapper with the Slurm
// variables in its env (testdata/sbatch-wrap-true-wrapper.json, a
// submission captured from that sbatch), for the figure before and after.
func drainTask(mode string) (*spec.Task, error) {
	switch mode {
	case "":
		return benchTask("true"), nil
	case "sbatch":
		cmd, err := slurm.ParseSbatchArgs([]string{"--wrap", "true", "-o", "/dev/null"})
		if err != nil {
			return nil, err
		}
		cwd, _ := os.Getwd()
		now := time.Now()
		job, err := slurm.BuildBatchJob(cmd, slurm.WrapScript(cmd.Wrap), slurm.SubmitContext{Cwd: cwd, Now: now, Env: os.Environ()})
		if err != nil {
			return nil, err
		}
		s := submitter{user: "bench", group: "bench", uid: os.Getuid(), gid: os.Getgid(), host: "bench", cwd: cwd, env: []string{"PATH=" + os.Getenv("PATH")}, now: now}
		br, err := slurmconv.BuildBatch(job, "", s.conv(), func(uint32) bool { return true }, nil)
		if err != nil {
			return nil, err
		}
		return br.Req.Spec, nil
	case "wrapper":
		var t spec.Task
		if err := json.Unmarshal(sbatchWrapperSpec, &t); err != nil {
			return nil, err
		}
		t.WorkingDir, _ = os.Getwd()
		t.Env = append(spec.Env{{Name: "PATH", Value: os.Getenv("PATH")}}, t.Env...)
		return &t, nil
	}
	return nil, fmt.Errorf("bench drain: --slurm=%s: want sbatch or wrapper", mode)
}

//go:embed testdata/sbatch-wrap-true-wrapper.json
var sbatchWrapperSpec []byte
