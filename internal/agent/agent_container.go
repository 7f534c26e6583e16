package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
)

// detectContainers fills the node's report of its container engine
// ("docker 1.41" or "none (why)"); the server offers `image:` runs only to
// nodes that have one.
func (a *Agent) detectContainers(ctx context.Context) {
	a.info.Containers = container.Describe(ctx)
	if a.info.CanRunContainers() {
		a.info.EngineID = container.EngineID(ctx)
	}
}

// resumeContainerLocked gives a container job whose shim died a new shim,
// which finds the container again (shim_container.go) and carries on: the
// container outlives its supervisor, as a process job does not. It reports
// whether it did; call with a.mu held, or before the agent runs.
func (a *Agent) resumeContainerLocked(j *localJob) bool {
	if j.asg.Container == nil || j.dir == "" || a.stopping || j.shimStarts >= maxShimStarts {
		return false
	}
	if _, err := os.Stat(filepath.Join(j.dir, fileContainer)); errors.Is(err, os.ErrNotExist) {
		return false
	}
	if _, err := os.Stat(filepath.Join(j.dir, fileExit)); err == nil {
		return false
	}
	cmd, _, _, err := a.startShim(j.dir)
	if err != nil {
		a.log.Error("restart the shim of a container job", "job_id", j.id, "err", err)
		return false
	}
	a.log.Warn("the shim of a container job was gone; a new one takes over its container", "job_id", j.id)
	if err := writeFileAtomic(filepath.Join(j.dir, fileShimID), []byte(strconv.Itoa(cmd.Process.Pid))); err != nil {
		a.log.Warn("record shim pid", "job_id", j.id, "err", err)
	}
	j.shimPid, j.shimStarts = cmd.Process.Pid, j.shimStarts+1
	if j.started.IsZero() {
		j.started = a.now()
	}
	go func() {
		_ = cmd.Wait()
		a.finished(j)
	}()
	return true
}

// dropContainerLocked removes the container of a job whose directory goes:
// its shim removes it after recording the exit, but a shim that died in
// between leaves it behind. Best effort, in the background.
func (a *Agent) dropContainerLocked(j *localJob) {
	if j.dir == "" {
		return
	}
	var rec containerRecord
	if err := readJSON(filepath.Join(j.dir, fileContainer), &rec); err != nil || rec.Name == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e, err := container.Open(ctx)
		if err != nil {
			return
		}
		defer e.Close()
		c, err := e.Get(ctx, rec.Name)
		if err != nil {
			return
		}
		if err := c.Remove(ctx); err != nil {
			a.log.Warn("remove a finished job's container", "job_id", j.id, "container", rec.Name, "err", err)
		} else {
			a.log.Info("removed a finished job's leftover container", "job_id", j.id, "container", rec.Name)
		}
	}()
}
