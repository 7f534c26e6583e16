package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/slurm"
)

// A #!/bin/bash -l script's profile resets PATH; the Slurm commands still
// reach Berth inside it: the job's BASH_ENV, read after the profile, puts
// the links' directory back (issue 14, defect 12). Real bash, a profile
// that resets PATH, a links directory whose squeue and srun answer.
func TestLoginShellKeepsSlurmLinks(t *testing.T) {
	dir := t.TempDir()
	links, home, jobDir := filepath.Join(dir, "links dir"), filepath.Join(dir, "home"), filepath.Join(dir, "job")
	for _, d := range []string{links, home, jobDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"squeue", "srun"} {
		if err := os.WriteFile(filepath.Join(links, name), []byte("#!/bin/sh\necho \"berth "+name+" $*\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The profile resets PATH, as /etc/profile does for a login shell.
	if err := os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("PATH=/usr/bin:/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own_env")
	if err := os.WriteFile(own, []byte("OWN_ENV_READ=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/bash -l\n#SBATCH -o out.txt\nsqueue -j $SLURM_JOB_ID\nsrun hostname\necho \"own=${OWN_ENV_READ:-no} bash_env=${BASH_ENV:-unset}\"\n"
	run := func(t *testing.T, links string, env ...string) string {
		cmd, err := slurm.ParseSbatchArgs([]string{"-D", dir, "job.sh"})
		if err != nil {
			t.Fatal(err)
		}
		job, err := slurm.BuildBatchJob(cmd, []byte(script), slurm.SubmitContext{Cwd: dir, Now: time.Now(), ScriptName: "job.sh"})
		if err != nil {
			t.Fatal(err)
		}
		s := submitter{user: "alice", group: "users", cwd: dir, now: time.Now(), links: links}
		br, err := buildBatchRun(job, "job.sh", s, func(uint32) bool { return true }, []string{"berth"})
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "SLURM_JOB_ID=42", "HOME="+home, "PATH="+links+":/usr/bin:/bin", "BERTH_JOB_DIR="+jobDir)
		if log, code := bash(t, strings.Join(br.req.Spec.Commands, "\n"), env, dir); code != 0 {
			t.Fatalf("exit %d: %s", code, log)
		}
		out, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
		return string(out)
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

// Only a login shell's script gets the BASH_ENV file.
func TestLoginPathOnlyForLoginShells(t *testing.T) {
	for script, want := range map[string]bool{
		"#!/bin/bash -l\n":      true,
		"#!/bin/bash --login\n": true,
		"#!/bin/bash -el\n":     true,
		"#!/bin/bash\n":         false,
		"#!/bin/bash -e\n":      false,
		"#!/bin/sh\n":           false,
		"echo no shebang\n":     false,
	} {
		if got := loginPath([]byte(script), "/opt/berth/bin") != ""; got != want {
			t.Errorf("%q: BASH_ENV file %v, want %v", script, got, want)
		}
	}
}
