package slurmconv

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

func TestRunNameFor(t *testing.T) {
	for in, want := range map[string]string{
		"train.sh": "train", "wrap": "wrap", "My_Job.v2": "my-job-v2", "1job": "job-1job", "x": "job-x", "": "job",
		"___": "job", strings.Repeat("a", 60): strings.Repeat("a", 41), "job.sbatch": "job", ".sh": "sh",
	} {
		if got := RunName(in); got != want {
			t.Errorf("RunName(%q) = %q, want %q", in, got, want)
		}
		if got := RunName(in); !(len(got) >= 2 && len(got) <= 41) {
			t.Errorf("RunName(%q) = %q: not a run name", in, got)
		}
	}
}

// buildFrom parses an sbatch command line and script as sbatch would and
// builds the submission.
func buildFrom(t *testing.T, args []string, script string, env []string) (*Batch, error) {
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
	s := Submitter{User: "alice", Group: "users", UID: 1000, GID: 100, Host: "login1", Cwd: "/home/alice/work", Env: env, Now: now}
	known := func(id uint32) bool { return id != 999 }
	return BuildBatch(job, cmd.Script, s, known, []string{"berth", "gpu", "cpu"})
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
			r := br.Req.Spec.Resources
			got := want{nodes: br.Req.Spec.Nodes, cpus: r.CPU.Count.Min}
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
// its typed Slurm part (no string tags), gets the batch variables sbatch gives, and the Submitter's
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
	ts := br.Req.Spec
	if !br.Req.Hold {
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
	// Submitter's own never pass.
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
		t.Errorf("layout and Submitter (-want +got):\n%s", d)
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
	if err != nil || len(br.Req.Spec.DependsOn) != 0 {
		t.Errorf("afterok on an unknown job: %v, depends_on %v", err, br)
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
		if got := br.Req.Spec.Signal; got != tc.want {
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
	if c := br.Req.Spec.Commands; len(c) != 1 || !strings.Contains(c[0], script(130_000)) {
		t.Errorf("130 KB: the script is not in the commands whole")
	}
	_, err = buildFrom(t, []string{"job.sh"}, script(5_000_000), nil)
	var ce *slurm.CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 1 || len(ce.Stderr) != 2 ||
		ce.Stderr[0] != "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long" ||
		!strings.HasPrefix(ce.Stderr[1], "sbatch: error: the batch script is 5000025 bytes (") || !strings.Contains(ce.Stderr[1], "at most 4194304, Slurm's default max_script_size (BERTH_MAX_SCRIPT_SIZE raises it") {
		t.Errorf("5 MB: %v, want Slurm's refusal", err)
	}
	l := spec.DefaultLimits
	l.ScriptBytes = 8 << 20 // as BERTH_MAX_SCRIPT_SIZE=8MB sets it
	cmd, _ := slurm.ParseSbatchArgs([]string{"job.sh"})
	job, err := slurm.BuildBatchJob(cmd, []byte(script(5_000_000)), slurm.SubmitContext{Cwd: "/home/alice/work", ScriptName: "job.sh"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildBatch(job, "job.sh", Submitter{User: "alice", Cwd: "/home/alice/work", Limits: l}, nil, nil); err != nil {
		t.Errorf("5 MB with BERTH_MAX_SCRIPT_SIZE=8MB: %v", err)
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
			got := br.Req.Spec
			if d := cmp.Diff(tc.want, got.DependsOn); d != "" || got.DependencyPolicy != tc.policy {
				t.Errorf("depends_on (-want +got):\n%s\ndependency_policy %q, want %q", d, got.DependencyPolicy, tc.policy)
			}
		})
	}
}
