//go:build linux

package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scancel --signal=SIG without -b or -f reaches the job's srun steps and
// not its batch shell, as in Slurm 22.05; with -f (--full) the batch shell
// gets it too.
func TestSlurmScancelSignalStepsOnly(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "sso-n1", "--cpus", "2")
	c.waitNodes(30*time.Second, "sso-n1")
	s := newSlurmSite(t, c)
	s.write("steps.sh", `#!/bin/bash
#SBATCH --time=5
trap 'echo shell got USR1' USR1
srun bash -c 'trap "echo step got USR1; exit 3" USR1; echo step ready; for i in $(seq 300); do sleep 0.1; done; exit 4'
echo "step ended $?"
trap 'echo shell got USR2; exit 0' USR2
echo waiting
for i in $(seq 300); do sleep 0.1; done
exit 5
`)
	id := strings.TrimSpace(s.must("sbatch --parsable steps.sh"))
	out := filepath.Join(s.dir, "slurm-"+id+".out")
	waitFor := func(line string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if b, _ := os.ReadFile(out); strings.Contains(string(b), line+"\n") {
				return
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(out)
				t.Fatalf("the job never said %q; output %q", line, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("step ready")
	if r := s.sh("scancel --signal=USR1 " + id); r.code != 0 {
		t.Fatalf("scancel --signal=USR1: %s", r)
	}
	waitFor("waiting")
	// Without a step running, a steps-only signal reaches nothing.
	if r := s.sh("scancel --signal=USR2 " + id); r.code != 0 {
		t.Fatalf("scancel --signal=USR2: %s", r)
	}
	time.Sleep(time.Second)
	if r := s.sh("scancel -f --signal=USR2 " + id); r.code != 0 {
		t.Fatalf("scancel -f --signal=USR2: %s", r)
	}
	if st := s.waitState(id, 60*time.Second, "COMPLETED", "FAILED", "CANCELLED"); st != [2]string{"COMPLETED", "0:0"} {
		t.Errorf("after USR2 with -f: %v, want COMPLETED 0:0", st)
	}
	// Besides these lines the output holds the shells' reports of a
	// sleep the signal ended, and srun's of its task's exit.
	b, _ := os.ReadFile(out)
	var got []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " got ") || strings.HasPrefix(l, "step ") || l == "waiting" {
			got = append(got, l)
		}
	}
	if want := "step ready|step got USR1|step ended 3|waiting|shell got USR2"; strings.Join(got, "|") != want {
		t.Errorf("output %q: the step alone should get USR1, the shell USR2 only with -f", b)
	}
}
