// Package slurm speaks Slurm 22.05's languages so that a Slurm user can move
// to Berth by changing nothing.
//
// Its one job is translation, with no I/O, no clock and no global state:
//
//   - input: sbatch's command line and #SBATCH directives (ParseSbatchArgs,
//     BuildBatchJob) into a typed BatchOptions, with the value grammars a
//     script may use: hostlists (ExpandHostlist), time limits and begin
//     times (ParseTimeLimit, ParseBegin, with "now" passed in), memory sizes,
//     --gres/--gpus, --export, --dependency, --array, --signal, and the
//     %j/%A/%a/%x/%u/%N output filename patterns (ExpandFilename);
//   - output: the text that squeue, sacct, sinfo and scontrol print, from
//     plain data structs (Job, AcctRecord, Node, Partition), byte for byte
//     as Slurm 22.05.8 prints it, so that tools which parse Slurm's output
//     keep working (column widths, truncation, headers, -h, -P separators,
//     folded array ids such as 10_[3-5%2]).
//
// Errors a user sees come out as *CommandError: the exact lines Slurm writes
// to stderr and the exit status it uses, so the CLI prints them unchanged.
//
// The reference for every rule here is Slurm 22.05.8's own source (Debian's
// slurm-wlm 22.05.8-4+deb12u3) and outputs captured from a real cluster
// (testdata/golden). Where Berth deliberately differs, the doc comment says
// so. Deliberate differences are few: an unbalanced bracket in a hostlist is
// an error here, where Slurm invents a host name.
package slurm
