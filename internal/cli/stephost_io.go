//go:build !slim

package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// sinkBound is how much of a task's output a step host keeps that srun
// has not read: beyond it, the tasks' writes wait (a full pipe), as they
// would on a slow terminal.
const sinkBound = 4 << 20

// stepSink is one stream (stdout or stderr) of a rank's output of a step:
// it keeps what srun has not read yet and sends it to the relay, which
// acknowledges what it holds and what srun has read. After a restart of
// the server (it knows nothing: Have -1) it sends again from the oldest
// byte srun may not have.
type stepSink struct {
	c                 *client.Client
	ref               string
	id, rank, fd      int
	mu                sync.Mutex
	room              *sync.Cond
	buf               []byte // from base on
	base, sent, total int64
	restart           bool // the server knows nothing of the stream
	blocked           int  // writers waiting for room
	closed, lost      bool
	kick              chan struct{}
	done              chan struct{}
}

func newStepSink(c *client.Client, ref string, id, rank, fd int) *stepSink {
	s := &stepSink{c: c, ref: ref, id: id, rank: rank, fd: fd, kick: make(chan struct{}, 1), done: make(chan struct{})}
	s.room = sync.NewCond(&s.mu)
	return s
}

func (s *stepSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	for !s.lost && s.total > s.base && s.total-s.base+int64(len(p)) > sinkBound {
		// Waiting for room: the sender is to wait for srun to read.
		s.blocked++
		s.mu.Unlock()
		s.poke()
		s.mu.Lock()
		if !s.lost && s.total > s.base && s.total-s.base+int64(len(p)) > sinkBound {
			s.room.Wait()
		}
		s.blocked--
	}
	if !s.lost {
		s.buf = append(s.buf, p...)
		s.total += int64(len(p))
	}
	s.mu.Unlock()
	s.poke()
	return len(p), nil
}

func (s *stepSink) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// close ends the stream and returns its length.
func (s *stepSink) close() int64 {
	s.mu.Lock()
	s.closed = true
	t := s.total
	s.mu.Unlock()
	s.poke()
	return t
}

// wait returns once srun has read all of the stream (or the step is gone).
func (s *stepSink) wait() { <-s.done }

func (s *stepSink) start(ctx context.Context) { go s.loop(ctx) }

// tailWait bounds how long a step host waits, once its tasks have ended,
// for srun to read the rest of their output (srun may be gone).
const tailWait = time.Minute

