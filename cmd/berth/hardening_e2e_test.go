//go:build linux

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Batch scripts of every size up to Slurm's max_script_size run through
// sbatch, end to end: a 130 KB one (over Linux's 128 KiB cap on one
// argument, through which the script used to travel: the job failed with
// "argument list too long") runs whole; a 5 MB one is refused as
// slurmctld refuses it, and nothing is stored.
func TestSlurmScriptSizes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "big-n1", "--cpus", "2")
	c.waitNodes(30*time.Second, "big-n1")
	s := newSlurmSite(t, c)

	body := strings.Repeat("# "+strings.Repeat("x", 98)+"\n", 1340) // 130 KiB of comments
	s.write("big.sh", "#!/bin/bash\n"+body+`echo "ran $(wc -c <"$0") bytes"`+"\n")
	id := strings.TrimSpace(s.must("sbatch --parsable big.sh"))
	if st := s.waitState(id, 60*time.Second, "COMPLETED", "FAILED"); st != [2]string{"COMPLETED", "0:0"} {
		t.Fatalf("big.sh: %v\n%s", st, s.sh("cat slurm-"+id+".out").stdout)
	}
	size := len("#!/bin/bash\n"+body) + len(`echo "ran $(wc -c <"$0") bytes"`+"\n")
	if out := mustRead(t, filepath.Join(s.dir, "slurm-"+id+".out")); string(out) != fmt.Sprintf("ran %d bytes\n", size) {
		t.Errorf("slurm-%s.out: %q, want the script run whole (%d bytes)", id, out, size)
	}

	huge := "#!/bin/bash\n" + strings.Repeat("# "+strings.Repeat("y", 98)+"\n", 50000) + "echo never\n" // 5 MB
	if err := os.WriteFile(filepath.Join(s.dir, "huge.sh"), []byte(huge), 0o644); err != nil {
		t.Fatal(err)
	}
	before := s.must("squeue -h -t all -o %i")
	r := s.sh("sbatch huge.sh")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long\n"+
		fmt.Sprintf("sbatch: error: the batch script is %d bytes (", len(huge))) || r.stdout != "" {
		t.Errorf("sbatch huge.sh: %s", r)
	}
	if after := s.must("squeue -h -t all -o %i"); after != before {
		t.Errorf("a refused script left a job: before %q, after %q", before, after)
	}
}
