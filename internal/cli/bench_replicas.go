//go:build !slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/store"
)

// benchReplicas is n `berth server --replica` on one PostgreSQL database
// (issue 19), sharing a fresh $BERTH_HOME (so one secrets key and one
// admin token), each at a fixed address, and one agent given all their
// URLs: bench crash --replicas kills the leader.
type benchReplicas struct {
	home  string
	exe   string
	addrs []string
	args  [][]string
	procs []*exec.Cmd
	agent *exec.Cmd
	tok   string
	c     *client.Client
}

func startBenchReplicas(ctx context.Context, n int, db string) (*benchReplicas, error) {
	if kind, _, err := store.ParseLocation(db); err != nil || kind != store.KindPostgres {
		return nil, errors.New("bench: --replicas needs --db postgres://… (an empty database the replicas share)")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		return nil, err
	}
	r := &benchReplicas{home: home, exe: exe, procs: make([]*exec.Cmd, n)}
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.stop()
			return nil, err
		}
		addr := l.Addr().String()
		l.Close()
		r.addrs = append(r.addrs, addr)
		args := []string{"server", "--replica", "--no-local-agent", "--db", db, "--listen", addr, "--advertise-url", "http://" + addr,
			"--socket", "none"}
		if benchPolicy != "" {
			args = append(args, "--policy", benchPolicy)
		}
		r.args = append(r.args, args)
	}
	for i := range n {
		if err := r.launch(ctx, i, i == 0); err != nil {
			r.stop()
			return nil, err
		}
		if i == 0 {
			// The first leads: it wrote the admin token.
			conf, err := readClientConfig(filepath.Join(home, "config.yml"))
			if err != nil {
				r.stop()
				return nil, err
			}
			r.tok = conf.Token
		}
	}
	r.c = client.New(r.urls(), r.tok)
	logf, err := os.Create(filepath.Join(home, "agent.log"))
	if err != nil {
		r.stop()
		return nil, err
	}
	defer logf.Close()
	args := []string{"agent", "--server", r.urls(), "--name", "bench-agent", "--data-dir", filepath.Join(home, "agent"), "--socket", "none",
		"--cpus", "8"} // the runs are two echos: more at once than the host's cores
	if benchNoCgroups {
		args = append(args, "--no-cgroups")
	}
	r.agent = exec.Command(exe, args...)
	r.agent.Env = append(os.Environ(), "BERTH_HOME="+home, "BERTH_TOKEN="+r.tok)
	r.agent.Stdout, r.agent.Stderr = logf, logf
	if err := r.agent.Start(); err != nil {
		r.stop()
		return nil, err
	}
	if err := (&benchServer{c: r.c}).waitNodes(ctx, 1); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

func (r *benchReplicas) urls() string {
	var u []string
	for _, a := range r.addrs {
		u = append(u, "http://"+a)
	}
	return strings.Join(u, ",")
}

// launch starts replica i and waits until it answers its own address
// (with lead: until it leads).
func (r *benchReplicas) launch(ctx context.Context, i int, lead bool) error {
	logf, err := os.OpenFile(filepath.Join(r.home, fmt.Sprintf("server-%d.log", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(r.exe, r.args[i]...)
	cmd.Env = append(os.Environ(), "BERTH_HOME="+r.home)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	r.procs[i] = cmd
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		leads, up := r.probe(i)
		if up && (leads || !lead) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench: replica %d did not start; see %s", i, logf.Name())
		}
	}
}

// probe asks replica i for /healthz: up when it answers at all, lead
// when it answers itself (a follower's answer names the leader).
func (r *benchReplicas) probe(i int) (lead, up bool) {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + r.addrs[i] + "/healthz")
	if err != nil {
		return false, false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && resp.Header.Get("X-Berth-Leader") == "", true // the header internal/roles/replica.go sets
}

// killLeader kills the leading replica with SIGKILL, waits until the API
// answers again through the replicas (a follower took over), and starts
// the killed one again, as a follower: the time from the kill to the
// answer.
func (r *benchReplicas) killLeader(ctx context.Context) (time.Duration, error) {
	leader := -1
	for deadline := time.Now().Add(60 * time.Second); leader < 0; time.Sleep(50 * time.Millisecond) {
		for i := range r.procs {
			if lead, _ := r.probe(i); lead {
				leader = i
			}
		}
		if leader < 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
			return 0, errors.New("bench: no replica leads")
		}
	}
	t0 := time.Now()
	_ = r.procs[leader].Process.Signal(syscall.SIGKILL)
	_ = r.procs[leader].Wait()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := r.c.Status(sctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("bench: no replica took over: %w", err)
		}
	}
	d := time.Since(t0)
	return d, r.launch(ctx, leader, false)
}

func (r *benchReplicas) stop() {
	for _, k := range append([]*exec.Cmd{r.agent}, r.procs...) {
		if k == nil || k.Process == nil {
			continue
		}
		_ = k.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = k.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = k.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(r.home)
}
