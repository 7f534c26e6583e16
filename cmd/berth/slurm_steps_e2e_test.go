//go:build linux

package main_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Job steps end to end, through the Slurm links, on a server with two
// agents: srun --pty runs a shell on a terminal on an allocated node, in
// salloc's allocation and on its own; srun -w/-x place a step; standard
// input reaches task 0; stderr stays stderr; a double Ctrl-C stops the
// remote tasks; sacct lists every step.
func TestSlurmSteps(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--agent-name", "st-n1", "--cpus", "2", "--metrics-interval", "200ms")
	srv.startAgent("st-n2", filepath.Join(c.home, "data-n2"), "--cpus", "2", "--metrics-interval", "200ms")
	c.waitNodes(30*time.Second, "st-n1", "st-n2")
	s := newSlurmSite(t, c)

	// srun --pty outside an allocation: a terminal, the input, the status.
	r := s.sh(`printf 'tty; echo $((6*7)) $SLURM_STEP_ID; exit 3\n' | srun --pty bash --norc`)
	if r.code != 3 || !regexp.MustCompile(`/dev/pts/\d+`).MatchString(r.stdout) || !strings.Contains(r.stdout, "42 0") {
		t.Errorf("srun --pty bash: %s", r)
	}
	// Inside salloc: on the allocation's first node, a terminal too.
	r = s.sh(`salloc -Q -N2 bash -c "printf 'test -t 0 && echo term on \$SLURMD_NODENAME\n' | srun --pty bash --norc"`)
	if r.code != 0 || !regexp.MustCompile(`term on st-n[12]`).MatchString(r.stdout) {
		t.Errorf("srun --pty in salloc: %s", r)
	}

	// -w and -x pick the step's node; input goes to task 0; stderr is
	// stderr.
	r = s.sh(`salloc -Q -N2 bash -c '
		srun -w st-n2 bash -c "echo w on \$SLURMD_NODENAME"
		srun -x st-n2 -N1 bash -c "echo x on \$SLURMD_NODENAME"
		echo piped | srun -w st-n1 cat
		srun -N2 bash -c "echo out; echo err >&2"
		srun -w nosuch true; echo rc=$?
		srun -w st-n2 head -c 12000000 /dev/zero | wc -c
		echo | srun -w st-n2 nosuchcmd; echo rc2=$?
		echo fan | srun -N2 cat
		echo gone | srun -N2 --input=none cat; echo file > in.txt; srun -N2 --input=in.txt cat'`)
	// 12 MB from another node: three times what a step host keeps unread.
	// A command not found, with input to forward: said at once.
	for _, want := range []string{"w on st-n2\n", "x on st-n1\n", "piped\n", "rc=1\n", "12000000\n", "rc2=2\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("steps in salloc: no %q in stdout: %s", want, r)
		}
	}
	if strings.Count(r.stdout, "fan\n") != 2 || strings.Contains(r.stdout, "gone") || strings.Count(r.stdout, "file\n") != 2 {
		t.Errorf("input to a two-node step reaches every task: %s", r)
	}
	if strings.Count(r.stdout, "out\n") != 2 || strings.Count(r.stderr, "err\n") != 2 || strings.Contains(r.stdout, "err\n") {
		t.Errorf("stdout and stderr of a two-node step: %s", r)
	}
	if !strings.Contains(r.stderr, "slurmstepd: error: execve(): nosuchcmd: No such file or directory") {
		t.Errorf("a command not found on the attached task: %s", r)
	}
	if !strings.Contains(r.stderr, "srun: error: Unable to create step for job") {
		t.Errorf("srun -w nosuch: %s", r)
	}

	// A double Ctrl-C interrupts the tasks on the other nodes.
	start := time.Now()
	r = s.sh(`salloc -Q -N2 bash -c 'srun -N2 sleep 60 & pid=$!; sleep 3; kill -INT $pid; sleep 0.2; kill -INT $pid; wait $pid; echo rc=$?'`)
	if time.Since(start) > 40*time.Second || !strings.Contains(r.stdout, "rc=130") || !strings.Contains(r.stderr, "srun: interrupt (one more within 1 sec to abort)") {
		t.Errorf("double Ctrl-C on srun (%s): %s", time.Since(start), r)
	}

	// A batch script's steps are recorded: sacct lists them as Slurm does.
	s.write("steps.sh", "#!/bin/bash\n#SBATCH -N2\n#SBATCH -J multi\nsrun -n4 hostname\nsrun -N1 bash -c 'exit 2'\ntrue\n")
	id := strings.TrimSpace(s.must("sbatch --parsable steps.sh"))
	s.waitState(id, 30*time.Second, "COMPLETED")
	out := s.must("sacct -j " + id + " -P -o JobID,JobName,NNodes,NTasks,State,ExitCode,NodeList")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"JobID|JobName|NNodes|NTasks|State|ExitCode|NodeList",
		id + "|multi|2||COMPLETED|0:0|st-n[1-2]",
		id + ".batch|batch|1|1|COMPLETED|0:0|st-n1",
		id + ".0|hostname|2|4|COMPLETED|0:0|st-n[1-2]",
		id + ".1|bash|1|1|FAILED|2:0|st-n1",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("sacct of a job with steps:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	// -X leaves the steps out; the ids parse as tools parse them.
	out = s.must("sacct -X -n -P -j " + id + " -o JobID")
	if strings.TrimSpace(out) != id {
		t.Errorf("sacct -X: %q", out)
	}
	ids := strings.Fields(s.must("sacct -n -P -j " + id + " -o JobID"))
	sort.Strings(ids)
	if len(ids) != 4 {
		t.Errorf("sacct -n -P -o JobID: %v", ids)
	}

	testSstat(t, s)
	testScancelStep(t, s)

	// MaxRSS: the batch step's peak memory, from its cgroup, as Slurm's
	// K/M figures; blank on the job's own line.
	big := strings.TrimSpace(s.must(`sbatch --parsable --mem=500M --wrap 'x=$(head -c 60000000 /dev/zero | tr "\0" a); echo ${#x}'`))
	s.waitState(big, 30*time.Second, "COMPLETED")
	rss := strings.Split(strings.TrimSpace(s.must("sacct -n -P -j "+big+" -o JobID,MaxRSS")), "\n")
	if len(rss) != 2 || rss[0] != big+"|" || !regexp.MustCompile(`^`+big+`\.batch\|\d+(\.\d+)?[KM]$`).MatchString(rss[1]) {
		t.Fatalf("sacct -o JobID,MaxRSS: %q", rss)
	}
	kb := maxRSSKB(t, strings.TrimPrefix(rss[1], big+".batch|"))
	if kb < 60000 || kb > 400000 {
		t.Errorf("MaxRSS of a job holding 60 MB in a shell variable: %d K", kb)
	}
}

