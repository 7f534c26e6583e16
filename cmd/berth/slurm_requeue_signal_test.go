//go:build linux

package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// slurmBaseStates are the states real sacct prints (job_state_string of a
// base state; "CANCELLED by UID" starts with one).
var slurmBaseStates = map[string]bool{
	"PENDING": true, "RUNNING": true, "SUSPENDED": true, "COMPLETED": true, "CANCELLED": true, "FAILED": true,
	"TIMEOUT": true, "NODE_FAIL": true, "PREEMPTED": true, "BOOT_FAIL": true, "DEADLINE": true, "OUT_OF_MEMORY": true,
	"REQUEUED": true, "RESIZING": true, "REVOKED": true,
}

// checkpointJob is the pattern of tools that checkpoint on Slurm's warning
// signal: --signal=USR2@T (no B:: the steps get it, not the batch shell);
// the step traps it, saves where it is, requeues its own job and exits;
// the next run (SLURM_RESTART_COUNT=1) resumes from the checkpoint. With
// -t 1 and @50 the warning comes 10 s in.
const checkpointJob = `#!/bin/bash
#SBATCH -t 1
#SBATCH --signal=USR2@50
#SBATCH -J ckpt
trap 'echo "batch shell got USR2" >>events.log' USR2
echo "run ${SLURM_RESTART_COUNT:-unset}" >>events.log
srun bash -c '
  n=$(cat ckpt 2>/dev/null || echo 0)
  if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then echo "resumed at $n" >>events.log; exit 0; fi
  trap "echo \$n >ckpt; echo \"step got USR2 at \$n\" >>events.log; scontrol requeue \$SLURM_JOB_ID; exit 0" USR2
  while :; do n=$((n+1)); sleep 0.5; done'
`

