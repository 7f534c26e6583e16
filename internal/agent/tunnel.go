package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/api"
)

// tunnel serves one tunnel the server asked for (api.TunnelOpen): it
// connects to the target inside the job, dials the server back with a
// connection of its own and copies between the two until both directions
// have ended. Nothing listens on the node: both connections are the
// agent's own, outbound or local.
func (a *Agent) tunnel(ctx context.Context, t api.TunnelOpen) {
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	target, err := a.dialJob(dctx, t)
	if err != nil {
		a.log.Info("tunnel refused", "job_id", t.JobID, "port", t.Port, "err", err)
		// The server answers a refusal without switching: nothing to keep.
		if c, err := a.c.AgentTunnel(dctx, t.ID, err.Error()); err == nil {
			c.Close()
		}
		return
	}
	back, err := a.c.AgentTunnel(dctx, t.ID, "")
	if err != nil {
		target.Close()
		a.log.Warn("tunnel: dial the server back", "job_id", t.JobID, "err", err)
		return
	}
	api.Pipe(target, target, back, back)
}

// dialJob connects to the tunnel's target: the job's SSH endpoint (a
// socket in its directory) or a port on the job's address.
func (a *Agent) dialJob(ctx context.Context, t api.TunnelOpen) (net.Conn, error) {
	a.mu.Lock()
	j := a.jobs[t.JobID]
	var dir string
	var asg api.Assignment
	running := j != nil && j.exit == nil && !j.orphan
	if running {
		dir, asg = j.dir, j.asg
	}
	a.mu.Unlock()
	if !running {
		return nil, fmt.Errorf("job %d is not running on this node", t.JobID)
	}
	var d net.Dialer
	if t.SSH {
		// The socket is in BERTH_JOB_DIR where the job serves it itself
		// (a native dev environment's `berth ssh-host`): the user's own
		// directory when the job runs as its user (runas.go), else the
		// agent's. Every other job's shim serves one in the job's
		// directory: a container job's once its container has started
		// (shim_ssh.go), a native job's once it has lived a moment
		// (shim_native_ssh.go); wait for it.
		abs, _ := filepath.Abs(dir)
		paths := []string{filepath.Join(a.userJobDir(t.JobID), api.SSHSocket), filepath.Join(abs, api.SSHSocket)}
		if asg.Container == nil {
			paths = append(paths, filepath.Join(abs, fileNativeSSH))
		}
		for {
			for _, p := range paths {
				if _, err := os.Stat(p); err == nil {
					return d.DialContext(ctx, "unix", p)
				}
			}
			select {
			case <-ctx.Done():
				if asg.Container != nil {
					return nil, fmt.Errorf("job %d: its container has not started yet", t.JobID)
				}
				return nil, fmt.Errorf("job %d has no SSH endpoint yet", t.JobID)
			case <-time.After(50 * time.Millisecond):
			}
			if !a.jobRunning(t.JobID) {
				return nil, fmt.Errorf("job %d is not running on this node", t.JobID)
			}
		}
	}
	host := "127.0.0.1"
	if asg.Container != nil && !asg.Container.HostNetwork {
		addr, err := a.containerAddr(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("job %d: the container's address: %w", t.JobID, err)
		}
		host = addr
	}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(t.Port)))
}

// jobRunning reports whether job id runs here.
func (a *Agent) jobRunning(id int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.jobs[id]
	return j != nil && j.exit == nil && !j.orphan
}

// containerAddr is the network address of the container of the job whose
// directory is dir.
func (a *Agent) containerAddr(ctx context.Context, dir string) (string, error) {
	var rec containerRecord
	if err := readJSON(filepath.Join(dir, fileContainer), &rec); err != nil || rec.Name == "" {
		return "", errors.New("no container yet")
	}
	e, err := container.Open(ctx)
	if err != nil {
		return "", err
	}
	defer e.Close()
	c, err := e.Get(ctx, rec.Name)
	if err != nil {
		return "", err
	}
	st, err := c.Inspect(ctx)
	if err != nil {
		return "", err
	}
	if st.Addr == "" {
		return "127.0.0.1", nil
	}
	return st.Addr, nil
}
