package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/jobssh"
)

// The SSH endpoint of a container job: Berth's binary is not in the image,
// so the job's shim serves SSH on the host, on the same socket a native
// job's `berth ssh-host` listens on (api.SSHSocket in the job's
// directory, which the agent joins to the server's tunnels), and runs
// each session through the engine's exec, as `docker exec -i [-t]` would:
// as the container's user, in its working directory and environment, in
// all its namespaces and cgroup. A forwarded connection (ssh -L) is
// dialled from inside the container's network namespace, so that
// localhost is the container's. Every container job has one, whatever
// its type; a dev environment's also ends the job after its
// inactivity_duration without a connection.

// serveContainerSSH serves the container's SSH endpoint until ctx is
// done; idle is closed when it ended for inactivity. The returned
// function stops it and removes the socket.
func serveContainerSSH(ctx context.Context, dir string, c *container.Container, ct *api.Container, note func(string, ...any)) (idle <-chan struct{}, stop func()) {
	path := filepath.Join(dir, api.SSHSocket)
	ln := listenSSHSocket(path, note)
	if ln == nil {
		return nil, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	inactivity := time.Duration(ct.SSHInactivity) * time.Second
	idleC := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := &containerSSH{c: c, shell: ct.Shell, hostNet: ct.HostNetwork}
		ended, err := jobssh.Serve(ctx, ln, b, jobssh.Options{Inactivity: inactivity})
		switch {
		case ended:
			note("no SSH connection for %s (inactivity_duration): the job ends", inactivity)
			close(idleC)
		case err != nil:
			note("the SSH endpoint failed: %v", err)
		}
	}()
	return idleC, func() {
		cancel()
		<-done
		_ = os.Remove(path)
	}
}

// containerSSH runs SSH sessions in a container (jobssh.Backend).
type containerSSH struct {
	c       *container.Container
	shell   string // the job's `shell:` ("": sh, or bash where the image has it, for a login)
	hostNet bool
}

// loginCommand is a session's interactive shell: the job's shell, else
// bash where the image has it, else sh.
func (b *containerSSH) loginCommand() []string {
	if b.shell != "" {
		return []string{shellPath(b.shell), "-l"}
	}
	return []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec /bin/sh -l"}
}

func (b *containerSSH) Start(r jobssh.Request) (jobssh.Process, error) {
	cmd := []string{shellPath(b.shell), "-c", r.Command}
	if r.Shell {
		cmd = b.loginCommand()
	}
	env := r.Env
	if r.Term != "" {
		env = append(env, "TERM="+r.Term)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := b.c.Exec(ctx, container.ExecSpec{Cmd: cmd, Env: env, TTY: r.Term != "", Rows: uint(max(r.Rows, 0)), Cols: uint(max(r.Cols, 0))})
	if err != nil {
		return nil, err
	}
	p := &execProc{x: x, out: make(chan struct{})}
	go func() {
		_ = x.Stream(r.Stdin, r.Stdout, r.Stderr)
		close(p.out)
	}()
	return p, nil
}

// execProc is a session's command in the container.
type execProc struct {
	x   *container.Exec
	out chan struct{} // closed when its output has ended
}

func (p *execProc) Wait() int {
	<-p.out
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := p.x.Wait(ctx)
	p.x.Close()
	if err != nil {
		return 255 // as ssh says of a session whose status it never got
	}
	return code
}

func (p *execProc) Resize(rows, cols int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.x.Resize(ctx, uint(max(rows, 1)), uint(max(cols, 1)))
}

// Signal signals the command's process from the host (the engine's API
// has no signal for an exec).
func (p *execProc) Signal(sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if pid := p.x.Pid(ctx); pid > 0 {
		_ = syscall.Kill(pid, sig)
	}
}

// Dial connects to host:port as the container would: from inside its
// network namespace (where localhost is the container's); where this
// process may not enter it (no CAP_SYS_ADMIN), from the host, with
// localhost meaning the container's address (which reaches a server
// listening on all of the container's addresses, not one on its
// loopback only).
func (b *containerSSH) Dial(ctx context.Context, host string, port int) (net.Conn, error) {
	var d net.Dialer
	if b.hostNet {
		return d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	st, err := b.c.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	ip, err := resolveHost(ctx, host)
	if err != nil {
		return nil, err
	}
	if st.Pid > 0 {
		c, err := dialInNetns(ctx, st.Pid, net.JoinHostPort(ip, strconv.Itoa(port)))
		var ns *netnsError
		if !errors.As(err, &ns) {
			return c, err
		}
	}
	if addr := net.ParseIP(ip); addr != nil && addr.IsLoopback() && st.Addr != "" {
		ip = st.Addr
	}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
}

// resolveHost is host's address, looked up on the host (the lookup
// happens outside the container's namespace); localhost is 127.0.0.1.
func resolveHost(ctx context.Context, host string) (string, error) {
	if host == "localhost" || host == "" {
		return "127.0.0.1", nil
	}
	if net.ParseIP(host) != nil {
		return host, nil
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return "", err
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("%s has no address", host)
	}
	return addrs[0], nil
}

// netnsError says the container's network namespace could not be
// entered.
type netnsError struct{ err error }

func (e *netnsError) Error() string {
	return "enter the container's network namespace: " + e.err.Error()
}

// dialInNetns dials addr (an IP and port) from the network namespace of
// process pid. The socket is made on a thread that entered the namespace
// and belongs to it for good; the thread is never given back to Go's
// scheduler (it ends with its goroutine).
func dialInNetns(ctx context.Context, pid int, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			res <- result{err: &netnsError{err}}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			res <- result{err: &netnsError{err}}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		res <- result{c, err}
	}()
	r := <-res
	return r.c, r.err
}

// listenSSHSocket listens on the job's SSH socket at path (root's, 0600),
// replacing a stale one; nil, said in the job's output by note, when it
// cannot.
func listenSSHSocket(path string, note func(string, ...any)) net.Listener {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		note("no SSH endpoint for this job: %v", err)
		if ln != nil {
			ln.Close()
		}
		return nil
	}
	return ln
}
