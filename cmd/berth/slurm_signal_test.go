//go:build linux

package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scancel --signal=USR1 -b reaches the batch shell and leaves the job
// running: its trap writes to the output file and the job ends as it says.
func TestSlurmScancelSignal(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "sig-n1", "--cpus", "2")
	c.waitNodes(30*time.Second, "sig-n1")
	s := newSlurmSite(t, c)
	s.write("trap.sh", "#!/bin/bash\n#SBATCH --time=5\ntrap 'echo got USR1; exit 0' USR1\necho ready\nfor i in $(seq 300); do sleep 0.1; done\nexit 4\n")
	id := strings.TrimSpace(s.must("sbatch --parsable trap.sh"))
	out := filepath.Join(s.dir, "slurm-"+id+".out")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(out); string(b) == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never said ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.sh("scancel -b --signal=USR1 " + id); r.code != 0 {
		t.Fatalf("scancel --signal: %s", r)
	}
	if st := s.waitState(id, 30*time.Second, "COMPLETED", "FAILED", "CANCELLED"); st != [2]string{"COMPLETED", "0:0"} {
		t.Errorf("after USR1: %v, want COMPLETED 0:0", st)
	}
	if b, _ := os.ReadFile(out); string(b) != "ready\ngot USR1\n" {
		t.Errorf("output %q", b)
	}
	if r := s.sh("scancel --signal=FOO " + id); r.code == 0 {
		t.Errorf("an unknown signal was accepted: %s", r)
	}
}
