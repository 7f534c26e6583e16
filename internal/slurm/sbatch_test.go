package slurm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var submitNow = time.Date(2026, 11, 22, 1, 26, 9, 0, time.UTC)

func submitCtx() SubmitContext {
	return SubmitContext{Cwd: "/home/alice/jobs/demo", Now: submitNow, ScriptName: "job.sh"}
}

func build(t *testing.T, args []string, script string) (*BatchJob, error) {
	t.Helper()
	cmd, err := ParseSbatchArgs(args)
	if err != nil {
		return nil, err
	}
	body := []byte(script)
	if cmd.Wrap != "" {
		body = WrapScript(cmd.Wrap)
	}
	return BuildBatchJob(cmd, body, submitCtx())
}

func base() BatchOptions {
	o := newBatchOptions()
	o.Chdir = "/home/alice/jobs/demo"
	o.Input = "/dev/null"
	return o
}

var optsCmp = cmp.Options{cmpopts.IgnoreUnexported(BatchOptions{}), cmpopts.EquateEmpty()}

func TestSbatchDirectivesAndFlags(t *testing.T) {
	script := `#!/bin/bash
# a comment line
#SBATCH --job-name=train -N 2
#SBATCH --ntasks-per-node=4 --cpus-per-task 8   # trailing comment
#SBATCH --mem=64G
#SBATCH --gres=gpu:a100:4
#SBATCH -t 1-12:00
#SBATCH --partition=gpu,debug
#SBATCH -o logs/%x-%j.out
#SBATCH --export=ALL,WANDB_MODE=offline
#SBATCH --array=0-9%2
#SBATCH --dependency=afterok:100:101?afterany:102
#SBATCH --signal=B:USR1@90
#SBATCH --requeue
#SBATCH --comment "two words"

module load cuda
#SBATCH --qos=never-read
srun python train.py
`
	job, err := build(t, []string{"-t", "30", "--qos=high", "-J", "override", "job.sh", "--lr", "0.1"}, script)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	want := base()
	want.JobName = "override"
	want.Nodes, want.MaxNodes = 2, 2
	want.NTasksPerNode = 4
	want.CPUsPerTask, want.MinCPUsPerNode = 8, 8
	want.Mem = 64 << 30
	want.GRES = []GRES{{Name: "gpu", Type: "a100", Count: 4}}
	want.TimeLimit = 30 * time.Minute
	want.Partition = []string{"gpu", "debug"}
	want.QOS = "high"
	want.Output = "/home/alice/jobs/demo/logs/%x-%j.out"
	want.Export = Export{Mode: ExportAll, Vars: []EnvVar{{Name: "WANDB_MODE", Value: "offline", HasValue: true}}}
	want.Array = &ArraySpec{Indices: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, Throttle: 2}
	want.Dependency = &Dependency{Any: true, Deps: []Dep{
		{Type: DepAfterOK, JobID: 100, TaskID: DepWholeJob, State: DepUnfulfilled},
		{Type: DepAfterOK, JobID: 101, TaskID: DepWholeJob, State: DepUnfulfilled},
		{Type: DepAfterAny, JobID: 102, TaskID: DepWholeJob, State: DepUnfulfilled},
	}}
	want.Signal = &SignalSpec{Signal: 10, Before: 90 * time.Second, BatchOnly: true}
	want.Requeue = &yes
	want.Comment = "two words"
	if diff := cmp.Diff([]BatchOptions{want}, job.Components, optsCmp); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--lr", "0.1"}, job.ScriptArgs); diff != "" {
		t.Errorf("script args (-want +got):\n%s", diff)
	}
	if got := job.Components[0].TresPerNode(); got != "gres:gpu:a100:4" {
		t.Errorf("TresPerNode = %q", got)
	}
}

