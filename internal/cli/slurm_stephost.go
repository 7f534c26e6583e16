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

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/spf13/cobra"
)

// `berth step-host` is what the nodes of a multi-node batch job other than
// the first run instead of the script (Slurm runs the script once, on the
// first node): it waits for the job's steps (srun in the script posts them
// to the server's step relay), runs this node's tasks of each, and sends
// their output and exit status back. The run's stop_criteria master-done
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
		Short:  "Run the job steps of this node of a multi-node batch job (started by sbatch's jobs)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return fmt.Errorf("step-host: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return stepHost(ctx, c, os.Getenv, cmd.ErrOrStderr())
		},
	}
}

// stepHost polls for the steps of this node's rank until the run ends (or
// ctx is done) and runs each.
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
	after, epoch := -1, ""
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		st, err := c.NextStep(ctx, ref, rank, after, epoch)
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
		if st == nil {
			continue
		}
		after, epoch = st.ID, st.Epoch
		wg.Add(1)
		go func() {
			defer wg.Done()
			runHostedStep(ctx, c, ref, rank, st, node)
		}()
	}
	return nil
}

// stepShare is node k's share of a step's tasks under block distribution:
// how many and the global rank of the first.
func stepShare(ntasks, nodes, k int) (n, first int) {
	nodes = max(nodes, 1)
	base, rem := ntasks/nodes, ntasks%nodes
	share := func(i int) int {
		if i >= nodes {
			return 0
		}
		if i < rem {
			return base + 1
		}
		return base
	}
	for i := 0; i < k; i++ {
		first += share(i)
	}
	return share(k), first
}

// stepSink sends a rank's output to the relay in batches.
type stepSink struct {
	mu   sync.Mutex
	buf  []byte
	kick chan struct{}
}

func (s *stepSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf = append(s.buf, p...)
	big := len(s.buf) > 64<<10
	s.mu.Unlock()
	if big {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (s *stepSink) take() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	s.buf = nil
	return b
}

// runHostedStep runs this node's tasks of a step and reports them.
func runHostedStep(ctx context.Context, c *client.Client, ref string, rank int, st *api.StepAssignment, node map[string]string) {
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
	ntasks, _ := strconv.Atoi(env["SLURM_STEP_NUM_TASKS"])
	nodes, _ := strconv.Atoi(env["SLURM_STEP_NUM_NODES"])
	if ntasks <= 0 || nodes <= 0 {
		ntasks, nodes = len(st.Ranks), len(st.Ranks)
	}
	n, first := stepShare(ntasks, nodes, rank)
	label := env["BERTH_SLURM_STEP_LABEL"] == "1"

	sink := &stepSink{kick: make(chan struct{}, 1)}
	flushed := make(chan struct{})
	stopFlush := make(chan struct{})
	send := func() {
		if b := sink.take(); len(b) > 0 {
			// The relay may be away a moment: try a few times.
			for i := 0; i < 5; i++ {
				if err := c.StepOutput(context.WithoutCancel(ctx), ref, st.ID, rank, b); err == nil || errors.Is(err, client.ErrNotFound) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	go func() {
		defer close(flushed)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopFlush:
				send()
				return
			case <-t.C:
			case <-sink.kick:
			}
			send()
		}
	}()

	var mu sync.Mutex
	codes := make([]int, n)
	var wg sync.WaitGroup
	path, lookErr := exec.LookPath(st.Argv[0])
	for i := 0; i < n; i++ {
		task := first + i
		if lookErr != nil {
			fmt.Fprintf(sink, "slurmstepd: error: execve(): %s: No such file or directory\n", st.Argv[0])
			codes[i] = 2
			continue
		}
		cmd := exec.CommandContext(ctx, path, st.Argv[1:]...)
		cmd.Args[0] = st.Argv[0]
		cmd.Dir = st.Dir
		cmd.Env = nil
		for _, k := range order {
			cmd.Env = append(cmd.Env, k+"="+env[k])
		}
		cmd.Env = append(cmd.Env, "SLURM_PROCID="+strconv.Itoa(task), "SLURM_LOCALID="+strconv.Itoa(i))
		var w io.Writer = &lockedWriter{w: sink, mu: &mu}
		var flush func()
		if label {
			ll := &lineLabel{w: sink, mu: &mu, prefix: fmt.Sprintf("%d: ", task)}
			w, flush = ll, ll.flush
		}
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(sink, "slurmstepd: error: execve(): %s: %v\n", st.Argv[0], err)
			codes[i] = 2
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i] = exitCodeOf(cmd.Wait())
			if flush != nil {
				flush()
			}
		}(i)
	}
	wg.Wait()
	close(stopFlush)
	<-flushed
	worst := 0
	for _, c := range codes {
		worst = max(worst, c)
	}
	for i := 0; i < 5; i++ {
		if err := c.StepExit(context.WithoutCancel(ctx), ref, st.ID, rank, worst); err == nil || errors.Is(err, client.ErrNotFound) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
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
