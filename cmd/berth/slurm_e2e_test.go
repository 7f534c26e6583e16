//go:build linux

package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slurmSite is a cluster seen through Berth's Slurm commands: links named
// sbatch, squeue… to the binary under test (argv[0] dispatch), on the PATH
// of the commands and so of the jobs, and a submit directory.
type slurmSite struct {
	c     *cluster
	shims string
	dir   string
}

func newSlurmSite(t *testing.T, c *cluster) *slurmSite {
	t.Helper()
	s := &slurmSite{c: c, shims: filepath.Join(c.home, "shims"), dir: filepath.Join(c.home, "work")}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"install-slurm-shims", s.shims}
	if leanBin != "" {
		// The links go to the lean binary, which hands srun, salloc and
		// the rest to the full one: every Slurm test runs both.
		args = append(args, "--lean-binary", leanBin)
	}
	if out := c.mustBerth(args...); !strings.Contains(out, filepath.Join(s.shims, "sbatch")+" -> ") {
		t.Fatalf("install-slurm-shims: %q", out)
	}
	return s
}

func (s *slurmSite) env() []string {
	return s.c.env("PATH=" + s.shims + ":" + os.Getenv("PATH"))
}

// sh runs a shell command line in the submit directory, as a user at a
// login node would.
func (s *slurmSite) sh(line string) result {
	s.c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Env = s.env()
	cmd.Dir = s.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		s.c.t.Fatalf("%s: timed out", line)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.c.t.Fatalf("%s: %v", line, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

func (s *slurmSite) must(line string) string {
	s.c.t.Helper()
	r := s.sh(line)
	if r.code != 0 {
		s.c.t.Fatalf("%s: %s", line, r)
	}
	return r.stdout
}

func (s *slurmSite) write(name, text string) {
	s.c.t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o755); err != nil {
		s.c.t.Fatal(err)
	}
}

// sacctStates is `sacct -X -P -n -o JobID,State,ExitCode` as a map, parsed
// the way tools parse Slurm's.
func (s *slurmSite) sacctStates(jobs string) map[string][2]string {
	s.c.t.Helper()
	out := s.must("sacct -X -P -n -o JobID,State,ExitCode -j " + jobs)
	m := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 3 {
			s.c.t.Fatalf("sacct -P line %q: want 3 fields", line)
		}
		m[f[0]] = [2]string{f[1], f[2]}
	}
	return m
}