func TestSbatchGoldenSubmissions(t *testing.T) {
	// The command lines of the golden scenario (testdata/golden/sbatch*.txt).
	tests := map[string]struct {
		args  []string
		check func(t *testing.T, o BatchOptions)
	}{
		"timeout": {[]string{"--time=0:01", "-J", "timeout", "-o", "/dev/null", "--wrap", "sleep 120"}, func(t *testing.T, o BatchOptions) {
			if o.TimeLimit != time.Minute || o.JobName != "timeout" || o.Output != "/dev/null" || o.Wrap != "sleep 120" {
				t.Errorf("%+v", o)
			}
		}},
		"wrap default name": {[]string{"-o", "/dev/null", "--wrap", "sleep 30"}, func(t *testing.T, o BatchOptions) {
			if o.JobName != "wrap" {
				t.Errorf("job name %q", o.JobName)
			}
		}},
		"relative output": {[]string{"-J", "fail3", "-o", "fail3.out", "--wrap", "exit 3"}, func(t *testing.T, o BatchOptions) {
			if o.Output != "/home/alice/jobs/demo/fail3.out" {
				t.Errorf("output %q", o.Output)
			}
		}},
		"gpu": {[]string{"--gres=gpu:2", "-c", "2", "--mem=4G", "-t", "10", "-J", "gpujob", "--wrap", "sleep 10"}, func(t *testing.T, o BatchOptions) {
			if o.TresPerNode() != "gres:gpu:2" || o.CPUsPerTask != 2 || o.Mem != 4<<30 || o.TimeLimit != 10*time.Minute {
				t.Errorf("%+v", o)
			}
		}},
		"begin": {[]string{"--begin=now+1hour", "-J", "later", "--wrap", "sleep 5"}, func(t *testing.T, o BatchOptions) {
			if !o.Begin.Equal(time.Date(2026, 11, 22, 2, 26, 9, 0, time.UTC)) {
				t.Errorf("begin %v", o.Begin)
			}
		}},
		"hold": {[]string{"--hold", "-J", "held", "--wrap", "sleep 5"}, func(t *testing.T, o BatchOptions) {
			if !o.Hold {
				t.Error("not held")
			}
		}},
		"parsable": {[]string{"--parsable", "-o", "/dev/null", "--wrap", "sleep 30"}, func(t *testing.T, o BatchOptions) {
			if !o.Parsable {
				t.Error("not parsable")
			}
		}},
		"array": {[]string{"--array=1-5%2", "-o", "/dev/null", "--wrap", "sleep 20"}, func(t *testing.T, o BatchOptions) {
			if o.Array == nil || o.Array.Throttle != 2 || len(o.Array.Indices) != 5 {
				t.Errorf("array %+v", o.Array)
			}
		}},
		"multinode": {[]string{"-N", "2", "-n", "4", "-J", "multi", "--wrap", "hostname"}, func(t *testing.T, o BatchOptions) {
			if o.Nodes != 2 || o.NTasks != 4 {
				t.Errorf("%+v", o)
			}
		}},
		"abbreviations and clusters": {[]string{"--part=debug", "-HvJx", "--nice", "--exclusiv", "--wrap", "true"}, func(t *testing.T, o BatchOptions) {
			if strings.Join(o.Partition, ",") != "debug" || !o.Hold || o.Verbose != 1 || o.JobName != "x" || o.Nice == nil || *o.Nice != 100 || o.Exclusive != "exclusive" {
				t.Errorf("%+v", o)
			}
		}},
		"none output and misc": {[]string{"-o", "none", "-e", "err.txt", "--open-mode=append", "--kill-on-invalid-dep=yes", "--priority=TOP", "--no-requeue", "-W", "--test-only", "--gpus=2", "--gpus-per-node=a100:1", "-D", "sub", "--wrap", "true"}, func(t *testing.T, o BatchOptions) {
			if o.Output != "/dev/null" || o.Error != "/home/alice/jobs/demo/sub/err.txt" || o.OpenMode != "append" ||
				o.KillOnInvalidDep == nil || !*o.KillOnInvalidDep || o.Priority == nil || !o.Priority.Top ||
				o.Requeue == nil || *o.Requeue || !o.Wait || !o.TestOnly || o.TresPerJob() != "gres:gpu:2" ||
				o.TresPerNode() != "gres:gpu:a100:1" || o.Chdir != "/home/alice/jobs/demo/sub" {
				t.Errorf("%+v", o)
			}
		}},
		"unmodelled options kept": {[]string{"--cpu-freq=high", "--reboot", "--wrap", "true"}, func(t *testing.T, o BatchOptions) {
			if !cmp.Equal(map[string]string{"cpu-freq": "high", "reboot": ""}, o.Other) {
				t.Errorf("other %v", o.Other)
			}
		}},
		"time zero is unlimited": {[]string{"-t", "0", "--wrap", "true"}, func(t *testing.T, o BatchOptions) {
			if o.TimeLimit != Unlimited {
				t.Errorf("time %v", o.TimeLimit)
			}
		}},
		"node range": {[]string{"-N", "2-4", "--wrap", "true"}, func(t *testing.T, o BatchOptions) {
			if o.Nodes != 2 || o.MaxNodes != 4 {
				t.Errorf("nodes %d-%d", o.Nodes, o.MaxNodes)
			}
		}},
		"mem on command line clears per-cpu from script": {[]string{"--mem=8G", "--wrap", "true"}, func(t *testing.T, o BatchOptions) {
			if o.Mem != 8<<30 || o.MemPerCPU != -1 {
				t.Errorf("mem %d per cpu %d", o.Mem, o.MemPerCPU)
			}
		}},
		"double dash": {[]string{"-J", "a", "--", "job.sh", "-J", "b"}, func(t *testing.T, o BatchOptions) {
			if o.JobName != "a" {
				t.Errorf("name %q", o.JobName)
			}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job, err := build(t, tc.args, "#!/bin/sh\n#SBATCH --mem-per-cpu=2G\ntrue\n")
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, job.Components[0])
		})
	}
}

