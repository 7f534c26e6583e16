//go:build !slim

package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
)

// A step of an allocation: srun records it with the server's step relay,
// the step hosts of the nodes srun does not run here run their tasks
// (slurm_stephost.go), and srun copies their output to its own, forwards
// its signals and waits for their exits. Task 0 may be attached (its
// input, and with --pty a terminal) through a stream of its own.

type remoteStep struct {
	c     *client.Client
	ref   string
	id    int
	nodes []int // the step's node ranks, in step order
	ranks []int // those the relay dispatches
	hosts []string
	ntask int
}

type remoteExit struct {
	host       string
	task, code int
}

// stepPlacement picks the step's nodes among the allocation's (their
// ranks): -w names them, -x leaves some out, -N takes the first so many.
func stepPlacement(e *slurmEnv, r *allocRequest, hosts []string, want int) ([]int, error) {
	o := &r.opt
	fail := func() ([]int, error) {
		return nil, fmt.Errorf("Unable to create step for job %s: Requested node configuration is not available", e.getenv("SLURM_JOB_ID"))
	}
	rankOf := map[string]int{}
	for k, h := range hosts {
		rankOf[h] = k
	}
	var allowed []int
	if o.Nodelist != "" {
		names, err := slurm.ExpandHostlist(o.Nodelist)
		if err != nil {
			return fail()
		}
		chosen := map[int]bool{}
		for _, n := range names {
			k, ok := rankOf[n]
			if !ok {
				return fail()
			}
			chosen[k] = true
		}
		for k := range hosts {
			if chosen[k] {
				allowed = append(allowed, k)
			}
		}
		if o.Nodes == 0 {
			want = len(allowed)
		}
	} else {
		for k := range hosts {
			allowed = append(allowed, k)
		}
	}
	if o.Exclude != "" {
		names, err := slurm.ExpandHostlist(o.Exclude)
		if err != nil {
			return fail()
		}
		out := map[string]bool{}
		for _, n := range names {
			out[n] = true
		}
		kept := allowed[:0:0]
		for _, k := range allowed {
			if !out[hosts[k]] {
				kept = append(kept, k)
			}
		}
		allowed = kept
	}
	if o.Nodes == 0 {
		want = min(want, len(allowed))
	}
	if want > len(allowed) || len(allowed) == 0 {
		return fail()
	}
	return allowed[:max(want, 1)], nil
}

// createStep records the step; ranks are the nodes the relay dispatches
// (the others run here).
func createStep(e *slurmEnv, r *allocRequest, hosts []string, nodes, ranks []int, ntasks int, attach bool) (*remoteStep, error) {
	newc := e.newStepClient
	if newc == nil {
		newc = e.newClient
	}
	c, err := newc()
	if err != nil {
		return nil, err
	}
	rs := &remoteStep{c: c, ref: e.getenv("SLURM_JOB_ID"), nodes: nodes, ranks: ranks, hosts: hosts, ntask: ntasks}
	var names []string
	for _, k := range nodes {
		names = append(names, rs.host(k))
	}
	env := append([]string(nil), e.environ()...)
	for k, v := range map[string]string{
		"SLURM_NTASKS": strconv.Itoa(ntasks), "SLURM_NPROCS": strconv.Itoa(ntasks),
		"SLURM_STEP_NUM_TASKS": strconv.Itoa(ntasks), "SLURM_STEP_NUM_NODES": strconv.Itoa(len(nodes)),
		"SLURM_STEP_NODELIST": slurm.CompressHostlist(names),
	} {
		env = append(env, k+"="+v)
	}
	if r.opt.CPUsPerTask > 0 {
		env = append(env, "SLURM_CPUS_PER_TASK="+strconv.Itoa(r.opt.CPUsPerTask))
	}
	if r.label {
		env = append(env, "BERTH_SLURM_STEP_LABEL=1")
	}
	dir := r.opt.Chdir
	if dir == "" {
		dir = e.cwd
	}
	req := api.StepRequest{Argv: r.command, Env: env, Dir: dir, Name: r.opt.JobName, Nodes: nodes, Ranks: ranks, NTasks: ntasks,
		PTY: r.pty && attach, Attach: attach}
	for _, k := range nodes {
		if indexOf(ranks, k) < 0 {
			req.Here = append(req.Here, k)
		}
	}
	if req.PTY && e.interactiveIn != nil {
		if cols, rows, err := term.GetSize(int(e.interactiveIn.Fd())); err == nil {
			req.Rows, req.Cols = rows, cols
		}
	}
	created, err := c.CreateStep(e.ctx, rs.ref, req)
	if err != nil {
		return nil, err
	}
	rs.id = created.ID
	return rs, nil
}