// sstat shows a running job's steps from the agents' samples: the first
// numbered step, all of them with -a, one by its ID; Slurm's errors for
// the rest.
func testSstat(t *testing.T, s *slurmSite) {
	id := strings.TrimSpace(s.must(`sbatch --parsable -N2 --wrap 'x=$(head -c 40000000 /dev/zero | tr "\0" a); srun -N2 sleep 30'`))
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out = s.must("sstat -n -P -j " + id + " -o JobID,NTasks,MaxRSS,MaxRSSNode,AveCPU")
		if strings.HasPrefix(out, id+".0|") && !strings.Contains(out, "||") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sstat -j of a running step: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !regexp.MustCompile(`^` + id + `\.0\|2\|\d+(\.\d+)?[KMG]\|st-n[12]\|\d\d:\d\d:\d\d\n$`).MatchString(out) {
		t.Errorf("sstat -j: %q", out)
	}
	if out = s.must("sstat -a -n -P -j " + id + " -o JobID"); out != id+".batch\n"+id+".0\n" {
		t.Errorf("sstat -a: %q", out)
	}
	// The batch step's 40 MB shows once a sample comes after it is all
	// taken (under load the first samples may catch it growing).
	batchRSS := regexp.MustCompile(`^` + id + `\.batch\|(\S+)\|st-n1\n$`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out = s.must("sstat -n -P -j " + id + ".batch -o JobID,MaxRSS,MaxRSSNode")
		m := batchRSS.FindStringSubmatch(out)
		if m != nil && maxRSSKB(t, m[1]) >= 40000 {
			break
		}
		if m == nil || time.Now().After(deadline) {
			t.Errorf("sstat of the batch step holding 40 MB: %q", out)
			break
		}
	}
	// squeue -s lists the running steps, numbered first, then the batch step.
	out = s.must("squeue -s -j " + id)
	if !regexp.MustCompile(`^         STEPID     NAME PARTITION     USER      TIME NODELIST\n +` + id + `\.0 +sleep +\S+ +\S+ +\d+:\d\d st-n\[1-2\]\n +` + id + `\.batch +batch +\S+ +\S+ +\d+:\d\d st-n1\n$`).MatchString(out) {
		t.Errorf("squeue -s -j:\n%s", out)
	}
	if out = s.must("squeue -h -s --steps=" + id + ".0"); !strings.Contains(out, id+".0 ") || strings.Contains(out, "batch") || strings.Contains(out, "STEPID") {
		t.Errorf("squeue -h -s --steps: %q", out)
	}
	if r := s.sh("sstat -j 99999 -o JobID"); r.code != 0 || r.stdout != "JobID        \n------------ \n" || r.stderr != "sstat: error: couldn't get steps for job 99999\n" {
		t.Errorf("sstat of an unknown job: %s", r)
	}
	if r := s.sh("sstat -j " + id + ".7 -o JobID -n"); r.stderr != "sstat: error: StepId="+id+".7 not found running.\n" {
		t.Errorf("sstat of a step not running: %s", r)
	}
	s.must("scancel " + id)
	s.waitState(id, 30*time.Second, "CANCELLED")
	if r := s.sh("sstat -j " + id + " -n"); r.stderr != "sstat: error: No steps running for job "+id+"\n" {
		t.Errorf("sstat of an ended job: %s", r)
	}
	if r := s.sh("sstat"); r.code != 1 || r.stderr != "sstat: error: You didn't give me any jobs to stat.\n" {
		t.Errorf("sstat without jobs: %s", r)
	}
}