// waitState polls sacct until job is in one of the states.
func (s *slurmSite) waitState(job string, timeout time.Duration, states ...string) [2]string {
	s.c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last [2]string
	for time.Now().Before(deadline) {
		last = s.sacctStates(job)[job]
		for _, st := range states {
			if strings.HasPrefix(last[0], st) {
				return last
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.c.t.Fatalf("job %s: %v after %s, want one of %v\n%s", job, last, timeout, states, s.sh("squeue -t all; sacct").stdout)
	return last
}

// squeueStates is `squeue -h -o "%i %T"` (or with -t all) parsed.
func (s *slurmSite) squeueStates(args string) map[string]string {
	s.c.t.Helper()
	out := s.must(`squeue -h -o "%i %T" ` + args)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			s.c.t.Fatalf("squeue line %q: want 2 fields", line)
		}
		m[f[0]] = f[1]
	}
	return m
}

// The Slurm front end, end to end: scripts with #SBATCH directives, their
// output files, dependency chains, arrays, holds, cancellation, and the
// outputs tools parse.
func TestSlurmFrontEnd(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--agent-name", "sl-n1", "--cpus", "4")
	srv.startAgent("sl-n2", filepath.Join(c.home, "data-n2"), "--cpus", "2")
	c.waitNodes(30*time.Second, "sl-n1", "sl-n2")
	s := newSlurmSite(t, c)

	// A script with directives: --parsable prints the id, the output goes
	// to slurm-%j.out in the submit directory, the arguments pass through.
	s.write("hello.sh", `#!/bin/bash
#SBATCH --job-name=hello
#SBATCH --time=5
#SBATCH --cpus-per-task=2
echo "hello $SLURM_JOB_ID $SLURM_JOB_NAME cpus=$SLURM_CPUS_PER_TASK dir=$SLURM_SUBMIT_DIR args=$*"
echo "to stderr" >&2
`)
	id := strings.TrimSpace(s.must("sbatch --parsable hello.sh one two"))
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch --parsable printed %q, want a job id", id)
	}
	if st := s.waitState(id, 30*time.Second, "COMPLETED", "FAILED"); st != [2]string{"COMPLETED", "0:0"} {
		t.Fatalf("hello.sh: %v", st)
	}
	out, err := os.ReadFile(filepath.Join(s.dir, "slurm-"+id+".out"))
	if want := fmt.Sprintf("hello %s hello cpus=2 dir=%s args=one two\nto stderr\n", id, s.dir); err != nil || string(out) != want {
		t.Errorf("slurm-%s.out: %q (%v), want %q", id, out, err, want)
	}
	if r := s.sh("sbatch hello.sh"); r.code != 0 || !regexp.MustCompile(`^Submitted batch job \d+\n$`).MatchString(r.stdout) {
		t.Errorf("sbatch: %s", r)
	}

	// The chain every Slurm user writes: b runs after a succeeded.
	s.write("a.sh", "#!/bin/sh\nsleep 2\necho a done > a.out\n")
	s.write("b.sh", "#!/bin/sh\ncat a.out\necho b ran\n")
	r := s.sh("sbatch --dependency=afterok:$(sbatch --parsable a.sh) b.sh")
	m := regexp.MustCompile(`^Submitted batch job (\d+)\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("the chain: %s", r)
	}
	b := m[1]
	a := strconv.Itoa(mustAtoi(t, b) - 1)
	// Right after submission the reason is None, as in Slurm, until the
	// scheduler has looked at the job.
	if reason := s.pollReason(b, "PENDING Dependency"); reason != "PENDING Dependency" && reason != "" {
		t.Errorf("b while a runs: %q, want PENDING Dependency", reason)
	}
	s.waitState(b, 30*time.Second, "COMPLETED", "FAILED", "CANCELLED")
	if out, _ := os.ReadFile(filepath.Join(s.dir, "slurm-"+b+".out")); string(out) != "a done\nb ran\n" {
		t.Errorf("b's output: %q", out)
	}
	times := s.must("sacct -X -P -n -o JobID,Start,End -j " + a + "," + b)
	var aEnd, bStart string
	for _, line := range strings.Split(strings.TrimSpace(times), "\n") {
		f := strings.Split(line, "|")
		switch f[0] {
		case a:
			aEnd = f[2]
		case b:
			bStart = f[1]
		}
	}
	if aEnd == "" || bStart == "" || bStart < aEnd {
		t.Errorf("b started at %q, before a ended at %q:\n%s", bStart, aEnd, times)
	}

	// A failure: sacct and sbatch -W report the exit code as Slurm does.
	r = s.sh("sbatch -W --wrap 'exit 3'")
	if r.code != 3 {
		t.Errorf("sbatch -W of a job exiting 3: %s", r)
	}
	// On an array, the highest of its tasks' codes (sbatch.c: _job_wait).
	r = s.sh("sbatch -W --array=1-3 --wrap 'exit $((SLURM_ARRAY_TASK_ID % 3 + 4))'")
	if r.code != 6 {
		t.Errorf("sbatch -W of an array whose tasks exit 5, 6, 4: %s", r)
	}

	// squeue while a job runs, then scancel: CANCELLED in sacct.
	long := strings.TrimSpace(s.must("sbatch --parsable -J sleeper --wrap 'sleep 300'"))
	deadline := time.Now().Add(30 * time.Second)
	for s.squeueStates("")[long] != "RUNNING" {
		if time.Now().After(deadline) {
			t.Fatalf("job %s not running: %s", long, s.sh("squeue").stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if line := s.must("squeue -h -j " + long + ` -o "%i|%j|%T|%D|%R"`); !regexp.MustCompile(`^` + long + `\|sleeper\|RUNNING\|1\|sl-n[12]\n$`).MatchString(line) {
		t.Errorf("squeue -o of the sleeper: %q", line)
	}
	// sstat of a job running its batch step only: the header, nothing on
	// stderr (sstat-j.txt).
	golden := string(mustRead(t, "../../internal/slurm/testdata/golden/sstat-j.txt"))
	header := golden[strings.Index(golden, "\n")+1 : strings.Index(golden, "--- exit")]
	if r := s.sh("sstat -j " + long); r.code != 0 || r.stdout != header || r.stderr != "" {
		t.Errorf("sstat -j of a job running its batch step only: %s", r)
	}
	s.must("scancel " + long)
	if st := s.waitState(long, 30*time.Second, "CANCELLED"); !strings.HasPrefix(st[0], "CANCELLED") || st[1] != "0:15" {
		t.Errorf("cancelled sleeper: %v, want CANCELLED 0:15", st)
	}

	// An array with a throttle: its waiting tasks fold into one line.
	arr := strings.TrimSpace(s.must("sbatch --parsable --array=1-6%2 -o arr-%A_%a.out --wrap 'sleep 1; echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID'"))
	folded := regexp.MustCompile(`^` + arr + `_\[\d-6%2\] PENDING$`)
	seen := false
	for deadline := time.Now().Add(10 * time.Second); !seen && time.Now().Before(deadline); {
		for _, line := range strings.Split(s.must(`squeue -h -o "%i %T"`), "\n") {
			seen = seen || folded.MatchString(line)
		}
	}
	if !seen {
		t.Errorf("the array's waiting tasks were never shown folded as %s_[N-6%%2]", arr)
	}
	for i := 1; i <= 6; i++ {
		task := fmt.Sprintf("%s_%d", arr, i)
		s.waitState(task, 60*time.Second, "COMPLETED")
		if out, _ := os.ReadFile(filepath.Join(s.dir, "arr-"+task+".out")); string(out) != fmt.Sprintf("task %d of %s\n", i, arr) {
			t.Errorf("%s's output: %q", task, out)
		}
	}

	// Hold and release.
	held := strings.TrimSpace(s.must("sbatch --parsable --hold --wrap 'echo released'"))
	if reason := s.pollReason(held, "PENDING JobHeldUser"); reason != "PENDING JobHeldUser" {
		t.Errorf("held job: %q, want PENDING JobHeldUser", reason)
	}
	if out := s.must("scontrol show job " + held); !strings.Contains(out, "JobState=PENDING Reason=JobHeldUser") || !strings.Contains(out, "Priority=0 ") {
		t.Errorf("scontrol show job of a held job:\n%s", out)
	}
	s.must("scontrol release " + held)
	s.waitState(held, 30*time.Second, "COMPLETED")

	// Two nodes: srun prints both nodes' output and exits with the status.
	r = s.sh("srun -N2 -l bash -c 'echo $SLURM_PROCID on $SLURMD_NODENAME'")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	sort.Strings(lines)
	if r.code != 0 || len(lines) != 2 || !regexp.MustCompile(`^0: 0 on sl-n[12]$`).MatchString(lines[0]) || !regexp.MustCompile(`^1: 1 on sl-n[12]$`).MatchString(lines[1]) {
		t.Errorf("srun -N2 -l: %s", r)
	}
	if r := s.sh("srun false"); r.code != 1 || !strings.Contains(r.stderr, "srun: error: ") {
		t.Errorf("srun false: %s", r)
	}
	// A batch script over two nodes: its srun steps run on both.
	two := strings.TrimSpace(s.must(`sbatch --parsable -N2 --wrap 'echo start; srun bash -c "echo step \$SLURM_PROCID"; echo end'`))
	s.waitState(two, 30*time.Second, "COMPLETED")
	got := strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(s.dir, "slurm-"+two+".out")))), "\n")
	sort.Strings(got)
	if strings.Join(got, ",") != "end,start,step 0,step 1" {
		t.Errorf("two-node batch output: %q", got)
	}
	// The script runs once, on the first node; its steps run on both,
	// their output in the script's, srun exiting with the worst status.
	s.write("once.sh", "#!/bin/bash\n#SBATCH -N2\necho script-once\nsrun bash -c 'echo host $SLURMD_NODENAME step $SLURM_STEP_ID'\nsrun -l bash -c 'echo hi; exit $SLURM_NODEID'\necho rc=$?\n")
	once := strings.TrimSpace(s.must("sbatch --parsable once.sh"))
	s.waitState(once, 30*time.Second, "COMPLETED")
	onceOut := string(mustRead(t, filepath.Join(s.dir, "slurm-"+once+".out")))
	for _, want := range []string{"host sl-n1 step 0\n", "host sl-n2 step 0\n", "0: hi\n", "1: hi\n", "srun: error: sl-n2: task 1: Exited with exit code 1\n", "rc=1\n"} {
		if !strings.Contains(onceOut, want) {
			t.Errorf("two-node script: no %q in its output:\n%s", want, onceOut)
		}
	}
	if n := strings.Count(onceOut, "script-once"); n != 1 {
		t.Errorf("two-node script: ran %d times, want once:\n%s", n, onceOut)
	}
	// srun in salloc's shell runs on the allocated nodes.
	r = s.sh("salloc -Q -N2 srun -l bash -c 'echo $SLURM_PROCID on $SLURMD_NODENAME'")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	sort.Strings(lines)
	if r.code != 0 || len(lines) != 2 || !regexp.MustCompile(`^0: 0 on sl-n[12]$`).MatchString(lines[0]) || !regexp.MustCompile(`^1: 1 on sl-n[12]$`).MatchString(lines[1]) || lines[0][len(lines[0])-1] == lines[1][len(lines[1])-1] {
		t.Errorf("srun -l in salloc -N2: %s", r)
	}

	// Malformed options: Slurm's message and status, nothing stored.
	before := len(c.mustRuns())
	r = s.sh("sbatch --bogus hello.sh")
	if r.code != 255 || r.stdout != "" || r.stderr != "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information\n" {
		t.Errorf("sbatch --bogus: %s", r)
	}
	s.write("bad.sh", "#!/bin/sh\n#SBATCH --time=never\necho no\n")
	if r = s.sh("sbatch bad.sh"); r.code != 255 || r.stderr != "sbatch: error: Invalid --time specification\n" {
		t.Errorf("sbatch of a bad directive: %s", r)
	}
	if r = s.sh("sbatch -p nosuch --wrap true"); r.code != 1 || !strings.Contains(r.stderr, "Invalid partition name specified") {
		t.Errorf("sbatch -p nosuch: %s", r)
	}
	if r = s.sh("sbatch --test-only -N2 --wrap true"); r.code != 0 || !regexp.MustCompile(`^sbatch: Job \d+ to start at \S+ using 2 processors on nodes sl-n\[1-2\] in partition berth\n$`).MatchString(r.stderr) {
		t.Errorf("sbatch --test-only: %s", r)
	}
	if after := len(c.mustRuns()); after != before {
		t.Errorf("refused and test-only submissions stored runs: %d before, %d after", before, after)
	}
	if r = s.sh("squeue -j 99999"); r.code != 1 || r.stderr != "slurm_load_jobs error: Invalid job id specified\n" {
		t.Errorf("squeue -j of an unknown job: %s", r)
	}
	if r = s.sh("sinfo -h -N -o '%N %c'"); r.code != 0 || r.stdout != "sl-n1 4\nsl-n2 2\n" {
		t.Errorf("sinfo -N: %s", r)
	}
	// Through `berth sbatch` as well as through the link.
	if r := c.berth("", "squeue", "--version"); r.code != 0 || r.stdout != "slurm 22.05.8\n" {
		t.Errorf("berth squeue --version: %s", r)
	}
}

// pollReason polls `squeue -h -o "%T %r" -j job` for up to 5 s until it
// says want, and returns what it said last ("" once the job has ended).
func (s *slurmSite) pollReason(job, want string) string {
	s.c.t.Helper()
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = strings.TrimSpace(s.must(`squeue -h -o "%T %r" -j ` + job)); got == want || got == "" {
			break
		}
	}
	return got
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corpusScript is one script of testdata/slurm-corpus and how to run it.
type corpusScript struct {
	name, args, after, output string
	expect                    []*regexp.Regexp
}

func readCorpus(t *testing.T) []corpusScript {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "slurm-corpus", "*.sh"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	sort.Strings(files)
	var out []corpusScript
	for _, f := range files {
		cs := corpusScript{name: filepath.Base(f), output: "slurm-%j.out"}
		for _, line := range strings.Split(string(mustRead(t, f)), "\n") {
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "#CORPUS "), ": ")
			if !ok || !strings.HasPrefix(line, "#CORPUS ") {
				continue
			}
			switch k {
			case "args":
				cs.args = v
			case "after":
				cs.after = v
			case "output":
				cs.output = v
			case "expect":
				cs.expect = append(cs.expect, regexp.MustCompile(v))
			default:
				t.Fatalf("%s: unknown #CORPUS line %q", f, line)
			}
		}
		out = append(out, cs)
	}
	return out
}

// Real-world batch scripts (multi-node torchrun, MPI, a throttled array, a
// dependency chain, Python, GPUs, a heterogeneous job, --export=NONE) go
// through sbatch --test-only, then run for real and write what they would
// on Slurm.
func TestSlurmCorpus(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--agent-name", "co-n1", "--cpus", "8", "--memory", "16GB", "--gpus", "4")
	srv.startAgent("co-n2", filepath.Join(c.home, "data-n2"), "--cpus", "8", "--memory", "16GB", "--gpus", "4")
	c.waitNodes(30*time.Second, "co-n1", "co-n2")
	s := newSlurmSite(t, c)
	// Stand-ins for PyTorch's launcher and an MPI program.
	for name, body := range map[string]string{
		"torchrun": `#!/bin/bash
while [ $# -gt 0 ]; do
  case $1 in --nnodes) nnodes=$2; shift;; --nproc_per_node) nproc=$2; shift;; --rdzv_endpoint) master=$2; shift;; esac
  shift