// TestSlurmSignalCheckpointRequeue plays a Slurm client end to end: the
// warning signal reaches the srun step and not the batch shell, the step
// requeues the job from its trap, the second run sees
// SLURM_RESTART_COUNT=1 and resumes from the checkpoint; a poller runs
// sacct throughout and sees only Slurm's states.
func TestSlurmSignalCheckpointRequeue(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "ckpt-n1", "--cpus", "2")
	c.waitNodes(30*time.Second, "ckpt-n1")
	s := newSlurmSite(t, c)
	s.write("ckpt.sh", checkpointJob)
	a := strings.TrimSpace(s.must("sbatch --parsable ckpt.sh"))
	b := strings.TrimSpace(s.must("sbatch --parsable -t 1 --wrap 'sleep 2'"))

	// The poller: what a workflow tool runs every few seconds.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[string]bool{}
	var odd []string
	var polls int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cmd := exec.CommandContext(ctx, filepath.Join(s.shims, "sacct"), "-o", "JobID,State,NodeList", "--parsable2", "-j", a, "-j", b)
			cmd.Env, cmd.Dir = s.env(), s.dir
			out, err := cmd.Output()
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			polls++
			if err != nil {
				odd = append(odd, "sacct failed: "+err.Error())
			}
			for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Split(line, "|")
				switch {
				case i == 0 && line != "JobID|State|NodeList":
					odd = append(odd, "header "+line)
				case i == 0:
				case len(f) != 3:
					odd = append(odd, "line "+line)
				default:
					st, _, _ := strings.Cut(f[1], " ")
					if !slurmBaseStates[st] {
						odd = append(odd, line)
					}
					if f[0] == a {
						seen[st] = true
					}
				}
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { stop(); wg.Wait() })

	if st := s.waitState(a, 90*time.Second, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"); st != [2]string{"COMPLETED", "0:0"} {
		t.Errorf("job %s: %v, want COMPLETED 0:0 (its second run)", a, st)
	}
	s.waitState(b, 30*time.Second, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
	// The poller's own look at the end: a poll in flight when it stops is
	// dropped, and on a loaded machine one poll can outlast the waits above.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		done := seen["COMPLETED"]
		mu.Unlock()
		if done {
			break
		}
	}
	stop()
	wg.Wait()

	ev, err := os.ReadFile(filepath.Join(s.dir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	events := string(ev)
	ck, _ := os.ReadFile(filepath.Join(s.dir, "ckpt"))
	n := strings.TrimSpace(string(ck))
	for _, want := range []string{"run 0\n", "step got USR2 at " + n + "\n", "run 1\n", "resumed at " + n + "\n"} {
		if n == "" || !strings.Contains(events, want) {
			t.Errorf("events.log lacks %q (checkpoint %q):\n%s", want, n, events)
		}
	}
	if strings.Contains(events, "batch shell got") {
		t.Errorf("the batch shell got the warning meant for the steps:\n%s", events)
	}
	if i, j := strings.Index(events, "step got USR2"), strings.Index(events, "run 1"); i < 0 || j < i {
		t.Errorf("the second run did not follow the requeue:\n%s", events)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(odd) > 0 {
		t.Errorf("sacct printed what Slurm's does not (%d polls):\n%s", polls, strings.Join(odd, "\n"))
	}
	if !seen["RUNNING"] || !seen["COMPLETED"] {
		t.Errorf("the poller saw job %s in %v over %d polls; want RUNNING and COMPLETED among them", a, seen, polls)
	}
	t.Logf("job %s states seen by %d sacct polls: %v; events:\n%s", a, polls, seen, events)
}

// TestSlurmSignalReachesEveryNodesSteps: --signal without B: reaches every
// task of a two-node step, on both nodes (the second one's through its
// step host), and not the batch shell.
func TestSlurmSignalReachesEveryNodesSteps(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--agent-name", "sg-n1", "--cpus", "2")
	srv.startAgent("sg-n2", filepath.Join(c.home, "data-n2"), "--cpus", "2")
	c.waitNodes(30*time.Second, "sg-n1", "sg-n2")
	s := newSlurmSite(t, c)
	s.write("two.sh", `#!/bin/bash
#SBATCH -N2 -t 1 --signal=USR2@55
trap 'echo batch shell >>sig.log' USR2
srun -N2 bash -c 'trap "echo task \$SLURM_PROCID on \$SLURMD_NODENAME >>sig.log; exit 0" USR2; while :; do sleep 0.2; done'
`)
	// With B:, the batch shell only: the second node's step host, the
	// job's main process there, must not die of it (HUP would end a Go
	// program; USR1 and USR2 it ignores).
	s.write("batch.sh", `#!/bin/bash
#SBATCH -N2 -t 1 --signal=B:HUP@55
trap 'echo batch shell >>b.log' HUP
srun -N2 bash -c 'trap "echo task \$SLURM_PROCID >>b.log" HUP; sleep 8; echo done $SLURM_PROCID >>b.log'
`)
	id := strings.TrimSpace(s.must("sbatch --parsable two.sh"))
	idB := strings.TrimSpace(s.must("sbatch --parsable batch.sh"))
	if st := s.waitState(id, 60*time.Second, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"); st != [2]string{"COMPLETED", "0:0"} {
		t.Errorf("job %s: %v, want COMPLETED 0:0 (its step ends on the signal)", id, st)
	}
	if st := s.waitState(idB, 60*time.Second, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"); st != [2]string{"COMPLETED", "0:0"} {
		t.Errorf("job %s (B:): %v, want COMPLETED 0:0", idB, st)
	}
	bl, _ := os.ReadFile(filepath.Join(s.dir, "b.log"))
	gotB := strings.Split(strings.TrimSpace(string(bl)), "\n")
	sort.Strings(gotB)
	if want := []string{"batch shell", "done 0", "done 1"}; strings.Join(gotB, "|") != strings.Join(want, "|") {
		t.Errorf("with B:, b.log %q, want %q (the batch shell only; the step runs on)", gotB, want)
	}
	b, _ := os.ReadFile(filepath.Join(s.dir, "sig.log"))
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	sort.Strings(got)
	if want := []string{"task 0 on sg-n1", "task 1 on sg-n2"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("sig.log %q, want %q (every task, not the batch shell)", got, want)
	}
}
