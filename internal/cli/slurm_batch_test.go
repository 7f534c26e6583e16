package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
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
	arr := convtest.ARun(63, "wrap").Ended(api.StatusFailed, "", 1, "01:00:00", "01:00:09").With(func(r *api.Run) {
		r.Array = &api.ArrayInfo{Indices: "1-3", Count: 3}
		r.ExitCode = nil
	}).Build()
	tasks := []api.Run{
		arr,
		convtest.ARun(64, "wrap").Task(63, 1).Ended(api.StatusDone, "", 0, "01:00:00", "01:00:01").Build(),
		convtest.ARun(65, "wrap").Task(63, 2).Ended(api.StatusFailed, api.ReasonExitedWithError, 6, "01:00:00", "01:00:02").Build(),
		convtest.ARun(66, "wrap").Task(63, 3).Ended(api.StatusFailed, api.ReasonExitedWithError, 4, "01:00:00", "01:00:03").Build(),
	}
	for name, tc := range map[string]struct {
		runs []api.Run
		want int
	}{
		"array":     {tasks, 6},
		"completed": {tasks[1:2], 0},
		"exit 4":    {tasks[3:], 4},
		"timeout":   {[]api.Run{convtest.ARun(3, "t").Ended(api.StatusTerminated, api.ReasonMaxDuration, 143, "01:00:00", "01:01:00").Build()}, 1},
		"cancelled while pending": {[]api.Run{convtest.ARun(5, "c").With(func(r *api.Run) {
			r.Status, r.Reason, r.FinishedAt = api.StatusTerminated, api.ReasonTerminatedByUser, convtest.AtPtr("01:00:00")
		}).Build()}, 0},
	} {
		if got := waitExit(tc.runs); got != tc.want {
			t.Errorf("%s: sbatch -W exits %d, want %d", name, got, tc.want)
		}
	}
}
