package container

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Logs copies the container's output to stdout and stderr, demultiplexed,
// following it until the container stops (or ctx ends). The output is read
// from its start; the first skip bytes (of both streams together, in the
// engine's order) are dropped, so that a caller that already holds them
// resumes exactly where it stopped. It returns the offset reached: skip plus
// the bytes written.
//
// An engine only follows a running container: called on one that has
// exited, Logs copies what there is and returns.
func (c *Container) Logs(ctx context.Context, skip int64, stdout, stderr io.Writer) (int64, error) {
	rc, err := c.e.c.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return skip, fmt.Errorf("container: logs %s: %w", c.Name, err)
	}
	defer rc.Close()
	pos := &position{skip: skip}
	_, err = stdcopy.StdCopy(skipWriter{pos, stdout}, skipWriter{pos, stderr}, rc)
	if err != nil && ctx.Err() == nil {
		return max(pos.at, skip), fmt.Errorf("container: logs %s: %w", c.Name, err)
	}
	return max(pos.at, skip), nil
}

// position counts the bytes seen in both streams; StdCopy writes to one
// stream at a time, so it needs no lock.
type position struct {
	skip int64 // bytes still to drop
	at   int64 // bytes seen, dropped or written
}

type skipWriter struct {
	pos *position
	w   io.Writer
}

func (s skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.pos.skip > 0 {
		k := min(int64(len(p)), s.pos.skip)
		p = p[k:]
		s.pos.skip -= k
		s.pos.at += k
	}
	if len(p) > 0 {
		if _, err := s.w.Write(p); err != nil {
			return 0, err
		}
		s.pos.at += int64(len(p))
	}
	return n, nil
}
