//go:build !slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// `berth step-host` runs on the nodes of an allocation instead of the
// batch script (Slurm runs the script once, on the first node) and in
// salloc's and `srun --pty`'s allocations: it waits for the job's steps
// (srun posts them to the server's step relay), runs this node's tasks of
// each, forwards srun's signals to them, and sends their output and exit
// statuses back (stephost_io.go). The run's stop_criteria master-done
// stops it when the script ends.

// stepNodeEnv are the variables a step's tasks take from their own node,
// not from srun's environment.
var stepNodeEnv = []string{
	"SLURMD_NODENAME", "SLURM_NODEID", "SLURM_CPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE",
	"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "BERTH_NODE_RANK", "BERTH_NODE_NAME", "BERTH_JOB_ID",
	"BERTH_CPUS", "DSTACK_NODE_RANK", "HOSTNAME", "TMPDIR",
}

func newStepHostCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "step-host",
		Short:  "Run the job steps of this node of an allocation (started by sbatch's, salloc's and srun's jobs)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newStepClient()
			if err != nil {
				return fmt.Errorf("step-host: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The job's main process on this node is the step host, not a
			// batch shell: a signal for the job's main process (--signal=B:,
			// scancel -b) is not its to die of. Caught, and dropped.
			signal.Notify(make(chan os.Signal, 1), stepHostIgnores()...)
			return stepHost(ctx, c, os.Getenv, cmd.ErrOrStderr())
		},
	}
}

// stepHostIgnores are signals a job may be sent (--signal, scancel
// --signal) that the step host drops: HUP and QUIT would end it (a Go
// program ignores the others by default; listed all the same).
func stepHostIgnores() []os.Signal {
	out := []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGALRM,
		syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGPWR}
	for n := 34; n <= 64; n++ { // the real-time signals
		out = append(out, syscall.Signal(n))
	}
	return out
}

// hostedSteps are the steps running on this node, for srun's signals.
type hostedSteps struct {
	mu    sync.Mutex
	steps map[int]*hostedStep
}

// hostedStep is this node's tasks of one step.
type hostedStep struct {
	mu    sync.Mutex
	procs []*os.Process
	// jobDir is the job's BERTH_JOB_DIR, where the tasks' process groups
	// are recorded for the job's shim (agent.RecordStepTask).
	jobDir string
}

// signal sends sig to every task of the step (their process groups).
func (h *hostedStep) signal(sig syscall.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.procs {
		if err := syscall.Kill(-p.Pid, sig); err != nil {
			_ = p.Signal(sig)
		}
	}
}

func (h *hostedStep) add(p *os.Process) {
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
}