// exitHere records the exit of the tasks srun ran itself on node rank k.
func (rs *remoteStep) exitHere(ctx context.Context, k, code int) {
	_ = rs.c.StepExit(ctx, rs.ref, rs.id, k, api.StepExit{Code: code})
}

// follow copies the step's output on the dispatched nodes to stdout and
// stderr until all of them have exited, and returns their exits. A server
// away for a while (a restart) is waited for. cancelled runs once if the
// step is cancelled (scancel JOB.STEP).
func (rs *remoteStep) follow(ctx context.Context, stdout, stderr io.Writer, cancelled func()) []remoteExit {
	// Alive even while the writes below wait (srun | less): the server
	// kills a step whose srun it stops hearing from.
	alive, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(20 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-alive.Done():
				return
			case <-t.C:
				_ = rs.c.StepAlive(alive, rs.ref, rs.id)
			}
		}
	}()
	from, errFrom := map[int]int64{}, map[int]int64{}
	var away time.Time
	knows := false
	for {
		st, err := rs.c.StepStatus(ctx, rs.ref, rs.id, from, errFrom, knows)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if away.IsZero() {
				away = time.Now()
			}
			if errors.Is(err, client.ErrNotFound) || time.Since(away) > 10*time.Minute {
				fmt.Fprintf(stderr, "srun: error: step %s.%d: lost the other nodes' tasks: %v\n", rs.ref, rs.id, err)
				var out []remoteExit
				for _, k := range rs.ranks {
					out = append(out, remoteExit{host: rs.host(k), task: rs.firstTask(k), code: 1})
				}
				return out
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		away = time.Time{}
		if st.Cancelled && !knows {
			knows = true
			cancelled()
		}
		all := true
		mine := st.Ranks[:0:0]
		for _, ro := range st.Ranks {
			// The nodes srun dispatched (after a restart the server lists
			// the step's every node).
			if indexOf(rs.ranks, ro.Rank) >= 0 {
				mine = append(mine, ro)
			}
		}
		st.Ranks = mine
		for _, ro := range st.Ranks {
			if len(ro.Data) > 0 {
				_, _ = stdout.Write(ro.Data)
			}
			if len(ro.Err) > 0 {
				_, _ = stderr.Write(ro.Err)
			}
			from[ro.Rank], errFrom[ro.Rank] = ro.Next, ro.ErrNext
			all = all && ro.Exited
		}
		if all {
			// Say what was read, so that the hosts may forget it.
			_, _ = rs.c.StepStatus(ctx, rs.ref, rs.id, from, errFrom, knows)
			var out []remoteExit
			for _, ro := range st.Ranks {
				out = append(out, remoteExit{host: rs.host(ro.Rank), task: rs.firstTask(ro.Rank), code: ro.Code})
			}
			return out
		}
	}
}

