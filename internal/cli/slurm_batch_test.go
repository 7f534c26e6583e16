package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

func bash(t *testing.T, script string, env []string, dir string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = env
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

func TestRunNameFor(t *testing.T) {
	for in, want := range map[string]string{
		"train.sh": "train", "wrap": "wrap", "My_Job.v2": "my-job-v2", "1job": "job-1job", "x": "job-x", "": "job",
		"___": "job", strings.Repeat("a", 60): strings.Repeat("a", 41), "job.sbatch": "job", ".sh": "sh",
	} {
		if got := runNameFor(in); got != want {
			t.Errorf("runNameFor(%q) = %q, want %q", in, got, want)
		}
		if got := runNameFor(in); !(len(got) >= 2 && len(got) <= 41) {
			t.Errorf("runNameFor(%q) = %q: not a run name", in, got)
		}
	}
}

// buildFrom parses an sbatch command line and script as sbatch would and
// builds the submission.
func buildFrom(t *testing.T, args []string, script string, env []string) (*batchRun, error) {
	t.Helper()
	cmd, err := slurm.ParseSbatchArgs(args)
	if err != nil {
		return nil, err
	}
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	body := []byte(script)
	if cmd.Wrap != "" {
		body = slurm.WrapScript(cmd.Wrap)
	}
	job, err := slurm.BuildBatchJob(cmd, body, slurm.SubmitContext{Cwd: "/home/alice/work", Now: now, Env: env, ScriptName: cmd.Script})
	if err != nil {
		return nil, err
	}
	s := submitter{user: "alice", group: "users", uid: 1000, gid: 100, host: "login1", cwd: "/home/alice/work", env: env, now: now}
	known := func(id uint32) bool { return id != 999 }
	return buildBatchRun(job, cmd.Script, s, known, []string{"berth", "gpu", "cpu"})
}

func TestResourcesMapping(t *testing.T) {
	type want struct {
		nodes, cpus, gpus int
		mem               string
	}
	tests := map[string]struct {
		args []string
		want want
	}{
		"defaults":                 {[]string{"--wrap", "x"}, want{1, 1, 0, ""}},
		"-c":                       {[]string{"-c", "4", "--wrap", "x"}, want{1, 4, 0, ""}},
		"-n on one node":           {[]string{"-n", "8", "--wrap", "x"}, want{1, 8, 0, ""}},
		"-n -N":                    {[]string{"-N", "2", "-n", "8", "-c", "2", "--wrap", "x"}, want{2, 8, 0, ""}},
		"-n --ntasks-per-node":     {[]string{"-n", "8", "--ntasks-per-node", "4", "--wrap", "x"}, want{2, 4, 0, ""}},
		"--mem":                    {[]string{"--mem", "4G", "--wrap", "x"}, want{1, 1, 0, "4GB"}},
		"--mem-per-cpu":            {[]string{"-c", "4", "--mem-per-cpu", "1000", "--wrap", "x"}, want{1, 4, 0, "4000MB"}},
		"--gres":                   {[]string{"--gres", "gpu:a100:2", "--wrap", "x"}, want{1, 1, 2, ""}},
		"--gpus per job":           {[]string{"-N", "2", "--gpus", "8", "--wrap", "x"}, want{2, 1, 4, ""}},
		"--gpus-per-node":          {[]string{"--gpus-per-node", "4", "--cpus-per-gpu", "8", "--wrap", "x"}, want{1, 32, 4, ""}},
		"--gpus-per-task":          {[]string{"--ntasks-per-node", "2", "--gpus-per-task", "1", "--wrap", "x"}, want{1, 2, 2, ""}},
		"--mem-per-gpu":            {[]string{"--gres", "gpu:2", "--mem-per-gpu", "10G", "--wrap", "x"}, want{1, 1, 2, "20GB"}},
		"--mem=0 asks for nothing": {[]string{"--mem", "0", "--wrap", "x"}, want{1, 1, 0, ""}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			br, err := buildFrom(t, tc.args, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			r := br.req.Spec.Resources
			got := want{nodes: br.req.Spec.Nodes, cpus: r.CPU.Count.Min}
			if r.GPU != nil {
				got.gpus = r.GPU.Count.Min
			}
			if r.Memory != nil {
				got.mem = r.Memory.Min.String()
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A script with directives becomes a run that keeps what Slurm shows in
// its typed Slurm part (no string tags), gets the batch variables sbatch gives, and the submitter's
// environment without its job variables.
func TestBuildBatchRun(t *testing.T) {
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
	env := []string{"HOME=/home/alice", "PATH=/usr/bin", "SLURM_JOB_ID=7", "CUDA_VISIBLE_DEVICES=0", "BERTH_TOKEN=secret", "BASH_FUNC_x%%=() {}", "MY_VAR=1"}
	br, err := buildFrom(t, []string{"--hold", "job.sh", "a b", "c"}, script, env)
	if err != nil {
		t.Fatal(err)
	}
	ts := br.req.Spec
	if !br.req.Hold {
		t.Error("--hold was not passed on")
	}
	checks := map[string][2]any{
		"name":       {"train-big", ts.Name},
		"nodes":      {2, ts.Nodes},
		"cpus":       {32, ts.Resources.CPU.Count.Min},
		"gpus":       {"a100:4", ts.Resources.GPU.String()},
		"fleets":     {[]string{"gpu"}, ts.Fleets},
		"time":       {spec.Duration(86400), *ts.MaxDuration},
		"array":      {"0-9%3", ts.Array},
		"depends":    {[]spec.Dependency{{Type: "afterok", Runs: []string{"12"}}, {Type: "afterany", Runs: []string{"13"}}}, ts.DependsOn},
		"policy":     {"any", ts.DependencyPolicy},
		"nice":       {int64(10), ts.Nice},
		"exclusive":  {true, ts.Exclusive},
		"retry":      {&spec.Retry{OnEvents: []string{"interruption"}}, ts.Retry},
		"workdir":    {"/home/alice/work", ts.WorkingDir},
		"job name":   {"Train_Big", ts.Slurm.JobName},
		"account":    {"proj42", ts.Slurm.Account},
		"comment":    {"nightly run", ts.Slurm.Comment},
		"signal":     {"B:USR1@90", slurmSignalString(ts.Slurm.Signal)},
		"command":    {"/home/alice/work/job.sh", ts.Slurm.Command},
		"stdout":     {"/home/alice/work/logs/%x-%A_%a.out", ts.Slurm.Output},
		"ntasks":     {8, ts.Slurm.NTasks},
		"tres":       {"gres:gpu:a100:4", ts.Slurm.TresPerNode},
		"dependency": {"afterok:12?afterok:999?afterany:13", ts.Slurm.Dependency},
		"no tags":    {0, len(ts.Tags)},
	}
	for name, c := range checks {
		if d := cmp.Diff(c[0], c[1]); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
	got := map[string]string{}
	for _, v := range ts.Env {
		got[v.Name] = v.Value
	}
	for k, v := range map[string]string{"HOME": "/home/alice", "MY_VAR": "1", "PATH": "/usr/bin"} {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	// The job's Slurm variables are the server's, at placement; the
	// submitter's own never pass.
	for k := range got {
		if strings.HasPrefix(k, "SLURM_") || k == "CUDA_VISIBLE_DEVICES" || k == "BERTH_TOKEN" || k == "BASH_FUNC_x%%" {
			t.Errorf("the job's env holds %s", k)
		}
	}
	layout := spec.Slurm{NTasks: 8, NTasksPerNode: 4, PerNodeGiven: 4, TasksPerNode: 4, CPUsPerTask: 8, CPUsPerNode: 32, GPUsPerNode: 4,
		SubmitDir: "/home/alice/work", SubmitHost: "login1", User: "alice", UID: 1000, GID: 100, Group: "users"}
	got2 := spec.Slurm{NTasks: ts.Slurm.NTasks, NTasksPerNode: ts.Slurm.NTasksPerNode, PerNodeGiven: ts.Slurm.PerNodeGiven, TasksPerNode: ts.Slurm.TasksPerNode,
		CPUsPerTask: ts.Slurm.CPUsPerTask, CPUsPerNode: ts.Slurm.CPUsPerNode, GPUsPerNode: ts.Slurm.GPUsPerNode, SubmitDir: ts.Slurm.SubmitDir,
		SubmitHost: ts.Slurm.SubmitHost, User: ts.Slurm.User, UID: ts.Slurm.UID, GID: ts.Slurm.GID, Group: ts.Slurm.Group}
	if d := cmp.Diff(layout, got2); d != "" {
		t.Errorf("layout and submitter (-want +got):\n%s", d)
	}
	// The script is the run's command, as written; the node runs it.
	if len(ts.Commands) != 1 || ts.Commands[0] != script || !ts.Slurm.Script || !cmp.Equal(ts.Slurm.Args, []string{"a b", "c"}) {
		t.Errorf("commands %q, script %v, args %q", ts.Commands, ts.Slurm.Script, ts.Slurm.Args)
	}
	if ts.StopCriteria != "master-done" {
		t.Errorf("a 2-node batch job's stop criteria: %q", ts.StopCriteria)
	}
}

func TestBuildBatchRunRefusals(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"unknown partition": {[]string{"-p", "nosuch", "--wrap", "x"}, "sbatch: error: invalid partition specified: nosuch\nsbatch: error: Batch job submission failed: Invalid partition name specified"},
		"gres not a gpu":    {[]string{"--gres", "nvme:1", "--wrap", "x"}, "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification"},
		"expand dependency": {[]string{"-d", "expand:12", "--wrap", "x"}, "sbatch: error: Batch job submission failed: Job dependency problem"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := buildFrom(t, tc.args, "", nil)
			var ce *slurm.CommandError
			if !errors.As(err, &ce) || ce.Error() != tc.want || ce.ExitCode != 1 {
				t.Errorf("got %v, want %q, exit 1", err, tc.want)
			}
		})
	}
	// A condition on a job Slurm does not know is dropped, as Slurm 22.05
	// does; the job is accepted.
	br, err := buildFrom(t, []string{"-d", "afterok:999", "--wrap", "x"}, "", nil)
	if err != nil || len(br.req.Spec.DependsOn) != 0 {
		t.Errorf("afterok on an unknown job: %v, depends_on %v", err, br)
	}
}

func TestGetoptLong(t *testing.T) {
	table := []slurmOpt{{"format", 'o', reqArg}, {"Format", 'O', reqArg}, {"jobs", 'j', optionalArg}, {"noheader", 'h', noArg},
		{"states", 't', reqArg}, {"start", 0, noArg}}
	tests := map[string]struct {
		args []string
		got  []gotOpt
		rest []string
		err  string
	}{
		"short and long":      {[]string{"-h", "--format=%i", "-t", "R"}, []gotOpt{{"noheader", "", false}, {"format", "%i", true}, {"states", "R", true}}, nil, ""},
		"cluster and attach":  {[]string{"-ho%i"}, []gotOpt{{"noheader", "", false}, {"format", "%i", true}}, nil, ""},
		"optional value":      {[]string{"-j", "12"}, []gotOpt{{"jobs", "", false}}, []string{"12"}, ""},
		"optional attached":   {[]string{"-j12", "--jobs=3"}, []gotOpt{{"jobs", "12", true}, {"jobs", "3", true}}, nil, ""},
		"case matters":        {[]string{"--Format", "x"}, []gotOpt{{"Format", "x", true}}, nil, ""},
		"abbreviation":        {[]string{"--noh"}, []gotOpt{{"noheader", "", false}}, nil, ""},
		"ambiguous":           {[]string{"--sta"}, nil, nil, "squeue: option '--sta' is ambiguous; possibilities: '--states' '--start'\nTry \"squeue --help\" for more information"},
		"unknown long":        {[]string{"--bogus"}, nil, nil, "squeue: unrecognized option '--bogus'\nTry \"squeue --help\" for more information"},
		"unknown short":       {[]string{"-k"}, nil, nil, "squeue: invalid option -- 'k'\nTry \"squeue --help\" for more information"},
		"missing value":       {[]string{"-o"}, nil, nil, "squeue: option requires an argument -- 'o'\nTry \"squeue --help\" for more information"},
		"missing long value":  {[]string{"--format"}, nil, nil, "squeue: option '--format' requires an argument\nTry \"squeue --help\" for more information"},
		"value on a flag":     {[]string{"--noheader=1"}, nil, nil, "squeue: option '--noheader' doesn't allow an argument\nTry \"squeue --help\" for more information"},
		"permuted":            {[]string{"a", "-h", "b"}, []gotOpt{{"noheader", "", false}}, []string{"a", "b"}, ""},
		"double dash ends it": {[]string{"--", "-h"}, nil, []string{"-h"}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, rest, err := getoptLong("squeue", tc.args, table, true)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.got, got, cmp.AllowUnexported(gotOpt{})); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.rest, rest); d != "" {
				t.Errorf("rest (-want +got):\n%s", d)
			}
		})
	}
}

func TestLayoutStep(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := map[string]struct {
		opt    slurm.BatchOptions
		getenv func(string) string
		want   stepLayout
	}{
		"one per node":         {slurm.BatchOptions{}, env("SLURM_JOB_NUM_NODES", "2", "SLURM_NODEID", "1"), stepLayout{ntasks: 2, nodes: 2, local: 1, first: 1, thisNode: 1}},
		"batch -n":             {slurm.BatchOptions{}, env("SLURM_JOB_NUM_NODES", "2", "SLURM_NODEID", "1", "SLURM_NTASKS", "8"), stepLayout{ntasks: 8, nodes: 2, local: 4, first: 4, thisNode: 1}},
		"-n 3 on 2 nodes":      {slurm.BatchOptions{NTasks: 3}, env("SLURM_JOB_NUM_NODES", "2", "SLURM_NODEID", "1"), stepLayout{ntasks: 3, nodes: 2, local: 1, first: 2, thisNode: 1}},
		"-N1 runs on node 0":   {slurm.BatchOptions{Nodes: 1}, env("SLURM_JOB_NUM_NODES", "2", "SLURM_NODEID", "1", "SLURM_NTASKS", "8"), stepLayout{ntasks: 1, nodes: 1, local: 0, first: 1, thisNode: 1}},
		"--ntasks-per-node=2":  {slurm.BatchOptions{NTasksPerNode: 2}, env("SLURM_NNODES", "3", "SLURM_NODEID", "2"), stepLayout{ntasks: 6, nodes: 3, local: 2, first: 4, thisNode: 2}},
		"-n 1 of two nodes":    {slurm.BatchOptions{NTasks: 1}, env("SLURM_JOB_NUM_NODES", "2", "SLURM_NODEID", "0"), stepLayout{ntasks: 1, nodes: 1, local: 1, first: 0, thisNode: 0}},
		"no allocation values": {slurm.BatchOptions{}, env(), stepLayout{ntasks: 1, nodes: 1, local: 1, first: 0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := layoutStep(&tc.opt, tc.getenv); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// srun's one-off run starts each node's share of the tasks with their
// ranks, and exits with the highest status.
func TestStepCommands(t *testing.T) {
	for _, tc := range []struct {
		ntasks, nodes int
		node          string
		label         bool
		want          string
		code          int
	}{
		{2, 2, "1", false, "1 0 2\n", 0},
		{5, 2, "0", false, "0 0 5\n1 1 5\n2 2 5\n", 3},
		{5, 2, "1", false, "3 0 5\n4 1 5\n", 0},
		{4, 2, "1", true, "2: 2 0 4\n3: 3 1 4\n", 3},
		// srun -l pads the labels to the highest task number's width.
		{12, 2, "1", true, " 6: 6 0 12\n 7: 7 1 12\n 8: 8 2 12\n 9: 9 3 12\n10: 10 4 12\n11: 11 5 12\n", 0},
	} {
		cmd := stepCommands([]string{"bash", "-c", `echo $SLURM_PROCID $SLURM_LOCALID $SLURM_NTASKS; [ $SLURM_PROCID = 2 ] && exit 3; exit 0`}, tc.ntasks, tc.nodes, tc.label, tc.label)
		out, code := bash(t, cmd, []string{"SLURM_NODEID=" + tc.node, "PATH=" + os.Getenv("PATH")}, "/")
		lines := strings.SplitAfter(out, "\n")
		sortStrings(lines)
		if got := strings.Join(lines, ""); got != tc.want || code != tc.code {
			t.Errorf("%d tasks on %d nodes, node %s: %q exit %d, want %q exit %d", tc.ntasks, tc.nodes, tc.node, got, code, tc.want, tc.code)
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestArgv(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"/usr/bin/berth", "ps"}, []string{"ps"}},
		{[]string{"/opt/shims/sbatch", "-N2", "x.sh"}, []string{"sbatch", "-N2", "x.sh"}},
		{[]string{"squeue"}, []string{"squeue"}},
		{[]string{"./sbatch-not"}, []string{}},
	} {
		if d := cmp.Diff(tc.want, Argv(tc.in), cmp.Comparer(func(a, b []string) bool { return strings.Join(a, " ") == strings.Join(b, " ") })); d != "" {
			t.Errorf("Argv(%q): %s", tc.in, d)
		}
	}
}

func TestInstallShims(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := installShims(&out, dir, "/bin/true", nil, false); err != nil {
		t.Fatal(err)
	}
	if err := installShims(&out, dir, "/bin/false", nil, false); err != nil {
		t.Fatalf("links are replaced: %v", err)
	}
	for _, n := range SlurmCommandNames() {
		if target, err := os.Readlink(filepath.Join(dir, n)); err != nil || target != "/bin/false" {
			t.Errorf("%s -> %q (%v)", n, target, err)
		}
	}
	os.Remove(filepath.Join(dir, "sinfo"))
	os.WriteFile(filepath.Join(dir, "sinfo"), []byte("mine"), 0o755)
	if err := installShims(&out, dir, "/bin/true", nil, false); err == nil {
		t.Error("a file that is not a link was replaced without --force")
	}
}

func TestSbatchSignalBecomesTheRunsSignal(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--signal=B:USR1@300", "--time=1:00:00", "job.sh"}, "B:USR1@5m"}, // the batch shell only
		{[]string{"--signal=USR2", "--time=10", "job.sh"}, "S:USR2"},               // the job's steps only; 60 s before, in both
		{[]string{"--signal=USR2@50", "-t", "1", "job.sh"}, "S:USR2@50s"},
		{[]string{"--signal=USR1@30", "job.sh"}, ""}, // no time limit: nothing to count back from
	} {
		br, err := buildFrom(t, tc.args, "#!/bin/bash\ntrue\n", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := br.req.Spec.Signal; got != tc.want {
			t.Errorf("%v: signal %q, want %q", tc.args, got, tc.want)
		}
	}
}

// --signal=R:… (also when a reservation ends) is refused: Berth has no
// reservations. Without a time limit it was kept as a tag and silently
// never acted on.
func TestSbatchRefusesReservationSignal(t *testing.T) {
	for _, args := range [][]string{{"--signal=R:USR1@60", "job.sh"}, {"--signal=RB:USR1", "--time=10", "job.sh"}} {
		_, err := buildFrom(t, args, "#!/bin/bash\ntrue\n", nil)
		var ce *slurm.CommandError
		if !errors.As(err, &ce) || ce.ExitCode != 1 || len(ce.Stderr) != 1 ||
			!strings.HasPrefix(ce.Stderr[0], "sbatch: error: Batch job submission failed: --signal=") || !strings.Contains(ce.Stderr[0], "has no meaning in Berth, which has no reservations; remove R:") {
			t.Errorf("%v: %v, want it refused", args, err)
		}
	}
}

// A script over 128 KiB is sent whole (it reaches the node as a file); one
// over the limit, Slurm's max_script_size (4 MB), is refused with Slurm's
// words, unless BERTH_MAX_SCRIPT_SIZE allows it.
func TestSbatchScriptSize(t *testing.T) {
	script := func(size int) string {
		return "#!/bin/bash\n# " + strings.Repeat("x", size) + "\necho done\n"
	}
	br, err := buildFrom(t, []string{"job.sh"}, script(130_000), nil)
	if err != nil {
		t.Fatalf("130 KB: %v", err)
	}
	if c := br.req.Spec.Commands; len(c) != 1 || !strings.Contains(c[0], script(130_000)) {
		t.Errorf("130 KB: the script is not in the commands whole")
	}
	_, err = buildFrom(t, []string{"job.sh"}, script(5_000_000), nil)
	var ce *slurm.CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 1 || len(ce.Stderr) != 2 ||
		ce.Stderr[0] != "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long" ||
		!strings.HasPrefix(ce.Stderr[1], "sbatch: error: the batch script is 5000025 bytes (") || !strings.Contains(ce.Stderr[1], "at most 4194304, Slurm's default max_script_size (BERTH_MAX_SCRIPT_SIZE raises it") {
		t.Errorf("5 MB: %v, want Slurm's refusal", err)
	}
	l, err := submitLimits(func(string) string { return "8MB" })
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := slurm.ParseSbatchArgs([]string{"job.sh"})
	job, err := slurm.BuildBatchJob(cmd, []byte(script(5_000_000)), slurm.SubmitContext{Cwd: "/home/alice/work", ScriptName: "job.sh"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buildBatchRun(job, "job.sh", submitter{user: "alice", cwd: "/home/alice/work", limits: l}, nil, nil); err != nil {
		t.Errorf("5 MB with BERTH_MAX_SCRIPT_SIZE=8MB: %v", err)
	}
}

func TestSubmitLimits(t *testing.T) {
	tests := map[string]struct {
		env     string
		want    int64
		wantErr string
	}{
		"default": {"", 4 << 20, ""},
		"bytes":   {"10000000", 10_000_000, ""},
		"unit":    {"8MB", 8 << 20, ""},
		"zero":    {"0", 0, "BERTH_MAX_SCRIPT_SIZE=0: want a positive size, such as 8MB"},
		"bad":     {"lots", 0, `BERTH_MAX_SCRIPT_SIZE=lots: invalid size "lots" (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := submitLimits(func(k string) string {
				if k == envMaxScriptSize {
					return tc.env
				}
				return ""
			})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || l.ScriptBytes != tc.want {
				t.Errorf("got %d, %v, want %d", l.ScriptBytes, err, tc.want)
			}
		})
	}
}

// --dependency with "?" is OR, as in Slurm: each condition is an
// alternative of its own. Conditions of one type were merged into one
// depends_on entry, which needs all its runs: afterok:12?afterok:13 waited
// for both.
func TestDependencyAlternatives(t *testing.T) {
	tests := map[string]struct {
		dep    string
		want   []spec.Dependency
		policy string
	}{
		"or of one type": {"afterok:12?afterok:13", []spec.Dependency{{Type: "afterok", Runs: []string{"12"}}, {Type: "afterok", Runs: []string{"13"}}}, "any"},
		"or of ids":      {"afterok:12:13?afterany:14", []spec.Dependency{{Type: "afterok", Runs: []string{"12"}}, {Type: "afterok", Runs: []string{"13"}}, {Type: "afterany", Runs: []string{"14"}}}, "any"},
		"and":            {"afterok:12:13,afterany:14", []spec.Dependency{{Type: "afterok", Runs: []string{"12", "13"}}, {Type: "afterany", Runs: []string{"14"}}}, ""},
		"or, one known":  {"afterok:12?afterok:999", []spec.Dependency{{Type: "afterok", Runs: []string{"12"}}}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			br, err := buildFrom(t, []string{"-d", tc.dep, "--wrap", "true"}, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := br.req.Spec
			if d := cmp.Diff(tc.want, got.DependsOn); d != "" || got.DependencyPolicy != tc.policy {
				t.Errorf("depends_on (-want +got):\n%s\ndependency_policy %q, want %q", d, got.DependencyPolicy, tc.policy)
			}
		})
	}
}

// srun -l's labels are "%*d: " with the width of the highest task number
// (step_io.c: _wid), as the labeller of a one-off srun's output writes them.
func TestSrunLabelWidth(t *testing.T) {
	var out bytes.Buffer
	l := newLabeler(&out, &out, true, 11)
	for _, n := range []int{0, 10} {
		l.write(api.LogEntry{JobNum: n, Stream: "stdout", Data: []byte("x\n")})
	}
	if got, want := out.String(), " 0: x\n10: x\n"; got != want {
		t.Errorf("labels of 11 tasks: %q, want %q", got, want)
	}
	for n, w := range map[int]int{1: 1, 10: 1, 11: 2, 100: 2, 101: 3} {
		if got := labelWidth(n); got != w {
			t.Errorf("labelWidth(%d) = %d, want %d", n, got, w)
		}
	}
}

// sbatch -W exits with the highest exit code of the job or of an array's
// tasks (sbatch.c: _job_wait); a job ended by a signal counts 1, one
// cancelled before it ran 0, as WEXITSTATUS reads Slurm's exit_code.
func TestSbatchWaitExit(t *testing.T) {
	arr := aRun(63, "wrap").ended(api.StatusFailed, "", 1, "01:00:00", "01:00:09").with(func(r *api.Run) {
		r.Array = &api.ArrayInfo{Indices: "1-3", Count: 3}
		r.ExitCode = nil
	}).build()
	tasks := []api.Run{
		arr,
		aRun(64, "wrap").task(63, 1).ended(api.StatusDone, "", 0, "01:00:00", "01:00:01").build(),
		aRun(65, "wrap").task(63, 2).ended(api.StatusFailed, api.ReasonExitedWithError, 6, "01:00:00", "01:00:02").build(),
		aRun(66, "wrap").task(63, 3).ended(api.StatusFailed, api.ReasonExitedWithError, 4, "01:00:00", "01:00:03").build(),
	}
	for name, tc := range map[string]struct {
		runs []api.Run
		want int
	}{
		"array":     {tasks, 6},
		"completed": {tasks[1:2], 0},
		"exit 4":    {tasks[3:], 4},
		"timeout":   {[]api.Run{aRun(3, "t").ended(api.StatusTerminated, api.ReasonMaxDuration, 143, "01:00:00", "01:01:00").build()}, 1},
		"cancelled while pending": {[]api.Run{aRun(5, "c").with(func(r *api.Run) {
			r.Status, r.Reason, r.FinishedAt = api.StatusTerminated, api.ReasonTerminatedByUser, atPtr("01:00:00")
		}).build()}, 0},
	} {
		if got := waitExit(tc.runs); got != tc.want {
			t.Errorf("%s: sbatch -W exits %d, want %d", name, got, tc.want)
		}
	}
}