// stepHost polls for the work of this node's rank until the run ends (or
// ctx is done): it starts each new step and delivers signals.
func stepHost(ctx context.Context, c *client.Client, getenv func(string) string, logw io.Writer) error {
	ref := orStr(getenv("BERTH_RUN_ID"), getenv("SLURM_JOB_ID"))
	rank, err := strconv.Atoi(orStr(getenv("BERTH_NODE_RANK"), getenv("SLURM_NODEID")))
	if ref == "" || err != nil {
		return errors.New("step-host: not inside a job (BERTH_RUN_ID and BERTH_NODE_RANK are not set)")
	}
	node := map[string]string{}
	for _, k := range stepNodeEnv {
		if v := getenv(k); v != "" {
			node[k] = v
		}
	}
	after, sig := -1, int64(0)
	running := &hostedSteps{steps: map[int]*hostedStep{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		work, err := c.NextWork(ctx, ref, rank, after, sig)
		if errors.Is(err, client.ErrRunEnded) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(logw, "step-host: %v (retrying)\n", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if work == nil {
			continue
		}
		for _, st := range work.Steps {
			after = max(after, st.ID)
			h := &hostedStep{jobDir: getenv("BERTH_JOB_DIR")}
			running.mu.Lock()
			running.steps[st.ID] = h
			running.mu.Unlock()
			wg.Add(1)
			go func(st api.StepAssignment) {
				defer wg.Done()
				runHostedStep(ctx, c, ref, rank, &st, node, h)
				running.mu.Lock()
				delete(running.steps, st.ID)
				running.mu.Unlock()
			}(st)
		}
		for _, sg := range work.Signals {
			sig = max(sig, sg.Seq)
			running.mu.Lock()
			h := running.steps[sg.Step]
			running.mu.Unlock()
			if h != nil {
				h.signal(syscall.Signal(sg.Signal))
			}
		}
	}
	return nil
}

func indexOf(list []int, v int) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

// runHostedStep runs this node's tasks of a step and reports them.
func runHostedStep(ctx context.Context, c *client.Client, ref string, rank int, st *api.StepAssignment, node map[string]string, h *hostedStep) {
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range st.Env {
		k, v, _ := cutEnv(kv)
		set(k, v)
	}
	for k, v := range node {
		set(k, v)
	}
	set("SLURM_STEP_ID", strconv.Itoa(st.ID))
	set("SLURM_STEPID", strconv.Itoa(st.ID))
	k := max(indexOf(st.Nodes, rank), 0)
	n, first := stepShare(max(st.NTasks, 1), len(st.Nodes), k)
	label := env["BERTH_SLURM_STEP_LABEL"] == "1"

	out := newStepSink(c, ref, st.ID, rank, 1)
	errs := newStepSink(c, ref, st.ID, rank, 2)
	out.start(ctx)
	errs.start(ctx)

	var mu sync.Mutex
	codes := make([]int, n)
	var wg sync.WaitGroup
	path, lookErr := exec.LookPath(st.Argv[0])
	// srun's input, when it forwards some, goes to every task here (task 0
	// on a terminal takes it alone).
	var inputs []io.WriteCloser
	feedInput := st.Attach && !st.PTY
	for i := 0; i < n; i++ {
		task := first + i
		if task == 0 && st.PTY && lookErr != nil {
			codes[i] = runAttachedTask(ctx, c, ref, rank, st, nil, h, errs)
			continue
		}
		if lookErr != nil {
			fmt.Fprintf(errs, "slurmstepd: error: execve(): %s: No such file or directory\n", st.Argv[0])
			codes[i] = 2
			continue
		}
		cmd := exec.Command(path, st.Argv[1:]...)
		cmd.Args[0] = st.Argv[0]
		cmd.Dir = st.Dir
		for _, k := range order {
			cmd.Env = append(cmd.Env, k+"="+env[k])
		}
		cmd.Env = append(cmd.Env, "SLURM_PROCID="+strconv.Itoa(task), "SLURM_LOCALID="+strconv.Itoa(i))
		if task == 0 && st.PTY {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				codes[i] = runAttachedTask(ctx, c, ref, rank, st, cmd, h, errs)
			}(i)
			continue
		}
		var ow, ew io.Writer = &lockedWriter{w: out, mu: &mu}, &lockedWriter{w: errs, mu: &mu}
		var flushers []func()
		if label {
			lo := &lineLabel{w: out, mu: &mu, prefix: taskLabel(task, st.NTasks)}
			le := &lineLabel{w: errs, mu: &mu, prefix: taskLabel(task, st.NTasks)}
			ow, ew, flushers = lo, le, []func(){lo.flush, le.flush}
		}
		cmd.Stdout, cmd.Stderr = ow, ew
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var in io.WriteCloser
		if feedInput {
			in, _ = cmd.StdinPipe()
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(errs, "slurmstepd: error: execve(): %s: %v\n", st.Argv[0], err)
			codes[i] = 2
			continue
		}
		if in != nil {
			inputs = append(inputs, in)
		}
		h.add(cmd.Process)
		recorded := agent.RecordStepTask(h.jobDir, cmd.Process.Pid)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i] = exitCodeOf(cmd.Wait())
			recorded()
			for _, f := range flushers {
				f()
			}
		}(i)
	}
	if feedInput {
		go readInput(ctx, c, ref, st.ID, rank, inputs)
	}
	// The host's own end (the job stops) stops the tasks too: they are in
	// process groups of their own.
	stepDone := make(chan struct{})
	go func() {
		select {
		case <-stepDone:
		case <-ctx.Done():
			h.signal(syscall.SIGTERM)
			select {
			case <-stepDone:
			case <-time.After(2 * time.Second):
				h.signal(syscall.SIGKILL)
			}
		}
	}()
	// The step's end stops its tasks' processes left behind (a
	// background child), as slurmstepd does.
	wg.Wait()
	close(stepDone)
	h.signal(syscall.SIGKILL)
	worst := 0
	for _, c := range codes {
		worst = max(worst, c)
	}
	outTotal, errTotal := out.close(), errs.close()
	x := api.StepExit{Code: worst, Out: outTotal, Err: errTotal}
	for try := 0; ; try++ {
		err := c.StepExit(context.WithoutCancel(ctx), ref, st.ID, rank, x)
		var apiErr *client.APIError
		if err == nil || errors.As(err, &apiErr) && apiErr.Status/100 == 4 || ctx.Err() != nil || try > 600 {
			break
		}
		select { // the server is away: it comes back
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
	out.wait()
	errs.wait()
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// exitCodeOf is a process's exit status as a shell reports it (128+N for
// signal N).
func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}
