package container

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// ExecSpec is a command to run in a running container, as `docker exec -i
// [-t]` runs it: its standard streams attached, its user, working
// directory and environment the container's unless given.
type ExecSpec struct {
	Cmd        []string
	Env        []string // added to the container's
	User       string   // "": the container's
	WorkingDir string   // "": the container's
	// TTY gives the command a pseudo-terminal of Rows×Cols (0: the
	// engine's default size); its output is then one stream.
	TTY        bool
	Rows, Cols uint
}

// Exec is a command running in a container.
type Exec struct {
	c   *Container
	ID  string
	tty bool
	hr  client.HijackedResponse
	mu  sync.Mutex
	pid int
}

// Exec starts s in the container, attached.
func (c *Container) Exec(ctx context.Context, s ExecSpec) (*Exec, error) {
	opts := client.ExecCreateOptions{User: s.User, TTY: s.TTY, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: s.Env, WorkingDir: s.WorkingDir, Cmd: s.Cmd}
	size := client.ConsoleSize{}
	if s.TTY && s.Rows > 0 && s.Cols > 0 {
		size = client.ConsoleSize{Height: s.Rows, Width: s.Cols}
	}
	opts.ConsoleSize = size
	res, err := c.e.c.ExecCreate(ctx, c.ID, opts)
	if err != nil {
		return nil, fmt.Errorf("container: exec in %s: %w", c.Name, err)
	}
	at, err := c.e.c.ExecAttach(ctx, res.ID, client.ExecAttachOptions{TTY: s.TTY, ConsoleSize: size})
	if err != nil {
		return nil, fmt.Errorf("container: exec in %s: %w", c.Name, err)
	}
	return &Exec{c: c, ID: res.ID, tty: s.TTY, hr: at.HijackedResponse}, nil
}

// Stream copies stdin to the command (then, without a terminal, closes
// its input) and its
// output to stdout and stderr (with a terminal, all to stdout) until the
// command's output ends.
func (x *Exec) Stream(stdin io.Reader, stdout, stderr io.Writer) error {
	go func() {
		_, _ = io.Copy(x.hr.Conn, stdin)
		if !x.tty {
			// A terminal's input does not end (sshd's does not hang up a
			// session's terminal at the client's end of input either).
			_ = x.hr.CloseWrite()
		}
	}()
	var err error
	if x.tty {
		_, err = io.Copy(stdout, x.hr.Reader)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, x.hr.Reader)
	}
	return err
}

// Close drops the connection to the command (which runs on if it had not
// ended).
func (x *Exec) Close() { x.hr.Close() }

// Wait waits for the command's end (its output has ended: Stream
// returned) and returns its exit status.
func (x *Exec) Wait(ctx context.Context) (int, error) {
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		res, err := x.c.e.c.ExecInspect(ctx, x.ID, client.ExecInspectOptions{})
		if err != nil {
			return -1, fmt.Errorf("container: exec in %s: %w", x.c.Name, err)
		}
		if !res.Running {
			return res.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// Pid is the command's process ID on the host (0 if unknown), for
// signals: the engine's API has none for an exec.
func (x *Exec) Pid(ctx context.Context) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.pid == 0 {
		if res, err := x.c.e.c.ExecInspect(ctx, x.ID, client.ExecInspectOptions{}); err == nil && res.Running {
			x.pid = res.PID
		}
	}
	return x.pid
}

// Resize changes the size of the command's terminal.
func (x *Exec) Resize(ctx context.Context, rows, cols uint) error {
	_, err := x.c.e.c.ExecResize(ctx, x.ID, client.ExecResizeOptions{Height: rows, Width: cols})
	return err
}
