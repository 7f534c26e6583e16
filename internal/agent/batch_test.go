package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

// batchRun runs a batch script through the shim as the agent would hand
// it over: the script as the job's one command, its files named.
func batchRun(t *testing.T, script string, b *api.BatchScript, dir string, env ...string) shimExit {
	t.Helper()
	asg := api.Assignment{Commands: []string{script}, Batch: b}
	env = append(env, "PATH="+os.Getenv("PATH"))
	ex, out := shimRun(t, shimSpec{Script: jobScript(asg), Env: env, Dir: dir, Assignment: asg}, nil)
	if out != "" && !strings.HasPrefix(out, "[stderr]slurmstepd: ") {
		t.Errorf("job log %q: a batch script's output goes to its files", out)
	}
	return ex
}

// The shim runs a batch script as slurmd does: by its interpreter, with
// its arguments, as slurm_script; output and error in the files named,
// truncated (or appended with --open-mode=append); input from --input.
func TestBatchScript(t *testing.T) {
	dir := t.TempDir()
	out, errf, in := filepath.Join(dir, "out-5.txt"), filepath.Join(dir, "err-nm.txt"), filepath.Join(dir, "in.txt")
	if err := os.WriteFile(out, []byte("old content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"out $1 $2 $(basename $0)\"\necho err >&2\nread line || echo no input\nexit 7\n"
	ex := batchRun(t, script, &api.BatchScript{Args: []string{"x y", "z"}, Input: "/dev/null", Output: out, Error: errf}, dir)
	if ex.ExitCode != 7 {
		t.Errorf("exit %+v, want 7", ex)
	}
	if b, _ := os.ReadFile(out); string(b) != "out x y z slurm_script\nno input\n" {
		t.Errorf("output file: %q", b)
	}
	if b, _ := os.ReadFile(errf); string(b) != "err\n" {
		t.Errorf("error file: %q", b)
	}
	// Append mode keeps what was there; one file for both streams;
	// input from a file; no "#!": /bin/sh.
	os.WriteFile(in, []byte("from input\n"), 0o644)
	ex = batchRun(t, "read line; echo \"$line\"; echo two >&2\n", &api.BatchScript{Input: in, Output: out, Append: true}, dir)
	if b, _ := os.ReadFile(out); ex.ExitCode != 0 || string(b) != "out x y z slurm_script\nno input\nfrom input\ntwo\n" {
		t.Errorf("append mode: exit %d, %q", ex.ExitCode, b)
	}
	// An interpreter with its one argument, as the kernel reads "#!".
	ex = batchRun(t, "#!/usr/bin/env bash\necho \"$BASH_VERSION\" | cut -c1 >/dev/null && echo bash\n", &api.BatchScript{Input: "/dev/null", Output: out}, dir)
	if b, _ := os.ReadFile(out); ex.ExitCode != 0 || string(b) != "bash\n" {
		t.Errorf("#!/usr/bin/env bash: exit %d, %q", ex.ExitCode, b)
	}
}

// A file the job cannot open fails it before it starts, in slurmstepd's
// words; the output's directory is not made.
func TestBatchScriptMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "logs", "slurm-5.out")
	ex := batchRun(t, "#!/bin/sh\necho ran\n", &api.BatchScript{Input: "/dev/null", Output: out}, dir)
	want := "slurmstepd: error: Could not open stdout file " + out + ": No such file or directory\n"
	if ex.Reason != exitStartFailed || ex.Message != want {
		t.Errorf("exit %+v, want start_failed %q", ex, want)
	}
	if _, err := os.Stat(filepath.Dir(out)); err == nil {
		t.Error("the output's directory was made")
	}
	ex = batchRun(t, "#!/bin/sh\necho ran\n", &api.BatchScript{Input: filepath.Join(dir, "none"), Output: filepath.Join(dir, "o")}, dir)
	if want := "slurmstepd: error: Could not open stdin file " + filepath.Join(dir, "none") + ": No such file or directory\n"; ex.Message != want {
		t.Errorf("missing input: %+v, want %q", ex, want)
	}
}

// A #!/bin/bash -l script's profile resets PATH; the Slurm commands still
// reach Berth inside it: the job's BASH_ENV, read after the profile, puts
// the links' directory back (issue 14, defect 12). Real bash, a profile
// that resets PATH, a links directory whose squeue and srun answer.
func TestBatchLoginShellKeepsSlurmLinks(t *testing.T) {
	dir := t.TempDir()
	links, home := filepath.Join(dir, "links dir"), filepath.Join(dir, "home")
	for _, d := range []string{links, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"squeue", "srun"} {
		if err := os.WriteFile(filepath.Join(links, name), []byte("#!/bin/sh\necho \"berth "+name+" $*\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("PATH=/usr/bin:/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own_env")
	if err := os.WriteFile(own, []byte("OWN_ENV_READ=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/bash -l\nsqueue -j $SLURM_JOB_ID\nsrun hostname\necho \"own=${OWN_ENV_READ:-no} bash_env=${BASH_ENV:-unset}\"\n"
	out := filepath.Join(dir, "out.txt")
	run := func(t *testing.T, links string, env ...string) string {
		env = append(env, "SLURM_JOB_ID=42", "HOME="+home)
		asg := api.Assignment{Commands: []string{script}, Batch: &api.BatchScript{Input: "/dev/null", Output: out, Links: links}}
		ex, log := shimRun(t, shimSpec{Script: jobScript(asg), Env: append(env, "PATH="+links+":/usr/bin:/bin"), Dir: dir, Assignment: asg}, nil)
		if ex.ExitCode != 0 {
			t.Fatalf("exit %+v: %s", ex, log)
		}
		b, _ := os.ReadFile(out)
		return string(b)
	}
	t.Run("links found", func(t *testing.T) {
		want := "berth squeue -j 42\nberth srun hostname\nown=no bash_env=unset\n"
		if got := run(t, links); got != want {
			t.Errorf("job output %q, want %q", got, want)
		}
	})
	t.Run("the submitter's BASH_ENV still read", func(t *testing.T) {
		want := "berth squeue -j 42\nberth srun hostname\nown=yes bash_env=" + own + "\n"
		if got := run(t, links, "BASH_ENV="+own); got != want {
			t.Errorf("job output %q, want %q", got, want)
		}
	})
	// Without the links' directory the profile's PATH stands: the test
	// sees the reset it guards against.
	t.Run("no links", func(t *testing.T) {
		if got := run(t, ""); strings.Contains(got, "berth squeue") {
			t.Errorf("job output %q: squeue found without the links", got)
		}
	})
}

func TestInterpreter(t *testing.T) {
	for script, want := range map[string]string{
		"#!/bin/bash -l\n":         "/bin/bash|-l",
		"#!/usr/bin/env python3\n": "/usr/bin/env|python3",
		"#! /bin/sh\n":             "/bin/sh",
		"#!/bin/bash -e -x\n":      "/bin/bash|-e -x",
		"echo no shebang\n":        "/bin/sh",
		"#!\n":                     "/bin/sh",
	} {
		if got := strings.Join(interpreter(script), "|"); got != want {
			t.Errorf("%q: %q, want %q", script, got, want)
		}
	}
}
