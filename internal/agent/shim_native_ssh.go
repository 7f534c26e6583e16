package agent

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/jobssh"
)

// The SSH endpoint of a job without a container: its shim serves SSH
// (internal/jobssh) on a socket in the job's directory (fileNativeSSH,
// the shim's, 0600, which only the node's agent reaches and joins to the
// server's tunnels) and starts each session as it started the job: as
// the job's user (the shim runs as root and drops to the job's
// credential), in the job's control group, with the job's environment
// (BERTH_*, the run's env and secrets) and working directory. A
// forwarded connection (ssh -L) is dialled from the host, whose network
// the job shares. So every native job has one, whatever its type: `ssh
// RUN` of a task reaches it as a dev environment's is reached.
//
// A trivial job must not pay for it: the shim starts serving only once
// the job has lived nativeSSHDelay (a timer in its loop until then, no
// listener, no goroutine), and the agent waits for the socket when a
// tunnel asks for it sooner (tunnel.go).
//
// A dev environment without a container also runs `berth ssh-host` in its
// job (spec.DevCommands), which owns its inactivity_duration; the agent
// prefers that endpoint once it listens (api.SSHSocket) and the shim's
// serves the job until then (during its init).
//
// What a session does not share with the job: a mount namespace of the
// job's own (volumes and shm_size on a native run, mountns.go); its
// sessions see the host's mounts.

// fileNativeSSH is the socket of the shim's SSH endpoint in the job's
// directory. Not api.SSHSocket: a job running as the agent's user has
// that directory as its BERTH_JOB_DIR, where its own `berth ssh-host`
// listens.
const fileNativeSSH = "shim-ssh.sock"

// nativeSSHDelay is how long a job lives before its shim serves SSH.
const nativeSSHDelay = 100 * time.Millisecond

// serveNativeSSH serves the SSH endpoint of the job sp, whose control
// group is grp (nil: none), in dir; note says what fails in the job's
// output. The returned function stops it: it closes the socket and its
// connections and kills every session's processes.
func serveNativeSSH(dir string, sp *shimSpec, grp *cgroup.Group, note func(string, ...any)) (stop func()) {
	path := filepath.Join(dir, fileNativeSSH)
	ln := listenSSHSocket(path, note)
	if ln == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &nativeSSH{sp: sp, grp: grp, procs: map[*exec.Cmd]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := jobssh.Serve(ctx, ln, b, jobssh.Options{}); err != nil {
			note("the SSH endpoint failed: %v", err)
		}
	}()
	return func() {
		cancel()
		<-done
		b.end()
		_ = os.Remove(path)
	}
}

// nativeSSH starts SSH sessions as processes of a job on the host
// (jobssh.Backend).
type nativeSSH struct {
	sp  *shimSpec
	grp *cgroup.Group

	mu    sync.Mutex
	procs map[*exec.Cmd]bool // the sessions' commands still running
	ended bool
}

// sessionShell is a session's shell: the job's `shell:` where it names
// bash or sh, else bash, else sh.
func (b *nativeSSH) sessionShell() string {
	if sh := b.sp.Shell; sh != "" {
		if p := shellPath(sh); filepath.Base(p) == "bash" || filepath.Base(p) == "sh" {
			return p
		}
	}
	if p, err := lookBash(); err == nil {
		return p
	}
	return "/bin/sh"
}

func (b *nativeSSH) Start(r jobssh.Request) (jobssh.Process, error) {
	sh := b.sessionShell()
	cmd := exec.Command(sh)
	if !r.Shell {
		cmd = exec.Command(sh, "-c", r.Command)
	}
	cmd.Env = append(append([]string(nil), b.sp.Env...), r.Env...)
	cmd.Dir = b.sp.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if c := b.sp.Cred; c != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: c.Groups}
	}
	start := (*exec.Cmd).Start
	if b.grp != nil {
		start = b.grp.Start // in the job's group from its first instruction
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return nil, errJobEnded
	}
	p, err := jobssh.StartCommand(cmd, r, start)
	if err != nil {
		return nil, err
	}
	b.procs[cmd] = true
	return &nativeSession{Process: p, done: func() {
		b.mu.Lock()
		delete(b.procs, cmd)
		b.mu.Unlock()
	}}, nil
}

// Dial connects to host:port from the host: a job without a container
// shares its network.
func (b *nativeSSH) Dial(ctx context.Context, host string, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}

// end kills what the sessions still run (each leads a process group or
// session of its own, out of the job's), and refuses new ones.
func (b *nativeSSH) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
	for cmd := range b.procs {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	}
}

// errJobEnded: a session asked for as its job ended.
var errJobEnded = errors.New("the job has ended")

// nativeSession is a session's process, forgotten by its endpoint once
// it has ended.
type nativeSession struct {
	jobssh.Process
	done func()
}

func (s *nativeSession) Wait() int {
	code := s.Process.Wait()
	s.done()
	return code
}
