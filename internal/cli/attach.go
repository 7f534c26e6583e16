package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// `berth attach RUN` forwards the run's ports to this machine and keeps an
// entry for it in ~/.berth/ssh/config (included from ~/.ssh/config), so
// that `ssh RUN` reaches its master job (every running job has an SSH
// endpoint) and `ssh RUN-N-0` its job N; `berth ssh-proxy` is that
// entry's ProxyCommand. Both go through the server's tunnels (api
// TunnelOpen): nothing on the run's node listens for them.

func newAttachCmd() *cobra.Command {
	var job int
	cmd := &cobra.Command{
		Use:   "attach RUN",
		Short: "Forward a run's ports to localhost and set up `ssh RUN` (Ctrl-C detaches)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			r, err := c.Run(ctx, args[0])
			if err != nil {
				return err
			}
			a, err := startAttach(ctx, c, r, job, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			defer a.close()
			return a.wait(ctx, c, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&job, "job", 0, "the job (node rank) whose ports to forward")
	return cmd
}

func newSSHProxyCmd() *cobra.Command {
	var job int
	cmd := &cobra.Command{
		Use:    "ssh-proxy RUN",
		Short:  "Join standard input and output to a run's SSH endpoint (the ProxyCommand of `ssh RUN`)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			tc, err := c.Tunnel(cmd.Context(), args[0], job, 0)
			if err != nil {
				return fmt.Errorf("ssh-proxy: %w", err)
			}
			defer tc.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(tc, cmd.InOrStdin())
				_ = tc.CloseWrite()
			}()
			go func() { _, _ = io.Copy(cmd.OutOrStdout(), tc); close(done) }()
			<-done
			return nil
		},
	}
	cmd.Flags().IntVar(&job, "job", 0, "the job (node rank) to reach")
	return cmd
}

// attachment is an attached run: its forwarded ports' listeners.
type attachment struct {
	ref  string
	lns  []net.Listener
	wg   sync.WaitGroup
	once sync.Once
}

// forwardedPort is one of a run's ports as forwarded here.
type forwardedPort struct {
	Local, Remote int
}

// startAttach forwards the ports of job of run r to localhost (each on
// its own port where free, else on a free one), writes the run's SSH
// configuration entry and prints both.
func startAttach(ctx context.Context, c *client.Client, r *api.Run, job int, out io.Writer) (*attachment, error) {
	if r.Status.Finished() {
		return nil, fmt.Errorf("run %s has finished (%s): there is nothing to attach to", r.Name, r.Status)
	}
	ref := strconv.FormatInt(r.ID, 10)
	a := &attachment{ref: ref}
	var ports []forwardedPort
	if r.Spec != nil {
		for _, pm := range r.Spec.Ports {
			local := pm.LocalPort
			if local == 0 {
				local = pm.ContainerPort
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
			if err != nil {
				ln, err = net.Listen("tcp", "127.0.0.1:0")
			}
			if err != nil {
				a.close()
				return nil, fmt.Errorf("attach: forward port %d: %w", pm.ContainerPort, err)
			}
			a.lns = append(a.lns, ln)
			fp := forwardedPort{Local: ln.Addr().(*net.TCPAddr).Port, Remote: pm.ContainerPort}
			ports = append(ports, fp)
			a.wg.Add(1)
			go a.forward(ctx, c, ln, job, fp.Remote)
		}
	}
	for _, p := range ports {
		fmt.Fprintf(out, "Forwarded http://localhost:%d → port %d of run %s\n", p.Local, p.Remote, r.Name)
	}
	// Every running job serves SSH (a native one through its shim or its
	// `berth ssh-host`, a container's through its shim): `ssh RUN` reaches
	// the master job, and `ssh RUN-N-0` job N of a multi-node run (the
	// name dstack gives that job: run, job number, replica).
	if err := writeSSHEntry(r.Name, ref, 0); err != nil {
		fmt.Fprintf(out, "warning: no SSH configuration for %s: %v\n", r.Name, err)
		return a, nil
	}
	fmt.Fprintf(out, "To connect with SSH: ssh %s\n", r.Name)
	var others []string
	for _, j := range r.Jobs {
		name := jobHost(r.Name, j.Num)
		if j.Num == 0 || slices.Contains(others, name) {
			continue
		}
		if err := writeSSHEntry(name, ref, j.Num); err != nil {
			fmt.Fprintf(out, "warning: no SSH configuration for %s: %v\n", name, err)
			continue
		}
		others = append(others, name)
	}
	if len(others) > 0 {
		fmt.Fprintf(out, "Other jobs of the run: ssh %s\n", strings.Join(others, ", ssh "))
	}
	return a, nil
}

// forward serves one forwarded port: each connection gets a tunnel.
func (a *attachment) forward(ctx context.Context, c *client.Client, ln net.Listener, job, port int) {
	defer a.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			tc, err := c.Tunnel(ctx, a.ref, job, port)
			if err != nil {
				conn.Close()
				return
			}
			joinConns(conn.(*net.TCPConn), tc)
		}()
	}
}

