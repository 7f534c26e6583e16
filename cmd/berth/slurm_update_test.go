//go:build linux

package main_test

import (
	"strings"
	"testing"
	"time"
)

// scontrol update on a running job: TimeLimit (absolute, +=, =-) and
// Comment reach it and scontrol show job says so; Slurm's refusals are
// Slurm's words. (The jobs' deadline itself: internal/server's
// TestUpdateTimeLimitRunning.)
func TestSlurmScontrolUpdateRunning(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "upd-n1", "--cpus", "2")
	c.waitNodes(30*time.Second, "upd-n1")
	s := newSlurmSite(t, c)
	s.write("long.sh", "#!/bin/bash\n#SBATCH --time=10\nfor i in $(seq 600); do sleep 0.1; done\n")
	id := strings.TrimSpace(s.must("sbatch --parsable long.sh"))
	s.waitState(id, 30*time.Second, "RUNNING")
	limit := func() string {
		for _, f := range strings.Fields(s.must("scontrol show job " + id)) {
			if v, ok := strings.CutPrefix(f, "TimeLimit="); ok {
				return v
			}
		}
		return ""
	}
	for _, step := range []struct{ update, want string }{
		{"TimeLimit=20", "00:20:00"},
		{"TimeLimit+=30", "00:50:00"},
		{"TimeLimit=-5", "00:45:00"},
		{"TimeLimit-=1:00", "00:44:00"},
	} {
		if r := s.sh("scontrol update JobId=" + id + " " + step.update); r.code != 0 {
			t.Fatalf("scontrol update %s: %s", step.update, r)
		}
		if got := limit(); got != step.want {
			t.Errorf("after %s: TimeLimit=%s, want %s", step.update, got, step.want)
		}
	}
	if r := s.sh("scontrol update JobId=" + id + " TimeLimit-=60"); r.code != 1 ||
		!strings.Contains(r.stderr, "TimeLimit decrement larger than current time limit (60 > 44)") {
		t.Errorf("a decrement past zero: %s", r)
	}
	s.must("scontrol update JobId=" + id + " 'Comment=nightly run'")
	if out := s.must("scontrol show job " + id); !strings.Contains(out, "Comment=nightly run") {
		t.Errorf("the comment is not shown:\n%s", out)
	}
	if st := s.sacctStates(id)[id]; st[0] != "RUNNING" {
		t.Errorf("after the updates the job is %v, want RUNNING", st)
	}
	s.must("scancel " + id)
	s.waitState(id, 30*time.Second, "CANCELLED")
	if r := s.sh("scontrol update JobId=" + id + " TimeLimit=5"); r.code != 1 ||
		!strings.Contains(r.stderr, "slurm_update error: Job/step already completing or completed") {
		t.Errorf("update of an ended job: %s", r)
	}
}
