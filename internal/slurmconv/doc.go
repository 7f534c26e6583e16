// Package slurmconv translates between Slurm and Berth, with no I/O and
// no client: the pure half of the Slurm front end, which the Slurm
// commands (sbatch, squeue, sacct…) wrap with flags, client calls and
// printing. internal/slurm stays Slurm's grammar and formatters; this
// package maps Berth's model onto them and back:
//
//   - a batch job (slurm.BatchJob: sbatch's options and script) to a
//     submission, a spec.Task with its typed Slurm part and the submit
//     options (BuildBatch, ComponentResources, ExportEnv, DependsOn);
//   - runs and nodes to Slurm's job, accounting and node rows (View: what
//     squeue, scontrol, sacct and sinfo print; Nodes);
//   - a run's lifecycle status and reason to Slurm's job state and reason
//     code (JobState, the one place that mapping lives; ExitCode);
//   - a run's Slurm part, typed or from the tags of older records (Part).
//
// The server applies Slurm's environment and output file names at
// placement itself (internal/control: slurm.BatchEnvironment,
// slurm.ExpandFilename): the server does not depend on this package.
//
// Its tests are golden: what it builds prints, through internal/slurm's
// formatters, what real Slurm 22.05 printed for the same jobs (the
// captures in internal/slurm/testdata/golden; fixtures in convtest).
package slurmconv
