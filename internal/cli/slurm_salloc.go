//go:build !slim

package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
)

// salloc, and srun --pty outside an allocation: an allocation whose nodes
// run step hosts, held while a shell (salloc) or a step (srun --pty) runs
// in it, then given back.

// allocation is a granted allocation: salloc's, or srun --pty's outside
// one. Its nodes run step hosts; env is what a shell in it sees.
type allocation struct {
	c          *client.Client
	id         string
	env        [][2]string
	relinquish func()
}

// allocate submits an allocation whose nodes host steps and waits until
// it is granted, saying what salloc says (prog names the command).
func allocate(e *slurmEnv, r *allocRequest, prog, defaultName string) (*allocation, error) {
	s := currentSubmitter(e)
	// The allocated nodes host the steps of srun in the shell (step-host);
	// without it there, they just hold the allocation.
	hold := "exec sleep infinity"
	if s.exe != "" {
		hold = fmt.Sprintf("__berth=%s\n[ -x \"$__berth\" ] || __berth=berth\n\"$__berth\" step-host </dev/null\nexec sleep infinity", shQuote(s.exe))
	}
	t, res, err := allocTask(r, prog, defaultName, s, []string{hold})
	if err != nil {
		return nil, err
	}
	c, err := e.newClient()
	if err != nil {
		return nil, slurmFail(1, prog+": error: Job submit/allocate failed: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	run, err := c.Submit(e.ctx, api.SubmitRequest{Spec: t, Source: prog, Hold: r.opt.Hold, Begin: futureUTC(r.opt.Begin, s.now)})
	if err != nil {
		return nil, allocError(prog, err)
	}
	id := strconv.FormatInt(run.ID, 10)
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &allocation{c: c, id: id}
	a.relinquish = func() {
		if !r.quiet && prog == "salloc" {
			fmt.Fprintf(e.stderr, "salloc: Relinquishing job allocation %d\n", run.ID)
		}
		_, _ = c.Stop(e.ctx, id, false)
	}
	if !r.quiet && prog == "salloc" {
		fmt.Fprintf(e.stderr, "salloc: Pending job allocation %d\n", run.ID)
	}
	queued := false
	submitted := time.Now()
	var cur *api.Run
	for {
		cur, err = c.Run(ctx, id)
		if ctx.Err() != nil {
			fmt.Fprintf(e.stderr, "%s: Job allocation %d has been revoked.\n", prog, run.ID)
			_, _ = c.Stop(e.ctx, id, false)
			return nil, &ExitError{Code: 1}
		}
		if err == nil && cur.Status == api.StatusRunning {
			break
		}
		if err == nil && cur.Status.Finished() {
			return nil, slurmFail(1, fmt.Sprintf("%s: error: Job allocation %d has been revoked", prog, run.ID))
		}
		// Waiting for the scheduler a moment is not waiting in the queue.
		if !queued && !r.quiet && err == nil && cur.Status == api.StatusSubmitted && time.Since(submitted) > time.Second {
			fmt.Fprintf(e.stderr, "%s: job %d queued and waiting for resources\n", prog, run.ID)
			queued = true
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !r.quiet {
		if queued {
			fmt.Fprintf(e.stderr, "%s: job %d has been allocated resources\n", prog, run.ID)
		}
		if prog == "salloc" {
			fmt.Fprintf(e.stderr, "salloc: Granted job allocation %d\n", run.ID)
		}
	}
	hosts := uniqueNodes(cur)
	nodes := max(len(hosts), 1)
	a.env = [][2]string{
		{"SLURM_JOB_ID", id}, {"SLURM_JOBID", id}, {"SLURM_JOB_NAME", r.opt.JobName},
		{"SLURM_JOB_NODELIST", slurm.CompressHostlist(hosts)}, {"SLURM_NODELIST", slurm.CompressHostlist(hosts)},
		{"SLURM_JOB_NUM_NODES", strconv.Itoa(nodes)}, {"SLURM_NNODES", strconv.Itoa(nodes)},
		{"SLURM_NTASKS", strconv.Itoa(res.nodes * res.tasksPerNode)}, {"SLURM_NPROCS", strconv.Itoa(res.nodes * res.tasksPerNode)},
		{"SLURM_TASKS_PER_NODE", slurm.CompressCounts(repeat(res.tasksPerNode, nodes))},
		{"SLURM_JOB_CPUS_PER_NODE", slurm.CompressCounts(repeat(res.cpus, nodes))},
		{"SLURM_SUBMIT_DIR", s.cwd}, {"SLURM_SUBMIT_HOST", s.host}, {"SLURM_CLUSTER_NAME", clusterName},
		{"SLURM_JOB_PARTITION", orStr(strings.Join(t.Fleets, ","), defaultPartition)},
		{"SLURM_JOB_ACCOUNT", orStr(cur.Project, orStr(r.opt.Account, defaultAccount))}, {"SLURM_JOB_QOS", orStr(r.opt.QOS, "normal")},
		{"BERTH_SLURM_STEPS", "1"},
	}
	if r.opt.CPUsPerTask > 0 {
		a.env = append(a.env, [2]string{"SLURM_CPUS_PER_TASK", strconv.Itoa(r.opt.CPUsPerTask)})
	}
	if res.memMB > 0 {
		a.env = append(a.env, [2]string{"SLURM_MEM_PER_NODE", strconv.FormatUint(res.memMB, 10)})
	}
	return a, nil
}

// within is e as seen from inside the allocation: its variables set.
func (a *allocation) within(e *slurmEnv) *slurmEnv {
	in := *e
	vars := map[string]string{}
	for _, kv := range a.env {
		vars[kv[0]] = kv[1]
	}
	in.getenv = func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return e.getenv(k)
	}
	in.environ = func() []string {
		out := e.environ()
		for _, kv := range a.env {
			out = append(out, kv[0]+"="+kv[1])
		}
		return out
	}
	return &in
}

// srunPty runs srun --pty outside an allocation: an allocation of the
// options' size, the command as its step (task 0 on a terminal), and the
// allocation's end with the step's, as srun does.
func srunPty(e *slurmEnv, r *allocRequest) error {
	a, err := allocate(e, r, "srun", filepath.Base(r.command[0]))
	if err != nil {
		return err
	}
	defer a.relinquish()
	step := *r
	step.opt.Nodes, step.opt.NTasks, step.opt.NTasksPerNode = 0, 0, 0
	step.opt.Nodelist, step.opt.Exclude = "", ""
	if r.opt.NTasks > 0 {
		step.opt.NTasks = r.opt.NTasks
	}
	return srunStep(a.within(e), &step)
}

func runSalloc(e *slurmEnv, args []string) error {
	r, err := parseAllocArgs("salloc", args)
	if err != nil {
		return err
	}
	command := r.command
	if len(command) == 0 {
		sh := e.getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		command = []string{sh}
	}
	a, err := allocate(e, r, "salloc", "interactive")
	if err != nil {
		return err
	}
	c, id := a.c, a.id
	env := os.Environ()
	for _, kv := range a.env {
		env = append(env, kv[0]+"="+kv[1])
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		a.relinquish()
		return slurmFail(1, fmt.Sprintf("salloc: error: %s: %v", command[0], err))
	}
	cmd := exec.Command(path, command[1:]...)
	cmd.Args[0] = command[0]
	cmd.Env = env
	cmd.Dir = e.cwd
	if e.interactiveIn != nil {
		cmd.Stdin = e.interactiveIn
	} else {
		cmd.Stdin = e.stdin
	}
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	// The shell handles Ctrl-C; salloc waits for it.
	signal.Ignore(os.Interrupt)
	defer signal.Reset(os.Interrupt)
	if err := cmd.Start(); err != nil {
		a.relinquish()
		return slurmFail(1, "salloc: error: "+err.Error())
	}
	// The allocation may end first (its time limit, scancel): the shell
	// is told, as salloc does.
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
			if cur, err := c.Run(e.ctx, id); err == nil && cur.Status.Finished() {
				fmt.Fprintf(e.stderr, "salloc: Job allocation %s has been revoked.\n", id)
				_ = cmd.Process.Signal(syscall.SIGHUP)
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	a.relinquish()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: max(ee.ExitCode(), 1)}
	}
	return nil
}