// watch waits, for a step whose every task srun runs itself, until ctx
// ends or the step is cancelled (then it runs cancelled).
func (rs *remoteStep) watch(ctx context.Context, cancelled func()) {
	for ctx.Err() == nil {
		st, err := rs.c.StepStatus(ctx, rs.ref, rs.id, nil, nil, false)
		if err == nil && st.Cancelled {
			cancelled()
			return
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// firstTask is the global rank of node rank k's first task.
func (rs *remoteStep) firstTask(k int) int {
	_, first := stepShare(rs.ntask, len(rs.nodes), max(indexOf(rs.nodes, k), 0))
	return first
}

func (rs *remoteStep) host(k int) string {
	if k < len(rs.hosts) {
		return rs.hosts[k]
	}
	return "node" + strconv.Itoa(k)
}

// feedInput sends srun's input to every task of the step: to the other
// nodes of rs (nil: none) over an attach stream each, and to the tasks
// here (local), as srun broadcasts its input by default; the end of it
// ends theirs.
func feedInput(e *slurmEnv, rs *remoteStep, local []io.WriteCloser) {
	var outs []io.Writer
	var streams []io.ReadWriteCloser
	var mu sync.Mutex
	var ranks []int
	if rs != nil {
		ranks = rs.ranks
	}
	for _, k := range ranks {
		conn, err := rs.c.Attach(e.ctx, rs.ref, rs.id, k, "client")
		if err != nil {
			fmt.Fprintf(e.stderr, "srun: error: step %s.%d: no input to node %s: %v\n", rs.ref, rs.id, rs.host(k), err)
			continue
		}
		streams = append(streams, conn)
		outs = append(outs, &frameWriter{mu: &mu, w: conn, typ: api.FrameStdin})
	}
	for _, l := range local {
		outs = append(outs, l)
	}
	defer func() {
		for _, s := range streams {
			mu.Lock()
			_ = client.WriteFrame(s, api.FrameEOF, nil)
			mu.Unlock()
			s.Close()
		}
		for _, l := range local {
			l.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := e.stdin.Read(buf)
		if n > 0 {
			for _, o := range outs {
				_, _ = o.Write(buf[:n]) // a task that stopped reading misses it
			}
		}
		if err != nil {
			return
		}
	}
}

// attach joins the stream of task 0 on a terminal (--pty): srun's
// terminal, raw, goes to it and its output comes back; it returns the
// task's exit status (-1 when the stream broke before it said).
func (rs *remoteStep) attach(e *slurmEnv) int {
	k := rs.nodes[0]
	conn, err := rs.c.Attach(e.ctx, rs.ref, rs.id, k, "client")
	if err != nil {
		fmt.Fprintf(e.stderr, "srun: error: step %s.%d: attach to task 0: %v\n", rs.ref, rs.id, err)
		return -1
	}
	defer conn.Close()
	var wmu sync.Mutex
	send := func(typ byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return client.WriteFrame(conn, typ, p)
	}
	in := e.stdin
	if e.interactiveIn != nil {
		in = e.interactiveIn
		if fd := int(e.interactiveIn.Fd()); term.IsTerminal(fd) {
			if old, err := term.MakeRaw(fd); err == nil {
				defer term.Restore(fd, old)
			}
			// The terminal's size follows the window's.
			winch := make(chan os.Signal, 1)
			signal.Notify(winch, syscall.SIGWINCH)
			defer signal.Stop(winch)
			go func() {
				for range winch {
					if cols, rows, err := term.GetSize(fd); err == nil {
						var b [4]byte
						binary.BigEndian.PutUint16(b[:], uint16(rows))
						binary.BigEndian.PutUint16(b[2:], uint16(cols))
						_ = send(api.FrameResize, b[:])
					}
				}
			}()
		}
	}
	if in != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := in.Read(buf)
				if n > 0 && send(api.FrameStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					_ = send(api.FrameEOF, nil)
					return
				}
			}
		}()
	} else {
		_ = send(api.FrameEOF, nil)
	}
	for {
		typ, p, err := client.ReadFrame(conn)
		if err != nil {
			return -1
		}
		switch typ {
		case api.FrameStdout:
			_, _ = e.stdout.Write(p)
		case api.FrameStderr:
			_, _ = e.stderr.Write(p)
		case api.FrameExit:
			if len(p) == 4 {
				return int(int32(binary.BigEndian.Uint32(p)))
			}
			return -1
		}
	}
}

// forwardSignals sends srun's signals on to the step's tasks, here
// (local) and on the other nodes, as srun does: one Ctrl-C reports, a
// second within a second interrupts the tasks.
func (rs *remoteStep) forwardSignals(e *slurmEnv, local func(syscall.Signal)) func() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT)
	done := make(chan struct{})
	go func() {
		var last time.Time
		for {
			select {
			case <-done:
				return
			case s := <-ch:
				sig := s.(syscall.Signal)
				if sig == syscall.SIGINT {
					if time.Since(last) > time.Second {
						last = time.Now()
						fmt.Fprintln(e.stderr, "srun: interrupt (one more within 1 sec to abort)")
						fmt.Fprintf(e.stderr, "srun: StepId=%s.%d tasks 0-%d: running\n", rs.ref, rs.id, max(rs.ntask-1, 0))
						continue
					}
					fmt.Fprintf(e.stderr, "srun: sending Ctrl-C to StepId=%s.%d\n", rs.ref, rs.id)
				}
				if local != nil {
					local(sig)
				}
				if len(rs.ranks) > 0 {
					_ = rs.c.StepSignal(context.WithoutCancel(e.ctx), rs.ref, rs.id, int(sig))
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