// wait stays attached until ctx is done (Ctrl-C) or the run finishes.
func (a *attachment) wait(ctx context.Context, c *client.Client, out io.Writer) error {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "Detached.")
			return nil
		case <-t.C:
		}
		r, err := c.Run(ctx, a.ref)
		if err == nil && r.Status.Finished() {
			fmt.Fprintf(out, "Run %s is %s.\n", r.Name, r.Status)
			return nil
		}
	}
}

func (a *attachment) close() {
	a.once.Do(func() {
		for _, ln := range a.lns {
			ln.Close()
		}
		a.wg.Wait()
	})
}

// joinConns copies both ways between a local connection and a tunnel,
// passing half-closes on.
func joinConns(l *net.TCPConn, tc *client.TunnelConn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(tc, l); err != nil {
			l.Close()
			tc.Close()
			return
		}
		_ = tc.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		if _, err := io.Copy(l, tc); err != nil && !errors.Is(err, net.ErrClosed) {
			l.Close()
			tc.Close()
			return
		}
		_ = l.CloseWrite()
	}()
	wg.Wait()
	l.Close()
	tc.Close()
}

// jobHost is the SSH host name of job num of run name other than its
// master: dstack's name of that job (run, job number, replica).
func jobHost(name string, num int) string { return fmt.Sprintf("%s-%d-0", name, num) }

// sshConfigPath is Berth's SSH configuration: ~/.berth/ssh/config.
func sshConfigPath() string { return filepath.Join(Home(), "ssh", "config") }

// writeSSHEntry puts the entry of host name, job num of run ref (its ID),
// in Berth's SSH configuration, replacing an older one, and includes that
// file from ~/.ssh/config (once).
func writeSSHEntry(name, ref string, job int) error {
	exe, err := os.Executable()
	if err != nil {
		exe = "berth"
	}
	proxy := fmt.Sprintf("%s ssh-proxy %s", shQuote(exe), ref)
	if job != 0 {
		proxy += fmt.Sprintf(" --job %d", job)
	}
	if h := os.Getenv("BERTH_HOME"); h != "" {
		proxy = "env BERTH_HOME=" + shQuote(h) + " " + proxy
	}
	entry := fmt.Sprintf("# berth run %s\nHost %s\n  HostName %s\n  ProxyCommand %s\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  ServerAliveInterval 30\n# end %s\n",
		name, name, name, proxy, name)
	path := sshConfigPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	text := dropSSHEntry(string(old), name) + entry
	if err := writeFileAtomic(path, []byte(text), 0o600); err != nil {
		return err
	}
	return includeSSHConfig(path)
}

// dropSSHEntry removes run name's entry from an SSH configuration text.
func dropSSHEntry(text, name string) string {
	begin, end := "# berth run "+name+"\n", "# end "+name+"\n"
	i := strings.Index(text, begin)
	if i < 0 {
		return text
	}
	j := strings.Index(text[i:], end)
	if j < 0 {
		return text[:i]
	}
	return text[:i] + text[i+j+len(end):]
}

// includeSSHConfig makes ~/.ssh/config include path, at its top (an
// Include after a Host line would belong to that host).
func includeSSHConfig(path string) error {
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	user := filepath.Join(home, ".ssh", "config")
	old, err := os.ReadFile(user)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	line := "Include " + path
	for _, l := range strings.Split(string(old), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(user), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(user, []byte(line+"\n\n"+string(old)), 0o600)
}

// writeFileAtomic writes path through a temporary file and a rename.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