// scancel JOB.STEP ends the step, on every node and in srun, and leaves
// the job running; sacct shows the step CANCELLED.
func testScancelStep(t *testing.T, s *slurmSite) {
	r := s.sh(`salloc -Q -N2 bash -c 'srun -N2 sleep 60 & pid=$!; sleep 2; scancel $SLURM_JOB_ID.0; wait $pid; echo rc=$?; srun -N2 true; echo after=$?; echo job=$SLURM_JOB_ID'`)
	m := regexp.MustCompile(`job=(\d+)`).FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(r.stdout, "rc=143\n") || !strings.Contains(r.stdout, "after=0\n") ||
		!regexp.MustCompile(`slurmstepd: error: \*\*\* STEP \d+\.0 ON st-n1 CANCELLED AT \S+ \*\*\*`).MatchString(r.stderr) {
		t.Fatalf("scancel JOB.STEP in salloc: %s", r)
	}
	out := s.must("sacct -n -P -j " + m[1] + ".0," + m[1] + ".1 -o JobID,State")
	if out != m[1]+".0|CANCELLED\n"+m[1]+".1|COMPLETED\n" {
		t.Errorf("sacct of a cancelled step and the next: %q", out)
	}
	// In a batch job, srun's input reaches its own tasks and the other
	// node's.
	bid := strings.TrimSpace(s.must(`sbatch --parsable -N2 --wrap 'echo both | srun -N2 -l cat'`))
	s.waitState(bid, 30*time.Second, "COMPLETED")
	if out := string(mustRead(t, filepath.Join(s.dir, "slurm-"+bid+".out"))); !strings.Contains(out, "0: both\n") || !strings.Contains(out, "1: both\n") {
		t.Errorf("input to a batch job's two-node step:\n%s", out)
	}
	// A step srun runs alone (a one-node batch job) is cancelled too.
	id := strings.TrimSpace(s.must(`sbatch --parsable --wrap 'srun sleep 60 & pid=$!; sleep 2; scancel $SLURM_JOB_ID.0; wait $pid; echo rc=$?'`))
	s.waitState(id, 40*time.Second, "COMPLETED")
	if out := string(mustRead(t, filepath.Join(s.dir, "slurm-"+id+".out"))); !strings.Contains(out, "rc=143\n") || !strings.Contains(out, "CANCELLED AT") {
		t.Errorf("scancel of a batch job's local step:\n%s", out)
	}
	if r := s.sh("scancel " + id + ".7"); !strings.Contains(r.stderr, "scancel: error: Kill job error on job step id "+id+".7: ") {
		t.Errorf("scancel of no such step: %s", r)
	}
}

// maxRSSKB reads sacct's MaxRSS (1234K, 56.50M) in KiB.
func maxRSSKB(t *testing.T, v string) int {
	t.Helper()
	unit := 1.0
	switch {
	case strings.HasSuffix(v, "M"):
		unit = 1024
	case strings.HasSuffix(v, "G"):
		unit = 1024 * 1024
	}
	f, err := strconv.ParseFloat(strings.TrimRight(v, "KMG"), 64)
	if err != nil {
		t.Fatalf("MaxRSS %q: %v", v, err)
	}
	return int(f * unit)
}

// A restart of the server in the middle of a two-node step loses none of
// its output and doubles none: srun and the step host wait for the server
// and go on from what srun had read.
func TestSlurmStepSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := c.startServer("--listen", addr, "--agent-name", "rs-n1", "--cpus", "2")
	srv.startAgent("rs-n2", filepath.Join(c.home, "data-n2"), "--cpus", "2")
	c.waitNodes(30*time.Second, "rs-n1", "rs-n2")
	s := newSlurmSite(t, c)
	const lines = 60
	s.write("long.sh", fmt.Sprintf("#!/bin/bash\n#SBATCH -N2\nsrun -l bash -c 'for i in $(seq 1 %d); do echo line $i; sleep 0.1; done'\n", lines))
	id := strings.TrimSpace(s.must("sbatch --parsable long.sh"))
	outFile := filepath.Join(s.dir, "slurm-"+id+".out")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(outFile)
		if strings.Contains(string(b), "1: line 5\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the remote task's output did not come: %q", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv.restart()
	s.waitState(id, 60*time.Second, "COMPLETED")
	out := string(mustRead(t, outFile))
	for rank := 0; rank < 2; rank++ {
		for i := 1; i <= lines; i++ {
			if n := strings.Count(out, fmt.Sprintf("%d: line %d\n", rank, i)); n != 1 {
				t.Errorf("task %d's line %d is in the output %d times, want once", rank, i, n)
			}
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
	if got := s.must("sacct -n -P -j " + id + ".0 -o JobID,State,NodeList"); got != id+".0|COMPLETED|rs-n[1-2]\n" {
		t.Errorf("sacct of the step: %q", got)
	}
}