func TestSbatchEnvironmentBetweenScriptAndFlags(t *testing.T) {
	cmd, err := ParseSbatchArgs([]string{"-p", "cli", "job.sh"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := submitCtx()
	ctx.Env = []string{"SBATCH_PARTITION=env", "SBATCH_TIMELIMIT=5", "SBATCH_ACCOUNT=envacct", "SBATCH_REQUEUE=no", "HOME=/root"}
	job, err := BuildBatchJob(cmd, []byte("#!/bin/sh\n#SBATCH -p script -t 60 -A scriptacct --requeue\n"), ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := job.Components[0]
	if strings.Join(o.Partition, ",") != "cli" || o.TimeLimit != 5*time.Minute || o.Account != "envacct" || o.Requeue != nil {
		t.Errorf("partition %v time %v account %q requeue %v", o.Partition, o.TimeLimit, o.Account, o.Requeue)
	}
	if o.JobName != "job.sh" {
		t.Errorf("job name %q, want the script's base name", o.JobName)
	}
}

func TestSbatchHetjob(t *testing.T) {
	script := "#!/bin/sh\n#SBATCH -N1 -J het\n#SBATCH hetjob -N2\n#SBATCH --gres=gpu:1\nsrun true\n"
	job, err := build(t, []string{"-t", "5", ":", "-t", "7", ":", "-n", "3", "job.sh"}, script)
	if err != nil {
		t.Fatal(err)
	}
	if len(job.Components) != 3 {
		t.Fatalf("%d components, want 3", len(job.Components))
	}
	c := job.Components
	if c[0].Nodes != 1 || c[0].TimeLimit != 5*time.Minute || c[0].JobName != "het" {
		t.Errorf("component 0: %+v", c[0])
	}
	if c[1].Nodes != 2 || c[1].TimeLimit != 7*time.Minute || len(c[1].GRES) != 1 {
		t.Errorf("component 1: %+v", c[1])
	}
	if c[2].NTasks != 3 || c[2].Nodes != 0 {
		t.Errorf("component 2: %+v", c[2])
	}
}

// -N is read as Slurm's verify_node_count reads it: "-1" is the range ""
// to 1, whose empty minimum is 1 (one node, as in Slurm); only a count of
// 0 is refused (TestSbatchErrors).
func TestNodeCountAsSlurm(t *testing.T) {
	for in, want := range map[string][2]int{"-1": {1, 1}, "-4": {1, 4}, "2-4": {2, 4}, "3": {3, 3}, "1k": {1024, 1024}, "0-4": {0, 4}} {
		job, err := build(t, []string{"-N", in, "--wrap", "true"}, "")
		if err != nil {
			t.Errorf("-N %s: %v", in, err)
			continue
		}
		if o := job.Components[0]; o.Nodes != want[0] || o.MaxNodes != want[1] {
			t.Errorf("-N %s: %d-%d nodes, want %d-%d", in, o.Nodes, o.MaxNodes, want[0], want[1])
		}
	}
}

// Every expectation below is what Slurm 22.05.8's sbatch printed on stderr
// and the status it exited with.
func TestSbatchErrors(t *testing.T) {
	tests := map[string]sbatchError{
		"unknown long":          {args: []string{"--foo=bar", "--wrap", "true"}, stderr: []string{"sbatch: unrecognized option '--foo=bar'", tryHelp}, code: 255},
		"unknown short":         {args: []string{"-y", "--wrap", "true"}, stderr: []string{"sbatch: invalid option -- 'y'", tryHelp}, code: 255},
		"flag with value":       {args: []string{"--hold=yes", "--wrap", "true"}, stderr: []string{"sbatch: option '--hold' doesn't allow an argument", tryHelp}, code: 255},
		"ambiguous":             {args: []string{"--mem-per", "--wrap", "true"}, stderr: []string{"sbatch: option '--mem-per' is ambiguous; possibilities: '--mem-per-cpu' '--mem-per-gpu'", tryHelp}, code: 255},
		"ambiguous clusters":    {args: []string{"--clust=x", "--wrap", "true"}, stderr: []string{"sbatch: option '--clust=x' is ambiguous; possibilities: '--cluster-constraint' '--cluster' '--clusters'", tryHelp}, code: 255},
		"ambiguous par":         {args: []string{"--par=debug", "-v", "--wrap", "true"}, stderr: []string{"sbatch: option '--par=debug' is ambiguous; possibilities: '--parsable' '--partition'", tryHelp}, code: 255},
		"missing long arg":      {args: []string{"--time"}, stderr: []string{"sbatch: option '--time' requires an argument", tryHelp}, code: 255},
		"missing short arg":     {args: []string{"-J"}, stderr: []string{"sbatch: option requires an argument -- 'J'", tryHelp}, code: 255},
		"time eats next":        {args: []string{"--time", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --time specification"}, code: 255},
		"bad time":              {args: []string{"--time=1:2:3:4", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --time specification"}, code: 255},
		"bad nodes":             {args: []string{"--nodes=abc", "--wrap", "true"}, stderr: []string{"sbatch: error: \"abc\" is not a valid node count"}, code: 255},
		"node range":            {args: []string{"-N", "4-2", "--wrap", "true"}, stderr: []string{"sbatch: error: Maximum node count 2 is less than minimum node count 4"}, code: 255},
		"bad mem":               {args: []string{"--mem=4X", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --mem specification"}, code: 255},
		"negative mem":          {args: []string{"--mem=-5", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --mem specification"}, code: 255},
		"bad mem per cpu":       {args: []string{"--mem-per-cpu=x", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --mem-per-cpu specification"}, code: 255},
		"begin garbage":         {args: []string{"--begin=garbage", "--wrap", "true"}, stderr: []string{"Invalid time specification (pos=0): garbage", "sbatch: error: Invalid --begin specification"}, code: 255},
		"begin T":               {args: []string{"--begin=T", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --begin specification"}, code: 255},
		"bad signal":            {args: []string{"--signal=FOO", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --signal specification"}, code: 255},
		"bad signal time":       {args: []string{"--signal=USR1@abc", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --signal specification"}, code: 255},
		"bad open mode":         {args: []string{"--open-mode=x", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --open-mode specification"}, code: 255},
		"bad exclusive":         {args: []string{"--exclusive=foo", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --exclusive specification"}, code: 255},
		"bad kill dep":          {args: []string{"--kill-on-invalid-dep=maybe", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --kill-on-invalid-dep specification"}, code: 255},
		"zero cpus":             {args: []string{"--cpus-per-task=0", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid numeric value \"0\" for --cpus-per-task."}, code: 1},
		"zero tasks":            {args: []string{"--ntasks=0", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid numeric value \"0\" for --ntasks."}, code: 1},
		"letters cpus":          {args: []string{"-c", "abc", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid numeric value \"abc\" for --cpus-per-task."}, code: 1},
		"nice range":            {args: []string{"--nice=3000000000", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid --nice value, out of range (+/- 2147483645)"}, code: 255},
		"priority":              {args: []string{"--priority=-1", "--wrap", "true"}, stderr: []string{"sbatch: error: Priority must be >= 0"}, code: 255},
		"gres":                  {args: []string{"--gres=gpu:x:y:z", "--wrap", "true"}, stderr: []string{"sbatch: error: Invalid generic resource (gres) specification"}, code: 1},
		"array":                 {args: []string{"--array=5-1", "--wrap", "true"}, stderr: []string{"sbatch: error: Batch job submission failed: Invalid job array specification"}, code: 1},
		"dependency":            {args: []string{"--dependency=foo:1", "--wrap", "true"}, stderr: []string{"sbatch: error: Batch job submission failed: Job dependency problem"}, code: 1},
		"wrap and script":       {args: []string{"--wrap", "true", "job.sh"}, stderr: []string{"sbatch: error: Script arguments not permitted with --wrap option"}, code: 1},
		"mem family":            {args: []string{"--mem=1G", "--mem-per-cpu=1G", "--wrap", "true"}, stderr: []string{"sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."}, code: 1},
		"directive unknown":     {args: []string{"job.sh"}, script: "#!/bin/sh\n#SBATCH --foo\n#SBATCH --time=abc\ntrue\n", stderr: []string{"sbatch: unrecognized option '--foo'", tryHelp}, code: 255},
		"directive before flag": {args: []string{"--time=xyz", "job.sh"}, script: "#!/bin/sh\n#SBATCH --time=abc\ntrue\n", stderr: []string{"sbatch: error: Invalid --time specification"}, code: 255},
		"directive word":        {args: []string{"job.sh"}, script: "#!/bin/sh\n#SBATCH foo\ntrue\n", stderr: []string{"sbatch: error: Invalid directive found in batch script: foo"}, code: 255},
		"directive quote":       {args: []string{"job.sh"}, script: "#!/bin/sh\n#SBATCH -J \"a b\ntrue\n", stderr: []string{"sbatch: fatal: job.sh: line 2: Unmatched `\"` in [ \"a b]"}, code: 1},
		"directive colon":       {args: []string{"job.sh"}, script: "#!/bin/sh\n#SBATCH -N1 : -N2\ntrue\n", stderr: []string{"sbatch: fatal: job.sh: line 2: Unexpected `:` in [ : -N2]"}, code: 1},
	}
	checkSbatchErrors(t, tests)
}

// Counts that parsed but that sbatch's _opt_verify, or the controller,
// refuses. Berth took them for "not given": -N 0 and -c 2147483648 (C's
// (int) cast makes it -2147483648) gave 1 node and 1 CPU. The wording is
// Slurm 22.05's (sbatch/opt.c, ESLURM_INVALID_NODE_COUNT's text), not a
// capture: -N 0 needs a controller to refuse it, and the oracle test has
// none (it compares the -c and -n cases).
func TestSbatchRefusesCountsSlurmRefuses(t *testing.T) {
	checkSbatchErrors(t, map[string]sbatchError{
		"zero nodes":           {args: []string{"-N", "0", "--wrap", "true"}, stderr: []string{"sbatch: error: Batch job submission failed: Node count specification invalid"}, code: 1},
		"zero nodes directive": {args: []string{"job.sh"}, script: "#!/bin/sh\n#SBATCH --nodes=0-0\ntrue\n", stderr: []string{"sbatch: error: Batch job submission failed: Node count specification invalid"}, code: 1},
		"cpus wrap around":     {args: []string{"-c", "2147483648", "--wrap", "true"}, stderr: []string{"sbatch: error: invalid number of cpus per task (-c -2147483648)"}, code: 1},
		"tasks wrap around":    {args: []string{"-n", "4294967295", "--wrap", "true"}, stderr: []string{"sbatch: error: invalid number of tasks (-n -1)"}, code: 1},
		"both wrap around":     {args: []string{"-n", "4294967295", "-c", "3000000000", "--wrap", "true"}, stderr: []string{"sbatch: error: invalid number of tasks (-n -1)", "sbatch: error: invalid number of cpus per task (-c -1294967296)"}, code: 1},
	})
}

// sbatchError is a command line, its script, and what sbatch says of it.
type sbatchError struct {
	args   []string
	script string
	stderr []string
	code   int
}

func checkSbatchErrors(t *testing.T, tests map[string]sbatchError) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			script := tc.script
			if script == "" {
				script = "#!/bin/sh\ntrue\n"
			}
			_, err := build(t, tc.args, script)
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want a *CommandError", err)
			}
			if diff := cmp.Diff(tc.stderr, ce.Stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if ce.ExitCode != tc.code {
				t.Errorf("exit %d, want %d", ce.ExitCode, tc.code)
			}
		})
	}
}

func TestScriptDirectives(t *testing.T) {
	// As in sbatch, a backslash does not protect a space: "a\ b" is two words.
	script := "#!/bin/sh\n\n#SBATCH -J 'my job' --comment=a\\ b\n   #SBATCH -p ignored-indented-is-comment\n#SBATCH --mem=1G #note\n#SLURM -t 5\necho hi\n#SBATCH -N 9\n"
	got, err := ScriptDirectives([]byte(script), "job.sh")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"-J", "my job", "--comment=a", "b", "--mem=1G", "-t", "5"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCheckScript(t *testing.T) {
	tests := map[string]struct {
		body  string
		first string
	}{
		"empty":      {"", "sbatch: error: Batch script is empty!"},
		"whitespace": {" \n\t\n", "sbatch: error: Batch script contains only whitespace!"},
		"no shebang": {"echo hi\n", "sbatch: error: This does not look like a batch script.  The first"},
		"dos":        {"#!/bin/sh\r\necho\r\n", "sbatch: error: Batch script contains DOS line breaks (\\r\\n)"},
		"nul":        {"#!/bin/sh\n\x00", "sbatch: error: The Slurm controller does not allow scripts that"},
	}
	for name, tc := range tests {
		err := CheckScript([]byte(tc.body))
		var ce *CommandError
		if !errors.As(err, &ce) || ce.Stderr[0] != tc.first || ce.ExitCode != 1 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := CheckScript(WrapScript("true")); err != nil {
		t.Errorf("wrap script: %v", err)
	}
}

// TestSbatchOracle runs the real sbatch (BERTH_SLURM_ORACLE=1, SLURM_CONF
// set, no controller needed) on malformed command lines and compares what
// it prints and its exit status with ours.
func TestSbatchOracle(t *testing.T) {
	if os.Getenv("BERTH_SLURM_ORACLE") != "1" {
		t.Skip("set BERTH_SLURM_ORACLE=1 to compare with sbatch")
	}
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("no sbatch")
	}
	useOracleConf(t)
	cases := [][]string{
		{"--foo"}, {"--foo=1"}, {"-y"}, {"--hold=1"}, {"--mem-per"}, {"--n"}, {"--no"},
		{"--time=abc"}, {"--time=1-2-3"}, {"--time=1:2:3:4"}, {"--mem=1Q"}, {"--mem-per-gpu=x"},
		{"-N", "x"}, {"-N", "5-2"}, {"-n", "-1"}, {"-c", "0"}, {"--ntasks-per-node=x"}, {"-c", "2147483648"}, {"-n", "4294967295"},
		{"--signal=NOPE"}, {"--signal=USR1@x"}, {"--open-mode=z"}, {"--exclusive=x"},
		{"--kill-on-invalid-dep=x"}, {"--nice=-3000000000"}, {"--priority=5000000000"},
		{"--begin=now+1x"}, {"--begin=12:61"}, {"--begin=2026-13-01"}, {"--begin=tomorrowx"},
		{"--tim=5"}, {"--cpus=2"}, {"--gpus-per"}, {"--wai"},
	}
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(scriptPath, []byte("#!/bin/sh\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range cases {
		full := append(append([]string{}, args...), "--wrap", "true")
		_, ours := build(t, full, "")
		var ce *CommandError
		if !errors.As(ours, &ce) {
			t.Errorf("%q: we accept it", args)
			continue
		}
		c := exec.Command("sbatch", full...)
		c.Dir = dir
		out, _ := c.CombinedOutput()
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if !strings.Contains(l, "select/") {
				lines = append(lines, l)
			}
		}
		if diff := cmp.Diff(lines, ce.Stderr); diff != "" {
			t.Errorf("%q (-sbatch +ours):\n%s", args, diff)
		}
		if c.ProcessState.ExitCode() != ce.ExitCode {
			t.Errorf("%q: sbatch exit %d, ours %d", args, c.ProcessState.ExitCode(), ce.ExitCode)
		}
	}
}

// shellWords splits a command line as bash would for the simple quoting
// the golden captures use.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			inWord = true
		case c == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Every sbatch command line of the golden scenario parses, and where sbatch
// printed "Submitted batch job N" we print the same.
func TestSbatchGoldenCommandLines(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/sbatch*.txt")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("testdata/golden/multinode/sbatch*.txt")
	files = append(files, more...)
	for _, path := range files {
		name := strings.TrimPrefix(path, "testdata/golden/")
		t.Run(name, func(t *testing.T) {
			g := readGolden(t, name)
			words := shellWords(g.cmd)
			if words[0] != "sbatch" {
				t.Fatalf("not an sbatch line: %q", g.cmd)
			}
			job, err := build(t, words[1:], "")
			if err != nil {
				t.Fatalf("%q: %v", g.cmd, err)
			}
			if g.exit != 0 {
				return // refused by the controller, not by the parser
			}
			o := job.Components[0]
			var id uint32
			if _, err := fmt.Sscan(strings.TrimPrefix(strings.TrimSpace(g.stdout), "Submitted batch job "), &id); err != nil {
				t.Fatal(err)
			}
			if got := SubmittedMessage(id, o.Parsable, ""); got != g.stdout {
				t.Errorf("message %q, want %q", got, g.stdout)
			}
		})
	}
}
