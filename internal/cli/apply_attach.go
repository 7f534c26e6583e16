package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// attachOnStart is what `berth apply` does for a run with ports or a dev
// environment while it streams the output: once the run is running, it
// forwards the ports and writes the SSH entry as `berth attach` does, and
// for a dev environment prints the IDE's link and the ssh command. The
// returned function undoes the forwarding.
func attachOnStart(ctx context.Context, c *client.Client, t *spec.Task, run *api.Run, errw io.Writer) func() {
	if !t.IsDevEnvironment() && len(t.Ports) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan *attachment, 1)
	go func() {
		ref := strconv.FormatInt(run.ID, 10)
		for {
			r, err := c.Run(ctx, ref)
			if ctx.Err() != nil || err == nil && r.Status.Finished() {
				done <- nil
				return
			}
			if err == nil && r.Status == api.StatusRunning {
				a, err := startAttach(ctx, c, r, 0, errw)
				if err != nil {
					fmt.Fprintf(errw, "attach: %v\n", err)
					done <- nil
					return
				}
				if t.IsDevEnvironment() {
					dir := t.WorkingDir
					if d, err := remoteDir(ctx, c, ref); err == nil {
						dir = d
					}
					fmt.Fprintf(errw, "To open in %s: %s\n", ideName(t.IDE), t.IDELink(r.Name, dir))
				}
				done <- a
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() {
		cancel()
		if a := <-done; a != nil {
			a.close()
		}
	}
}

func ideName(ide string) string {
	if ide == "cursor" {
		return "Cursor"
	}
	return "VS Code"
}

// remoteDir is the working directory of a dev environment's sessions,
// asked of its SSH endpoint (it may take a moment to start: init runs
// first).
func remoteDir(ctx context.Context, c *client.Client, ref string) (string, error) {
	var last error
	for range 60 {
		dir, err := remoteRun(ctx, c, ref, "pwd")
		if err == nil {
			return strings.TrimSpace(dir), nil
		}
		last = err
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return "", last
}
