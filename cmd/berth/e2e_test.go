//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// marker is a number unique to this test process and call, for command
// lines such as `sleep 100.MARKER` that the test looks for in /proc.
func marker() string {
	return fmt.Sprintf("%d%06d", os.Getpid()%100000, time.Now().UnixNano()%1000000)
}

// sleepProcs lists the live processes running exactly `sleep ARG`.
func sleepProcs(arg string) func() []int {
	want := "sleep\x00" + arg + "\x00"
	return func() []int {
		return procsMatching(func(cmdline, _ []byte) bool {
			return strings.HasSuffix(string(cmdline), want) &&
				(len(cmdline) == len(want) || strings.HasSuffix(string(cmdline), "/"+want))
		})
	}
}

func TestApplyHello(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "hello-node", "--cpus", "4")
	c.waitNodes(30*time.Second, "hello-node")
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello.berth.yml"))
	if err != nil {
		t.Fatal(err)
	}

	// Apply: the plan, the submission, the output, exit 0.
	r := c.berth("", "apply", "-y", "-f", hello)
	if r.code != 0 {
		t.Fatalf("apply -y: %s", r)
	}
	if want := "Hello from hello (run 1) on hello-node\n"; r.stdout != want {
		t.Errorf("apply -y: stdout %q, want %q", r.stdout, want)
	}
	for _, want := range []string{" Configuration  " + hello + "\n", " Run            hello\n", "Submitted run hello (ID 1)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply -y: stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "Submit the run") {
		t.Errorf("apply -y asked for confirmation:\n%s", r.stderr)
	}

	// --detach prints the name and the ID and returns.
	r = c.berth("", "apply", "-y", "--detach", "-f", hello)
	if r.code != 0 || r.stdout != "Submitted run hello (ID 2)\n" {
		t.Fatalf("apply -y --detach: want exactly %q on stdout; %s", "Submitted run hello (ID 2)\n", r)
	}
	run := c.waitFinished("hello", 30*time.Second)
	if run.ID != 2 || run.Status != api.StatusDone {
		t.Errorf("the detached run: ID %d, status %s; want 2, done", run.ID, run.Status)
	}
	if out, code := c.berthCombined("logs", "2"); code != 0 || out != "Hello from hello (run 2) on hello-node\n" {
		t.Errorf("berth logs 2: exit %d, %q", code, out)
	}

	// --dry-run shows the plan and submits nothing.
	r = c.berth("", "apply", "--dry-run", "-f", hello)
	if r.code != 0 {
		t.Fatalf("apply --dry-run: %s", r)
	}
	if !regexp.MustCompile(`(?m)^ 1 +hello-node +4/4 CPU, .* +now$`).MatchString(r.stderr) {
		t.Errorf("apply --dry-run: no plan row for hello-node fitting now:\n%s", r.stderr)
	}
	if r.stdout != "" || strings.Contains(r.stderr, "Submitted") {
		t.Errorf("apply --dry-run submitted something: %s", r)
	}
	if runs := c.mustRuns(); len(runs) != 2 {
		t.Errorf("after --dry-run: %d runs stored, want 2: %v", len(runs), summary(runs))
	}

	// A failing command: apply exits with its code, ps shows why.
	file := c.writeConfig("fails.yml", "type: task\nname: fails-three\ncommands:\n  - echo before\n  - exit 3\n  - echo after\n")
	r = c.berth("", "apply", "-y", "-f", file)
	if r.code != 3 {
		t.Errorf("apply of a run that exits 3: exit %d, want 3; %s", r.code, r)
	}
	if r.stdout != "before\n" {
		t.Errorf("apply of fails-three: stdout %q, want %q", r.stdout, "before\n")
	}
	if want := "berth: run fails-three failed (exited_with_error), exit code 3\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("apply of fails-three: stderr does not end with %q:\n%s", want, r.stderr)
	}
	out := c.mustBerth("ps", "-a", "--json")
	var raw []map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("ps -a --json: %v\n%s", err, out)
	}
	if len(raw) != 3 {
		t.Fatalf("ps -a --json: %d runs, want 3:\n%s", len(raw), out)
	}
	for _, m := range raw {
		for _, k := range []string{"id", "name", "status", "reason", "exit_code", "submitted_at"} {
			if _, ok := m[k]; !ok {
				t.Errorf("ps -a --json: run %v has no field %q", m["name"], k)
			}
		}
	}
	// Newest first.
	f := raw[0]
	if f["name"] != "fails-three" || f["id"] != 3.0 || f["status"] != "failed" || f["reason"] != "exited_with_error" || f["exit_code"] != 3.0 {
		t.Errorf("ps -a --json: newest run %v, want fails-three, id 3, failed, exited_with_error, exit code 3", f)
	}
	if ts, _ := f["submitted_at"].(string); ts == "" {
		t.Errorf("ps -a --json: submitted_at %v", f["submitted_at"])
	} else if at, err := time.Parse(time.RFC3339Nano, ts); err != nil || time.Since(at) > time.Minute || time.Since(at) < 0 {
		t.Errorf("ps -a --json: submitted_at %q is not a recent time (%v)", ts, err)
	}
	for i, m := range raw[1:] {
		if m["name"] != "hello" || m["id"] != float64(2-i) || m["status"] != "done" || m["exit_code"] != 0.0 {
			t.Errorf("ps -a --json: run %v, want hello, id %d, done, exit code 0", m, 2-i)
		}
	}
	// ps without -a lists active runs only: none.
	if out := c.mustBerth("ps", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("ps --json with every run finished: %s", out)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--no-local-agent")
	cases := []struct {
		file, text string
		want       []string // in stderr
	}{
		{"malformed.yml", "type: task\nname: bad-yaml\ncommands: [echo hi\n",
			[]string{"malformed.yml:3:11: ", "invalid YAML"}},
		{"unknown.yml", "type: task\nname: typo\ncomands:\n  - echo hi\n",
			[]string{"unknown.yml:3:1: comands: unknown field", `did you mean "commands"`}},
		{"gpu.yml", "type: task\nname: gpu-range\ncommands:\n  - echo hi\nresources:\n  gpu: 80GB..40GB\n",
			[]string{"gpu.yml:6:8: resources.gpu: ", "80GB..40GB"}},
		{"maxdur.yml", "type: task\nname: negative\ncommands:\n  - echo hi\nmax_duration: -5m\n",
			[]string{"maxdur.yml:5:15: max_duration: ", "negative"}},
	}
	for _, tc := range cases {
		path := c.writeConfig(tc.file, tc.text)
		for _, args := range [][]string{{"apply", "-y", "-f", path}, {"apply", "--dry-run", "-f", path}, {"apply", "-y", "--detach", "-f", path}} {
			r := c.berth("", args...)
			if r.code == 0 {
				t.Errorf("berth %s: exit 0 for a bad configuration", strings.Join(args, " "))
			}
			if r.stdout != "" {
				t.Errorf("berth %s: stdout %q", strings.Join(args, " "), r.stdout)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("berth %s: stderr lacks %q:\n%s", strings.Join(args, " "), want, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "Configuration ") {
				t.Errorf("berth %s: printed a plan for a bad configuration:\n%s", strings.Join(args, " "), r.stderr)
			}
		}
	}

	// The server checks what it is sent, whatever the client did.
	task, err := spec.Parse("ok.yml", []byte("type: task\nname: api-negative\ncommands:\n  - echo hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	neg := spec.Duration(-300)
	task.MaxDuration = &neg
	cl := client.New(srv.url, srv.token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ae *client.APIError
	if _, err := cl.Submit(ctx, api.SubmitRequest{Spec: task}); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest ||
		!strings.Contains(ae.Message, "max_duration") {
		t.Errorf("submitting max_duration -300s through the API: %v, want a 400 naming max_duration", err)
	}
	if _, err := cl.Plan(ctx, api.SubmitRequest{Spec: task}); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("planning max_duration -300s through the API: %v, want a 400", err)
	}

	if runs := c.mustRuns(); len(runs) != 0 {
		t.Errorf("bad configurations were stored: %v", summary(runs))
	}
}

func TestConfirmPrompt(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "confirm-node", "--cpus", "4")
	c.waitNodes(30*time.Second, "confirm-node")
	file := c.writeConfig("confirm.yml", "type: task\nname: confirm-me\ncommands:\n  - echo confirmed\n")
	const prompt = "Submit the run confirm-me? [y/n]: "

	for _, in := range []string{"n\n", "", "maybe\n"} {
		r := c.berth(in, "apply", "-f", file)
		if r.code == 0 {
			t.Errorf("apply with %q on stdin: exit 0", in)
		}
		if !strings.Contains(r.stderr, prompt) || !strings.Contains(r.stderr, "Nothing submitted.") {
			t.Errorf("apply with %q on stdin: no prompt or no %q:\n%s", in, "Nothing submitted.", r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("apply with %q on stdin: stdout %q", in, r.stdout)
		}
	}
	if runs := c.mustRuns(); len(runs) != 0 {
		t.Fatalf("declined submissions were stored: %v", summary(runs))
	}

	r := c.berth("y\n", "apply", "-f", file)
	if r.code != 0 || r.stdout != "confirmed\n" || !strings.Contains(r.stderr, prompt) {
		t.Fatalf("apply with \"y\" on stdin: want exit 0, the prompt and %q; %s", "confirmed\n", r)
	}
	runs := c.mustRuns()
	if len(runs) != 1 || runs[0].Name != "confirm-me" || runs[0].Status != api.StatusDone {
		t.Errorf("after confirming: %v, want one run confirm-me, done", summary(runs))
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "stop-node", "--cpus", "4", "--stop-grace", "5s")
	c.waitNodes(30*time.Second, "stop-node")

	// A graceful stop: SIGTERM reaches the job, which says so and exits 0.
	m1 := marker()
	trapped := c.writeConfig("trap.yml", fmt.Sprintf("type: task\nname: trapper\ncommands:\n  - trap 'echo got TERM; exit 0' TERM; echo ready; sleep 100.%s & wait\n", m1))
	if r := c.berth("", "apply", "-y", "--detach", "-f", trapped); r.code != 0 {
		t.Fatalf("apply trap.yml: %s", r)
	}
	m2 := marker()
	sleeper := c.writeConfig("sleep.yml", fmt.Sprintf("type: task\nname: sleeper\ncommands:\n  - sleep 100.%s\n", m2))
	if r := c.berth("", "apply", "-y", "--detach", "-f", sleeper); r.code != 0 {
		t.Fatalf("apply sleep.yml: %s", r)
	}
	c.waitLog("trapper", "ready\n", 30*time.Second)
	c.waitRun("sleeper", 30*time.Second, "running", func(r *api.Run) bool { return r.Status == api.StatusRunning })
	for _, m := range []string{m1, m2} {
		deadline := time.Now().Add(10 * time.Second)
		for len(sleepProcs("100."+m)()) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no `sleep 100.%s` process while its run is running", m)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	start := time.Now()
	r := c.berth("", "stop", "trapper")
	if r.code != 0 || !regexp.MustCompile(`^Run trapper \(ID 1\): \w+\n$`).MatchString(r.stdout) {
		t.Fatalf("berth stop trapper: %s", r)
	}
	run := c.waitFinished("trapper", 30*time.Second)
	if run.Status != api.StatusTerminated || run.Reason != api.ReasonTerminatedByUser || run.ExitCode == nil || *run.ExitCode != 0 {
		t.Errorf("stopped trapper: status %s, reason %q, exit code %s; want terminated, %s, 0", run.Status, run.Reason, codeText(run.ExitCode), api.ReasonTerminatedByUser)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("a job that exits on SIGTERM took %v to stop (grace 5s): SIGTERM did not reach it?", d)
	}
	if out, _ := c.berthCombined("logs", "trapper"); out != "ready\ngot TERM\n" {
		t.Errorf("berth logs trapper: %q, want %q", out, "ready\ngot TERM\n")
	}

	start = time.Now()
	r = c.berth("", "stop", "--abort", "sleeper")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Run sleeper (ID 2): ") {
		t.Fatalf("berth stop --abort sleeper: %s", r)
	}
	run = c.waitFinished("sleeper", 30*time.Second)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("abort took %v", d)
	}
	if run.Status != api.StatusAborted || run.Reason != api.ReasonAbortedByUser || run.ExitCode == nil || *run.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("aborted sleeper: status %s, reason %q, exit code %s; want aborted, %s, 137", run.Status, run.Reason, codeText(run.ExitCode), api.ReasonAbortedByUser)
	}

	// Nothing of either job is left.
	for _, m := range []string{m1, m2} {
		if left := waitNone(sleepProcs("100."+m), 5*time.Second); len(left) > 0 {
			t.Errorf("`sleep 100.%s` survived its stopped run: %v", m, left)
		}
	}
	if left := waitNone(c.jobProcs, 5*time.Second); len(left) > 0 {
		t.Errorf("job processes survived their stopped runs: %v", left)
	}
	if left := waitNone(c.shimsOf, 5*time.Second); len(left) > 0 {
		t.Errorf("shims survived their stopped runs: %v", left)
	}

	// Stopping a finished run changes nothing.
	if r := c.berth("", "stop", "sleeper"); r.code != 0 {
		t.Errorf("berth stop of a finished run: %s", r)
	}
	if run := c.waitFinished("sleeper", time.Second); run.Status != api.StatusAborted {
		t.Errorf("stopping a finished run changed it to %s", run.Status)
	}
	if r := c.berth("", "stop", "no-such-run"); r.code == 0 || !strings.Contains(r.stderr, "no-such-run") {
		t.Errorf("berth stop of an unknown run: %s", r)
	}
}

func TestSecondAgent(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--no-local-agent")
	srv.startAgent("agent-a", filepath.Join(c.home, "data-a"), "--cpus", "1", "--memory", "1GB")
	srv.startAgent("agent-b", filepath.Join(c.home, "data-b"), "--cpus", "1", "--memory", "1GB")
	nodes := c.waitNodes(30*time.Second, "agent-a", "agent-b")
	if len(nodes) != 2 {
		t.Errorf("berth fleet --json: %d nodes, want 2: %+v", len(nodes), nodes)
	}
	for _, n := range nodes {
		if n.CPUs != 1 || n.Memory != 1<<30 || !n.Declared || n.Status != "idle" {
			t.Errorf("node %s: %d CPUs, %d bytes, declared %v, %s; want 1 CPU, 1GB, declared, idle", n.Name, n.CPUs, n.Memory, n.Declared, n.Status)
		}
	}

	file := c.writeConfig("two.yml", `type: task
name: two-nodes
nodes: 2
commands:
  - echo "rank $BERTH_NODE_RANK on $BERTH_NODE_NAME dstack_nodes=$DSTACK_NODES_NUM slurm_nodes=$SLURM_JOB_NUM_NODES dstack_rank=$DSTACK_NODE_RANK slurm_nodeid=$SLURM_NODEID nodelist=$SLURM_JOB_NODELIST"
`)
	r := c.berth("", "apply", "-y", "-f", file)
	if r.code != 0 {
		t.Fatalf("apply two.yml: %s", r)
	}
	run := c.waitFinished("two-nodes", 30*time.Second)
	if run.Status != api.StatusDone || len(run.Jobs) != 2 {
		t.Fatalf("two-nodes: status %s with %d jobs; want done with 2: %v", run.Status, len(run.Jobs), summary([]api.Run{*run}))
	}
	onNode := map[int]string{}
	for _, j := range run.Jobs {
		onNode[j.Num] = j.Node
		if j.Status != api.StatusDone {
			t.Errorf("job %d: %s", j.Num, j.Status)
		}
	}
	if got := []string{onNode[0], onNode[1]}; !(got[0] == "agent-a" && got[1] == "agent-b") && !(got[0] == "agent-b" && got[1] == "agent-a") {
		t.Fatalf("the two jobs ran on %v, want agent-a and agent-b", got)
	}
	nodelist := onNode[0] + "," + onNode[1]
	line := func(rank int) string {
		return fmt.Sprintf("rank %d on %s dstack_nodes=2 slurm_nodes=2 dstack_rank=%d slurm_nodeid=%d nodelist=%s\n", rank, onNode[rank], rank, rank, nodelist)
	}
	// apply and logs prefix each line with its job's rank.
	for what, out := range map[string]string{"apply": r.stdout, "logs": c.mustBerth("logs", "two-nodes")} {
		got := strings.SplitAfter(out, "\n")
		sort.Strings(got)
		want := []string{"", "node-0 | " + line(0), "node-1 | " + line(1)}
		if strings.Join(got, "") != strings.Join(want, "") {
			t.Errorf("%s of two-nodes:\n%s\nwant (in any order):\n%s", what, out, strings.Join(want, ""))
		}
	}
	for rank := range 2 {
		if out := c.mustBerth("logs", "two-nodes", "--job", fmt.Sprint(rank)); out != line(rank) {
			t.Errorf("logs two-nodes --job %d: %q, want %q", rank, out, line(rank))
		}
	}

	// One CPU each: a second two-node run of 2 CPUs never fits; the plan says so.
	big := c.writeConfig("big.yml", "type: task\nname: too-big\nnodes: 2\nresources:\n  cpu: 2\ncommands:\n  - echo never\n")
	r = c.berth("", "apply", "--dry-run", "-f", big)
	if r.code != 0 || strings.Count(r.stderr, "never") < 2 {
		t.Errorf("dry run of a run no node can hold: want exit 0 and two rows that never fit; %s", r)
	}
}

func TestMaxDuration(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "maxdur-node", "--cpus", "4", "--stop-grace", "1s")
	c.waitNodes(30*time.Second, "maxdur-node")
	m := marker()
	file := c.writeConfig("maxdur.yml", fmt.Sprintf("type: task\nname: too-long\nmax_duration: 2s\ncommands:\n  - echo started\n  - sleep 60.%s\n", m))
	start := time.Now()
	r := c.berth("", "apply", "-y", "-f", file)
	took := time.Since(start)
	if r.code == 0 {
		t.Errorf("apply of a run past its max_duration: exit 0; %s", r)
	}
	if r.stdout != "started\n" || !strings.Contains(r.stderr, "run too-long terminated (max_duration_exceeded)") {
		t.Errorf("apply of too-long: %s", r)
	}
	run := c.waitFinished("too-long", 15*time.Second)
	if run.Status != api.StatusTerminated || run.Reason != api.ReasonMaxDuration {
		t.Errorf("too-long: status %s, reason %q; want terminated, %s", run.Status, run.Reason, api.ReasonMaxDuration)
	}
	if took < 2*time.Second || took > 15*time.Second {
		t.Errorf("too-long ended %v after submission; want between 2s and 15s", took)
	}
	if run.StartedAt != nil && run.FinishedAt != nil {
		if d := run.FinishedAt.Sub(*run.StartedAt); d < 2*time.Second || d > 5*time.Second {
			t.Errorf("too-long ran %v; want 2s plus at most the 1s grace (and some slack)", d)
		}
	} else {
		t.Errorf("too-long: started_at %v, finished_at %v", run.StartedAt, run.FinishedAt)
	}
	if left := waitNone(sleepProcs("60."+m), 5*time.Second); len(left) > 0 {
		t.Errorf("the job's sleep survived max_duration: %v", left)
	}
}

func TestAgentRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--no-local-agent", "--stop-grace", "1s")
	data := filepath.Join(c.home, "agent-data")
	agent := srv.startAgent("restart-node", data, "--cpus", "4")
	c.waitNodes(30*time.Second, "restart-node")
	const n = 300

	// 1. Killed mid-run, back while the job still runs.
	file := c.writeConfig("count.yml", countingTask("counting", n, false))
	if r := c.berth("", "apply", "-y", "--detach", "-f", file); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitLog("counting", "line 30\n", 30*time.Second)
	agent.kill()
	if len(c.shimsOf()) != 1 {
		t.Errorf("after the agent's SIGKILL: shims %v, want the job's one still running", describe(c.shimsOf()))
	}
	time.Sleep(500 * time.Millisecond) // the job goes on writing while no agent ships it
	agent = srv.startAgent("restart-node", data, "--cpus", "4")
	run := c.waitFinished("counting", 30*time.Second)
	if run.Status != api.StatusDone || run.ExitCode == nil || *run.ExitCode != 0 {
		t.Errorf("counting: status %s, reason %q, exit code %s; want done, 0", run.Status, run.Reason, codeText(run.ExitCode))
	}
	if out, code := c.berthCombined("logs", "counting"); code != 0 {
		t.Errorf("berth logs counting: exit %d %s", code, out)
	} else if diff := diffLines(out, n); diff != "" {
		t.Errorf("berth logs counting: %s", diff)
	}

	// 2. Killed mid-run, back only after the job has ended.
	file = c.writeConfig("short.yml", countingTask("short-count", 100, false))
	if r := c.berth("", "apply", "-y", "--detach", "-f", file); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitLog("short-count", "line 10\n", 30*time.Second)
	agent.kill()
	if left := waitNone(c.shimsOf, 30*time.Second); len(left) > 0 {
		t.Fatalf("the job did not end while its agent was down: %v", left)
	}
	if runs := c.mustRuns(); findRun(runs, "short-count").Status.Finished() {
		t.Errorf("short-count is final while its agent is down: %v", summary(runs))
	}
	agent = srv.startAgent("restart-node", data, "--cpus", "4")
	run = c.waitFinished("short-count", 30*time.Second)
	if run.Status != api.StatusDone || run.ExitCode == nil || *run.ExitCode != 0 {
		t.Errorf("short-count: status %s, reason %q, exit code %s; want done, 0", run.Status, run.Reason, codeText(run.ExitCode))
	}
	if out, code := c.berthCombined("logs", "short-count"); code != 0 {
		t.Errorf("berth logs short-count: exit %d %s", code, out)
	} else if diff := diffLines(out, 100); diff != "" {
		t.Errorf("berth logs short-count: %s", diff)
	}

	// 3. Aborted while its agent is down: the restarted agent kills it.
	m := marker()
	file = c.writeConfig("abort.yml", fmt.Sprintf("type: task\nname: abort-offline\ncommands:\n  - echo up\n  - sleep 100.%s\n", m))
	if r := c.berth("", "apply", "-y", "--detach", "-f", file); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitLog("abort-offline", "up\n", 30*time.Second)
	agent.kill()
	if r := c.berth("", "stop", "--abort", "abort-offline"); r.code != 0 {
		t.Fatalf("berth stop --abort while the agent is down: %s", r)
	}
	if len(sleepProcs("100."+m)()) != 1 {
		t.Errorf("the job should still run while its agent is down")
	}
	srv.startAgent("restart-node", data, "--cpus", "4")
	run = c.waitFinished("abort-offline", 30*time.Second)
	if run.Status != api.StatusAborted || run.Reason != api.ReasonAbortedByUser {
		t.Errorf("abort-offline: status %s, reason %q; want aborted, %s", run.Status, run.Reason, api.ReasonAbortedByUser)
	}
	if left := waitNone(sleepProcs("100."+m), 5*time.Second); len(left) > 0 {
		t.Errorf("the aborted job survived: %v", left)
	}
	if left := waitNone(c.shimsOf, 5*time.Second); len(left) > 0 {
		t.Errorf("shims left after every run ended: %v", left)
	}
}

// TestOddHome runs a server whose BERTH_HOME has characters that mean
// something in a URI ('#'): its state must be where it says, in
// $BERTH_HOME/server/berth.db, and nowhere else.
func TestOddHome(t *testing.T) {
	t.Parallel()
	c := newClusterIn(t, "home#1")
	parent := filepath.Dir(c.home)
	c.startServer("--agent-name", "odd-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "odd-node")
	file := c.writeConfig("odd.yml", "type: task\nname: odd-home\ncommands:\n  - echo fine\n")
	if r := c.berth("", "apply", "-y", "-f", file); r.code != 0 || r.stdout != "fine\n" {
		t.Fatalf("apply: %s", r)
	}
	if _, err := os.Stat(filepath.Join(c.home, "server", "berth.db")); err != nil {
		t.Errorf("the server's state is not in $BERTH_HOME/server/berth.db: %v", err)
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.Name() != filepath.Base(c.home) {
			t.Errorf("the server wrote %s, outside BERTH_HOME %s", filepath.Join(parent, e.Name()), c.home)
		}
	}
}
