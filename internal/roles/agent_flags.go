package roles

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/cli"
)

// monitorFlags configure an agent's metrics and health checks (berth agent,
// and berth server for its local agent).
type monitorFlags struct {
	m            agent.Monitoring
	features     []string
	blocks       string
	runtimeFlags // runtime_flags.go: --python-image, --nvcc-image
}

func (f *monitorFlags) add(cmd *cobra.Command, prefix string) {
	fs := cmd.Flags()
	fs.DurationVar(&f.m.MetricsEvery, "metrics-interval", 5*time.Second, prefix+"how often running jobs' CPU, memory and GPU use is sampled (0 or less: never)")
	fs.StringVar(&f.m.HealthCheck, "health-check", "", prefix+"health-check program (run with /bin/sh -c; Slurm's HealthCheckProgram): a non-zero exit or a timeout drains the node, with the last line of its output as the reason, until it passes again")
	fs.DurationVar(&f.m.HealthEvery, "health-interval", time.Minute, prefix+"how often the health checks run")
	fs.DurationVar(&f.m.HealthTimeout, "health-timeout", 0, prefix+"how long the health-check program may run (default: the interval, at most 1m)")
	fs.BoolVar(&f.m.NoGPUHealth, "no-gpu-health", false, prefix+"do not check GPUs with nvidia-smi (ECC errors, lost GPUs)")
	fs.StringSliceVar(&f.features, "features", nil, prefix+"node features (Slurm's Features=), comma-separated, e.g. ib,a100: a run's constraint (sbatch -C) asks for them")
	f.runtimeFlags.add(cmd, prefix)
	fs.StringVar(&f.blocks, "blocks", "", prefix+"split the node into N equal blocks of its CPUs, memory and GPUs (dstack's blocks; `auto`: one per GPU, 1 without GPUs); a job takes whole blocks (default: its fleet's blocks in the policy file, else 1)")
	fs.Var(cli.SizeFlag(&f.m.MinFreeDisk), "min-free-disk", prefix+"free room the data directory's disk must keep, e.g. 1GB; under it the node reports itself failed (disk full) and is drained (default: 64MB, or 5% of a smaller disk)")
}

// config returns cfg with the flags' monitoring.
func (f *monitorFlags) config(cfg agent.Config) agent.Config {
	cfg.Monitor = f.m
	cfg.Features = f.features
	f.runtimeFlags.apply(&cfg)
	cfg.Blocks = parseBlocks(f.blocks)
	if cfg.Monitor.MetricsEvery <= 0 {
		cfg.Monitor.MetricsEvery = -1 // never
	}
	return cfg
}

// parseBlocks reads --blocks: a count, or auto (agent.BlocksAuto); 0 for
// none or a value that is neither (checkBlocks refuses it first).
func parseBlocks(v string) int {
	if v == "auto" {
		return agent.BlocksAuto
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// checkBlocks refuses a --blocks that is neither a positive count nor auto.
func checkBlocks(v string) error {
	if v == "" || v == "auto" {
		return nil
	}
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		return fmt.Errorf("--blocks: want a number of blocks (at least 1) or auto, got %q", v)
	}
	return nil
}