done
echo "torchrun node_rank=$SLURM_NODEID nnodes=$nnodes nproc=$nproc master=$master gpus=$CUDA_VISIBLE_DEVICES"
`,
		"mpi_hello": "#!/bin/sh\necho \"hello from rank $SLURM_PROCID of $SLURM_NTASKS\"\n",
	} {
		if err := os.WriteFile(filepath.Join(s.shims, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	scripts := readCorpus(t)
	for _, cs := range scripts {
		if err := os.WriteFile(filepath.Join(s.dir, cs.name), mustRead(t, filepath.Join("testdata", "slurm-corpus", cs.name)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	before := len(c.mustRuns())
	for _, cs := range scripts {
		r := s.sh("sbatch --test-only " + cs.args + " " + cs.name)
		if r.code != 0 || !regexp.MustCompile(`^sbatch: Job \d+ to start at \S+ using \d+ processors on nodes co-n\S* in partition berth\n$`).MatchString(r.stderr) {
			t.Errorf("sbatch --test-only %s: %s", cs.name, r)
		}
	}
	if after := len(c.mustRuns()); after != before {
		t.Fatalf("--test-only stored runs: %d before, %d after", before, after)
	}
	ids := map[string]string{}
	for _, cs := range scripts {
		args := cs.args
		if cs.after != "" {
			args += " --dependency=afterok:" + ids[cs.after]
		}
		ids[cs.name] = strings.TrimSpace(s.must("CORPUS_SECRET=leak sbatch --parsable " + args + " " + cs.name))
	}
	wrap := strings.TrimSpace(s.must(`sbatch --parsable --wrap 'echo "wrapped $SLURM_JOB_NAME $0"'`))
	for _, cs := range append(scripts, corpusScript{name: "--wrap", output: "slurm-%j.out", expect: []*regexp.Regexp{regexp.MustCompile(`^wrapped wrap /\S+/slurm_script$`)}}) {
		id := ids[cs.name]
		if cs.name == "--wrap" {
			id = wrap
		}
		// Wait until nothing of the job is left in the queue.
		deadline := time.Now().Add(90 * time.Second)
		for strings.TrimSpace(s.must("squeue -h -o %i -j "+id)) != "" {
			if time.Now().After(deadline) {
				t.Fatalf("%s (job %s) still queued:\n%s", cs.name, id, s.must("squeue"))
			}
			time.Sleep(300 * time.Millisecond)
		}
		states := s.sacctStates(id)
		if len(states) == 0 {
			t.Errorf("%s (job %s): sacct knows nothing of it", cs.name, id)
		}
		for job, st := range states {
			if st != [2]string{"COMPLETED", "0:0"} {
				t.Errorf("%s: job %s ended %v", cs.name, job, st)
			}
		}
		file := filepath.Join(s.dir, strings.ReplaceAll(cs.output, "%j", id))
		out, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v", cs.name, err)
			continue
		}
		for _, re := range cs.expect {
			found := false
			for _, line := range strings.Split(string(out), "\n") {
				found = found || re.MatchString(line)
			}
			if !found {
				t.Errorf("%s: no line of %s matches %s:\n%s", cs.name, filepath.Base(file), re, out)
			}
		}
	}
}
