//go:build !slim

package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/api"
)

// `berth ssh-host` is a job's SSH endpoint: an SSH server (x/crypto/ssh)
// that a dev environment's job runs after its init commands, so that what
// a session runs is a process of the job: its cgroup, its user, its
// environment, its working directory, its network. It listens on a socket
// in the job's own directory (api.SSHSocket in BERTH_JOB_DIR, 0700, the
// job's user's), which only that user and the node's agent reach: the
// agent joins it to the server's tunnel, and the server opens a tunnel
// only for someone allowed into the run (`berth ssh-proxy`, the SSH
// client's ProxyCommand, authenticates with their token). So the SSH
// protocol itself asks for no authentication; its host key is made
// afresh at each start.
//
// Sessions: exec and shell, with or without a pseudo-terminal (window
// changes, signals, exit statuses), env requests; and direct-tcpip
// (ssh -L, and the port forwarding of VS Code's Remote-SSH) to any
// address the job can reach. With --inactivity, the endpoint ends the job
// (exit 0) once no SSH connection has been open for that long.

func newSSHHostCmd() *cobra.Command {
	var socket string
	var inactivity time.Duration
	cmd := &cobra.Command{
		Use:    "ssh-host",
		Short:  "Serve SSH sessions inside this job (a dev environment's endpoint)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				dir := os.Getenv("BERTH_JOB_DIR")
				if dir == "" {
					return errors.New("ssh-host: not inside a job (BERTH_JOB_DIR is not set); give --socket")
				}
				socket = filepath.Join(dir, api.SSHSocket)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveSSH(ctx, socket, inactivity, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the socket to listen on (default $BERTH_JOB_DIR/"+api.SSHSocket+")")
	cmd.Flags().DurationVar(&inactivity, "inactivity", 0, "end once no SSH connection has been open for this long (0: never)")
	return cmd
}

// serveSSH serves SSH on the Unix socket path until ctx is done or, with
// inactivity > 0, until no connection has been open for that long.
func serveSSH(ctx context.Context, path string, inactivity time.Duration, logw io.Writer) error {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		return err
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true, ServerVersion: "SSH-2.0-berth"}
	cfg.AddHostKey(signer)
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("ssh-host: %w", err)
	}
	defer ln.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("ssh-host: %w", err)
	}
	fmt.Fprintf(logw, "berth ssh-host: serving SSH for this job\n")

	var mu sync.Mutex
	open, idleSince := 0, time.Now()
	idle := make(chan struct{})
	if inactivity > 0 {
		go func() {
			t := time.NewTicker(min(inactivity/4+time.Millisecond, time.Second))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				mu.Lock()
				gone := open == 0 && time.Since(idleSince) >= inactivity
				mu.Unlock()
				if gone {
					close(idle)
					ln.Close()
					return
				}
			}
		}()
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-idle:
				fmt.Fprintf(logw, "berth ssh-host: no SSH connection for %s (inactivity_duration): the job ends\n", inactivity)
				return nil
			default:
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("ssh-host: %w", err)
		}
		mu.Lock()
		open++
		mu.Unlock()
		go func() {
			serveSSHConn(c, cfg)
			mu.Lock()
			open--
			idleSince = time.Now()
			mu.Unlock()
		}()
	}
}

func serveSSHConn(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			go serveSession(ch, creqs)
		case "direct-tcpip":
			go serveDirect(nc)
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "unsupported channel type "+nc.ChannelType())
		}
	}
}

// serveDirect forwards a direct-tcpip channel (ssh -L) to its address,
// as a connection of the job's.
func serveDirect(nc ssh.NewChannel) {
	var to struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &to); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(to.Host, strconv.Itoa(int(to.Port))), 10*time.Second)
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		conn.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(ch, conn)
		_ = ch.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(conn, ch)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	wg.Wait()
	conn.Close()
	ch.Close()
}

// sshSession is one session channel: what its requests set before it
// starts a command, and the command once started.
type sshSession struct {
	ch         ssh.Channel
	env        []string
	term       string
	rows, cols int
	mu         sync.Mutex
	cmd        *exec.Cmd
	master     *os.File
}

func serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	s := &sshSession{ch: ch}
	started := false
	for req := range reqs {
		ok := false
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil {
				s.env, ok = append(s.env, kv.Name+"="+kv.Value), true
			}
		case "pty-req":
			var p struct {
				Term                      string
				Cols, Rows, Width, Height uint32
				Modes                     string
			}
			if ssh.Unmarshal(req.Payload, &p) == nil && !started {
				s.mu.Lock()
				s.term, s.cols, s.rows, ok = p.Term, int(p.Cols), int(p.Rows), true
				s.mu.Unlock()
			}
		case "window-change":
			var p struct{ Cols, Rows, Width, Height uint32 }
			if ssh.Unmarshal(req.Payload, &p) == nil {
				s.resize(int(p.Rows), int(p.Cols))
				ok = true
			}
		case "signal":
			var p struct{ Signal string }
			if ssh.Unmarshal(req.Payload, &p) == nil {
				s.signal(p.Signal)
				ok = true
			}
		case "shell", "exec":
			var p struct{ Command string }
			if req.Type == "exec" && ssh.Unmarshal(req.Payload, &p) != nil || started {
				break
			}
			started, ok = true, true
			if req.WantReply {
				_ = req.Reply(true, nil)
			}
			go s.run(p.Command, req.Type == "shell")
			continue
		}
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
}

// loginShell is the shell sessions run in: the job's $SHELL, else bash,
// else sh.
func loginShell() string {
	if sh := os.Getenv("SHELL"); sh != "" {
		return sh
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

// run runs the session's command (a shell when interactive) to its end,
// sends its exit status and closes the channel.
func (s *sshSession) run(command string, shell bool) {
	defer s.ch.Close()
	sh := loginShell()
	cmd := exec.Command(sh)
	if !shell {
		cmd = exec.Command(sh, "-c", command)
	}
	cmd.Env = append(os.Environ(), s.env...)
	code := 0
	s.mu.Lock()
	term, rows, cols := s.term, s.rows, s.cols
	s.mu.Unlock()
	if term != "" {
		cmd.Env = append(cmd.Env, "TERM="+term)
		t, err := startOnTerminal(cmd, rows, cols)
		if err != nil {
			fmt.Fprintf(s.ch.Stderr(), "berth ssh-host: %v\n", err)
			s.exit(127)
			return
		}
		t.slave.Close()
		s.mu.Lock()
		s.cmd, s.master = cmd, t.master
		s.mu.Unlock()
		go func() { _, _ = io.Copy(t.master, s.ch) }()
		out := make(chan struct{})
		go func() { _, _ = io.Copy(s.ch, t.master); close(out) }()
		code = exitCodeOf(cmd.Wait())
		select {
		case <-out:
		case <-time.After(2 * time.Second):
		}
		t.master.Close()
	} else {
		stdin, err := cmd.StdinPipe()
		if err == nil {
			cmd.Stdout, cmd.Stderr = s.ch, s.ch.Stderr()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.WaitDelay = 2 * time.Second
			err = cmd.Start()
		}
		if err != nil {
			fmt.Fprintf(s.ch.Stderr(), "berth ssh-host: %v\n", err)
			s.exit(127)
			return
		}
		s.mu.Lock()
		s.cmd = cmd
		s.mu.Unlock()
		go func() { _, _ = io.Copy(stdin, s.ch); stdin.Close() }()
		code = exitCodeOf(cmd.Wait())
	}
	s.exit(code)
}

func (s *sshSession) exit(code int) {
	_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
}

func (s *sshSession) resize(rows, cols int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.master != nil {
		_ = pty.Setsize(s.master, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	} else {
		s.rows, s.cols = rows, cols
	}
}

// sshSignals are the signal names of RFC 4254 §6.9.
var sshSignals = map[string]syscall.Signal{"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2}

func (s *sshSession) signal(name string) {
	sig, ok := sshSignals[name]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
