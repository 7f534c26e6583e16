package jobssh

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// Native runs sessions as processes of the endpoint's own (which runs
// inside the job), in the job's environment and working directory.
type Native struct{}

// loginShell is the shell sessions run in: $SHELL, else bash, else sh.
func loginShell() string {
	if sh := os.Getenv("SHELL"); sh != "" {
		return sh
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

// Dial connects to host:port from the job.
func (Native) Dial(ctx context.Context, host string, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}

// Start starts r's command in the login shell, on a new terminal when r
// has one.
func (Native) Start(r Request) (Process, error) {
	sh := loginShell()
	cmd := exec.Command(sh)
	if !r.Shell {
		cmd = exec.Command(sh, "-c", r.Command)
	}
	cmd.Env = append(os.Environ(), r.Env...)
	return StartCommand(cmd, r, (*exec.Cmd).Start)
}

// StartCommand starts cmd (its path, arguments, environment and working
// directory set; its SysProcAttr's credential, if any, kept) as r's
// session: its streams joined to r's, or on a new terminal (TERM set,
// owned by cmd's user) when r has one; in a process group or session of
// its own, so that a signal reaches all of it. start starts it (cmd.Start,
// or a start inside a control group).
func StartCommand(cmd *exec.Cmd, r Request, start func(*exec.Cmd) error) (Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if r.Term == "" {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = r.Stdout, r.Stderr
		cmd.SysProcAttr.Setpgid = true
		cmd.WaitDelay = 2 * time.Second
		if err := start(cmd); err != nil {
			return nil, err
		}
		go func() { _, _ = io.Copy(stdin, r.Stdin); stdin.Close() }()
		return &nativeProc{cmd: cmd}, nil
	}
	cmd.Env = append(cmd.Env, "TERM="+r.Term)
	rows, cols := r.Rows, r.Cols
	if rows <= 0 || cols <= 0 {
		rows, cols = 24, 80
	}
	master, slave, err := pty.Open()
	if err != nil {
		return nil, err
	}
	if c := cmd.SysProcAttr.Credential; c != nil {
		// As sshd does: the terminal is its user's.
		_ = slave.Chown(int(c.Uid), int(c.Gid))
	}
	_ = pty.Setsize(master, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	err = start(cmd)
	slave.Close()
	if err != nil {
		master.Close()
		return nil, err
	}
	p := &nativeProc{cmd: cmd, master: master, out: make(chan struct{})}
	go func() { _, _ = io.Copy(master, r.Stdin) }()
	go func() { _, _ = io.Copy(r.Stdout, master); close(p.out) }()
	return p, nil
}

// nativeProc is a session's process, with its terminal's master if any.
type nativeProc struct {
	cmd    *exec.Cmd
	master *os.File
	out    chan struct{} // closed when the terminal's output is copied
}

func (p *nativeProc) Wait() int {
	code := exitCode(p.cmd.Wait())
	if p.master != nil {
		select {
		case <-p.out:
		case <-time.After(2 * time.Second):
		}
		p.master.Close()
	}
	return code
}

func (p *nativeProc) Resize(rows, cols int) {
	if p.master != nil {
		_ = pty.Setsize(p.master, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	}
}

// Signal signals the session's process group (it leads one).
func (p *nativeProc) Signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// exitCode is a process's exit status as a shell reports it.
func exitCode(err error) int {
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
