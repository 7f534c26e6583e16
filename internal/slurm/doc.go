// Package slurm speaks Slurm 22.05's languages so that a Slurm user can move
// to Berth by changing nothing: their scripts run as they are, and tools that
// parse Slurm's output keep working.
//
// Its one job is translation, with no I/O, no clock and no global state
// (times such as "now" are parameters). It is organised by idea:
//
//   - hostlist.go: ExpandHostlist, CompressHostlist, RangedHostlist
//     ("node[01-10,20]"), exactly as Slurm's hostlist.c.
//   - timefmt.go, memory.go: ParseTimeLimit and ParseDuration (--time),
//     ParseBegin (--begin, sacct -S/-E), FormatTimeLimit, FormatElapsed,
//     FormatSqueueDuration, FormatTimestamp; ParseMemory, FormatMemoryMB.
//   - getopt.go, options.go, sbatch.go: sbatch's two passes.
//     ParseSbatchArgs reads the command line (glibc getopt_long's rules and
//     messages), BuildBatchJob applies #SBATCH directives, then SBATCH_*
//     variables, then flags, into one BatchOptions per hetjob component.
//   - array.go, dependency.go, signal.go, export.go, gres.go, filename.go:
//     the value grammars (--array, --dependency, --signal, --export,
//     --gres/--gpus) and output file patterns (%j %A %a %x %u %N %%).
//   - states.go, job.go, nodes.go: the data the formatters print (Job,
//     Node, Partition, AcctRecord), with Slurm's state names and codes.
//   - squeue.go, filter.go, scontrol.go, sinfo.go, sacct.go, json.go: the
//     output of squeue (-o, -O, -l, -r, --start, --json), scontrol show
//     job/node/partition/hostnames, sinfo (-N, -l, -s, -o, --json) and sacct
//     (-o, -l, -X, -P, --json), byte for byte as Slurm 22.05.8 prints them.
//   - environment.go, commands.go: a batch job's SLURM_* environment, and the
//     messages sbatch and scancel print.
//
// Errors a user sees are *CommandError: exactly what Slurm writes and the
// exit status it uses, so the CLI prints them unchanged.
//
// The reference for every rule is Slurm 22.05.8's source (Debian's
// slurm-wlm 22.05.8-4+deb12u3) and the outputs captured from a real cluster
// in testdata/golden, which the tests reproduce. Where Berth deliberately
// differs, the doc comment says so (an unbalanced bracket in a hostlist is an
// error here, where Slurm invents a host name).
package slurm
