package cli

import (
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

// sbatch reads the node list only for the options that need it: a plain
// submission makes one request, not two (the list grows with the cluster).
func TestSbatchNeedsNodes(t *testing.T) {
	for args, want := range map[string]bool{
		"--wrap=true":          false,
		"-N2 --wrap=true":      false,
		"-n4 --wrap=true":      true, // spread over nodes
		"-n4 -N2 --wrap=true":  false,
		"-p batch --wrap=true": true,
		"-p " + slurmconv.DefaultPartition + " --wrap=true": false,
		"--gres=gpu:1 --wrap=true":                          true,
		"-G 1 --wrap=true":                                  true,
		"-w n1 --wrap=true":                                 true,
		"-x n1 --wrap=true":                                 true,
		"-C ib --wrap=true":                                 true,
		"--test-only --wrap=true":                           true,
	} {
		cmd, err := slurm.ParseSbatchArgs(strings.Fields(args))
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		job, err := slurm.BuildBatchJob(cmd, nil, slurm.SubmitContext{Cwd: "/tmp"})
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if got := sbatchNeedsNodes(job); got != want {
			t.Errorf("sbatch %s: needs the node list %v, want %v", args, got, want)
		}
	}
}
