//go:build linux

package main_test

import (
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// A batch job's Slurm environment and output file are the server's, made
// at placement with slurm.BatchEnvironment and slurm.ExpandFilename: the
// variables a real Slurm 22.05 job gets (../shared/slurm-golden
// job-env.txt: every name but what only slurmd's own process knows), the
// -o pattern expanded with the job's ID and name; a -o directory that
// does not exist fails the job, as slurmd does.
func TestSlurmAppliedAtPlacement(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "place-n1", "--cpus", "2")
	c.waitNodes(30*time.Second, "place-n1")
	s := newSlurmSite(t, c)
	id := strings.TrimSpace(s.must(`sbatch --parsable -J envjob -o 'env-%x-%j.out' --wrap 'env | grep -E "^SLURM" | sort'`))
	if st := s.waitState(id, 60*time.Second, "COMPLETED", "FAILED"); st != [2]string{"COMPLETED", "0:0"} {
		t.Fatalf("env job: %v", st)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "env-envjob-"+id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
		names = append(names, k)
	}
	golden := mustRead(t, "../../internal/slurm/testdata/golden/job-env.txt")
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(golden)), "\n") {
		k, _, _ := strings.Cut(l, "=")
		switch k {
		case "SLURM_CONF", "SLURM_TASK_PID", "SLURM_WORKING_CLUSTER", "SLURM_MEM_PER_CPU":
			continue // slurmd's own process, slurm.conf, DefMemPerCPU
		}
		want = append(want, k)
	}
	want = append(want, "SLURM_RESTART_COUNT")
	sort.Strings(want)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("the job's SLURM variables:\n got %v\nwant %v", names, want)
	}
	me, _ := user.Current()
	for k, v := range map[string]string{"SLURM_JOB_ID": id, "SLURM_JOBID": id, "SLURM_JOB_NAME": "envjob", "SLURM_JOB_NODELIST": "place-n1",
		"SLURMD_NODENAME": "place-n1", "SLURM_CLUSTER_NAME": "berth", "SLURM_JOB_PARTITION": "berth", "SLURM_TASKS_PER_NODE": "1",
		"SLURM_JOB_CPUS_PER_NODE": "1", "SLURM_CPUS_ON_NODE": "1", "SLURM_SUBMIT_DIR": s.dir, "SLURM_JOB_ACCOUNT": "main",
		"SLURM_JOB_USER": me.Username, "SLURM_JOB_UID": me.Uid, "SLURM_RESTART_COUNT": "0", "SLURM_NODEID": "0"} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}

	// The output's directory is not made: the job fails, as in Slurm.
	id = strings.TrimSpace(s.must(`sbatch --parsable -o 'nodir/%j.out' --wrap 'echo ran'`))
	if st := s.waitState(id, 60*time.Second, "COMPLETED", "FAILED"); st[0] != "FAILED" {
		t.Errorf("a job whose -o directory is missing: %v, want FAILED", st)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "nodir")); err == nil {
		t.Error("the missing directory was made")
	}
	if log, _ := c.berthCombined("logs", id); !strings.Contains(log, "slurmstepd: error: Could not open stdout file "+filepath.Join(s.dir, "nodir", id+".out")+": No such file or directory") {
		t.Errorf("the job's log: %q, want slurmstepd's words", log)
	}
}
