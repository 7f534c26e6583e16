package jobssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// Backend runs what a connection asks for, as the job.
type Backend interface {
	// Start starts a session's command (or its shell, with Shell).
	Start(r Request) (Process, error)
	// Dial connects to host:port as the job would (direct-tcpip).
	Dial(ctx context.Context, host string, port int) (net.Conn, error)
}

// Request is one session's command and its streams.
type Request struct {
	Command string
	Shell   bool     // an interactive shell rather than Command
	Env     []string // NAME=VALUE the client sent
	// Term is the terminal type of a session with a pseudo-terminal
	// ("": none), Rows and Cols its size.
	Term       string
	Rows, Cols int
	Stdin      io.Reader // ends at the client's end of input
	Stdout     io.Writer
	Stderr     io.Writer // unused with a terminal (one stream)
}

// Process is a started session command.
type Process interface {
	// Wait waits for the command's end and for its output to be copied,
	// and returns its exit status as a shell reports it (128+N for
	// signal N).
	Wait() int
	Resize(rows, cols int)
	Signal(sig syscall.Signal)
}

// Options shape an endpoint.
type Options struct {
	// Inactivity ends Serve once no connection has been open for this
	// long (0: never).
	Inactivity time.Duration
}

// Serve serves SSH connections accepted from ln with b until ctx is done
// (nil) or, with o.Inactivity, until no connection has been open for that
// long (idle true). It closes ln, and the connections still open when it
// returns (their sessions' processes are the Backend's to end).
func Serve(ctx context.Context, ln net.Listener, b Backend, o Options) (idle bool, err error) {
	defer ln.Close()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return false, err
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		return false, err
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true, ServerVersion: "SSH-2.0-berth"}
	cfg.AddHostKey(signer)

	var mu sync.Mutex
	open, idleSince := 0, time.Now()
	conns := map[net.Conn]bool{}
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	idleC := make(chan struct{})
	if o.Inactivity > 0 {
		go func() {
			t := time.NewTicker(min(o.Inactivity/4+time.Millisecond, time.Second))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				mu.Lock()
				gone := open == 0 && time.Since(idleSince) >= o.Inactivity
				mu.Unlock()
				if gone {
					close(idleC)
					ln.Close()
					return
				}
			}
		}()
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-idleC:
				return true, nil
			default:
			}
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		mu.Lock()
		open++
		conns[c] = true
		mu.Unlock()
		go func() {
			serveConn(ctx, c, cfg, b)
			mu.Lock()
			open--
			delete(conns, c)
			idleSince = time.Now()
			mu.Unlock()
		}()
	}
}

func serveConn(ctx context.Context, c net.Conn, cfg *ssh.ServerConfig, b Backend) {
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
			go serveSession(ch, creqs, b)
		case "direct-tcpip":
			go serveDirect(ctx, nc, b)
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "unsupported channel type "+nc.ChannelType())
		}
	}
}

// serveDirect forwards a direct-tcpip channel (ssh -L) to its address,
// as a connection of the job's.
func serveDirect(ctx context.Context, nc ssh.NewChannel, b Backend) {
	var to struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &to); err != nil || to.Port == 0 || to.Port > 65535 {
		_ = nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := b.Dial(dctx, to.Host, int(to.Port))
	cancel()
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
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	wg.Wait()
	conn.Close()
	ch.Close()
}

// session is one session channel: what its requests set before it starts
// a command, and the command once started.
type session struct {
	ch         ssh.Channel
	b          Backend
	env        []string
	term       string
	mu         sync.Mutex
	rows, cols int
	proc       Process
}

func serveSession(ch ssh.Channel, reqs <-chan *ssh.Request, b Backend) {
	s := &session{ch: ch, b: b}
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
				if s.term == "" {
					s.term = "xterm"
				}
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

// run runs the session's command to its end, sends its exit status and
// closes the channel.
func (s *session) run(command string, shell bool) {
	defer s.ch.Close()
	s.mu.Lock()
	r := Request{Command: command, Shell: shell, Env: s.env, Term: s.term, Rows: s.rows, Cols: s.cols,
		Stdin: s.ch, Stdout: s.ch, Stderr: s.ch.Stderr()}
	s.mu.Unlock()
	p, err := s.b.Start(r)
	if err != nil {
		_, _ = io.WriteString(s.ch.Stderr(), "berth: "+err.Error()+"\n")
		s.exit(127)
		return
	}
	s.mu.Lock()
	s.proc = p
	rows, cols := s.rows, s.cols
	s.mu.Unlock()
	if r.Term != "" && (rows != r.Rows || cols != r.Cols) {
		p.Resize(rows, cols) // changed while it started
	}
	s.exit(p.Wait())
}

func (s *session) exit(code int) {
	_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
}

func (s *session) resize(rows, cols int) {
	s.mu.Lock()
	s.rows, s.cols = rows, cols
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.Resize(rows, cols)
	}
}

// signals are the signal names of RFC 4254 §6.9.
var signals = map[string]syscall.Signal{"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2}

func (s *session) signal(name string) {
	sig, ok := signals[name]
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if ok && p != nil {
		p.Signal(sig)
	}
}