func (s *stepSink) loop(ctx context.Context) {
	defer close(s.done)
	defer func() {
		s.mu.Lock()
		s.lost = true
		s.room.Broadcast()
		s.mu.Unlock()
	}()
	backoff := 200 * time.Millisecond
	var closedAt time.Time
	for {
		s.mu.Lock()
		if s.closed && closedAt.IsZero() {
			closedAt = time.Now()
		}
		if s.lost || s.closed && s.base >= s.total {
			s.mu.Unlock()
			return
		}
		o := client.OutputOptions{FD: s.fd, At: s.sent, Start: s.restart}
		if s.restart {
			o.At = s.base
		}
		data := s.buf[o.At-s.base:]
		data = append([]byte(nil), data[:min(len(data), 1<<20)]...)
		// Unread bytes matter only when the writers wait for room or the
		// tasks have ended: then ask the server to answer once srun reads.
		waitRead := s.base < s.sent && (s.closed || s.blocked > 0)
		s.mu.Unlock()
		stopping := ctx.Err() != nil || !closedAt.IsZero() && time.Since(closedAt) > tailWait
		if len(data) == 0 && !o.Start {
			if stopping {
				return // the host stops, or srun is gone: nobody will read
			}
			if !waitRead {
				select {
				case <-s.kick:
				case <-ctx.Done():
				}
				continue
			}
			// All sent, not all read: wait for srun to read (the
			// writers may be waiting for room).
			o.Wait = true
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if stopping {
			pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		}
		ack, err := s.c.StepOutput(pctx, s.ref, s.id, s.rank, o, data)
		cancel()
		if err != nil {
			var apiErr *client.APIError
			if errors.As(err, &apiErr) && apiErr.Status/100 == 4 || stopping {
				return
			}
			select { // the server is away: it comes back
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		s.mu.Lock()
		if ack.Have < 0 {
			s.restart = true
		} else {
			s.restart = false
			s.sent = min(max(ack.Have, s.base), s.total)
		}
		if cut := min(ack.Read, s.total) - s.base; cut > 0 {
			s.buf = s.buf[cut:] // the next growth leaves the read bytes behind
			s.base += cut
			s.sent = max(s.sent, s.base)
			s.room.Broadcast()
		}
		s.mu.Unlock()
		if stopping && len(data) == 0 {
			return
		}
	}
}

// frameWriter writes what it is given as frames of one type.
type frameWriter struct {
	mu  *sync.Mutex
	w   io.Writer
	typ byte
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n0 := len(p)
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(p) > 0 {
		n := min(len(p), 32<<10)
		if err := client.WriteFrame(f.w, f.typ, p[:n]); err != nil {
			return 0, err
		}
		p = p[n:]
	}
	return n0, nil
}

// readInput copies srun's input, from this rank's attach stream, to every
// task here, and ends their input with srun's (or when srun goes away).
func readInput(ctx context.Context, c *client.Client, ref string, id, rank int, tasks []io.WriteCloser) {
	defer func() {
		for _, t := range tasks {
			t.Close()
		}
	}()
	conn, err := c.Attach(ctx, ref, id, rank, "host")
	if err != nil {
		return
	}
	defer conn.Close()
	for {
		typ, p, err := client.ReadFrame(conn)
		if err != nil || typ == api.FrameEOF {
			return
		}
		if typ == api.FrameStdin {
			for _, t := range tasks {
				_, _ = t.Write(p) // a task that stopped reading misses it
			}
		}
	}
}

// runAttachedTask runs task 0 of a step on a pseudo-terminal (--pty) over
// the attach stream: input, output, the terminal's size and the exit as
// frames. srun going away hangs the terminal up (SIGHUP). It returns the
// task's exit status. A nil cmd is a command not found: srun hears it at
// once.
func runAttachedTask(ctx context.Context, c *client.Client, ref string, rank int, st *api.StepAssignment, cmd *exec.Cmd, h *hostedStep, errs io.Writer) int {
	conn, err := c.Attach(ctx, ref, st.ID, rank, "host")
	if err != nil {
		fmt.Fprintf(errs, "slurmstepd: error: task 0: cannot attach to srun: %v\n", err)
		return 1
	}
	defer conn.Close()
	var wmu sync.Mutex
	exit := func(code int) int {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
		wmu.Lock()
		_ = client.WriteFrame(conn, api.FrameExit, b[:])
		wmu.Unlock()
		return code
	}
	fail := func(code int, format string, args ...any) int {
		wmu.Lock()
		_ = client.WriteFrame(conn, api.FrameStderr, []byte(fmt.Sprintf(format, args...)))
		wmu.Unlock()
		return exit(code)
	}
	if cmd == nil {
		return fail(2, "slurmstepd: error: execve(): %s: No such file or directory\n", st.Argv[0])
	}
	stdout := &frameWriter{mu: &wmu, w: conn, typ: api.FrameStdout}
	term, err := startOnTerminal(cmd, st.Rows, st.Cols)
	if err != nil {
		return fail(2, "slurmstepd: error: execve(): %s: %v\n", st.Argv[0], err)
	}
	defer term.master.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&outputClock{w: stdout, last: &term.lastOut}, term.master)
	}()
	h.add(cmd.Process)
	go func() {
		for {
			typ, p, err := client.ReadFrame(conn)
			if err != nil {
				// srun is gone: hang up, as a closed terminal does.
				h.signal(syscall.SIGHUP)
				return
			}
			switch typ {
			case api.FrameStdin:
				_, _ = term.master.Write(p)
			case api.FrameEOF:
				go term.endOfInput()
			case api.FrameResize:
				if len(p) == 4 {
					_ = pty.Setsize(term.master, &pty.Winsize{Rows: binary.BigEndian.Uint16(p), Cols: binary.BigEndian.Uint16(p[2:])})
				}
			}
		}
	}()
	code := exitCodeOf(cmd.Wait())
	term.slave.Close() // the master reads to the end of the output
	// What the task wrote last is still in the terminal; a child left
	// holding it open does not keep the step.
	select {
	case <-copied:
	case <-time.After(500 * time.Millisecond):
	}
	return exit(code)
}

// taskTerminal is the pseudo-terminal of an attached task: the master the
// host reads and writes, the slave it keeps open to see whether the task
// has read its input, and when the task last wrote.
type taskTerminal struct {
	master, slave *os.File
	lastOut       atomic.Int64 // unix nanoseconds
}

// startOnTerminal starts cmd as the session leader of a new terminal of
// the given size (24x80 when unknown).
func startOnTerminal(cmd *exec.Cmd, rows, cols int) (*taskTerminal, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, err
	}
	if rows <= 0 || cols <= 0 {
		rows, cols = 24, 80
	}
	_ = pty.Setsize(master, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		master.Close()
		slave.Close()
		return nil, err
	}
	t := &taskTerminal{master: master, slave: slave}
	t.lastOut.Store(time.Now().UnixNano())
	return t, nil
}

// endOfInput types the terminal's end-of-file character once the task has
// read what came before and gone quiet (at most 2 s): typed ahead, while
// the line discipline is canonical, it would reach a shell that has since
// switched to raw input (readline) as a NUL and be lost, as script(1)
// knows.
func (t *taskTerminal) endOfInput() {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		fds := []unix.PollFd{{Fd: int32(t.slave.Fd()), Events: unix.POLLIN}}
		pending, _ := unix.Poll(fds, 0)
		quiet := time.Since(time.Unix(0, t.lastOut.Load())) > 100*time.Millisecond
		if pending == 0 && quiet {
			break
		}
	}
	eof := byte(4)
	if tio, err := unix.IoctlGetTermios(int(t.master.Fd()), unix.TCGETS); err == nil && tio.Cc[unix.VEOF] != 0 {
		eof = tio.Cc[unix.VEOF]
	}
	_, _ = t.master.Write([]byte{eof})
}

// outputClock notes when output went by.
type outputClock struct {
	w    io.Writer
	last *atomic.Int64
}

func (o *outputClock) Write(p []byte) (int, error) {
	o.last.Store(time.Now().UnixNano())
	return o.w.Write(p)
}
