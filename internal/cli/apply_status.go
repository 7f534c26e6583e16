package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// statusEvery is how often an attached apply looks at its run's status.
const statusEvery = time.Second

// statusLine is what an attached apply says of a run's state: its status,
// the reason it waits or ended, and the attempt after a retry.
func statusLine(r *api.Run) string {
	s := fmt.Sprintf("run %s: %s", r.Name, r.Status)
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	attempt := 0
	for _, j := range r.Jobs {
		attempt = max(attempt, j.Attempt)
	}
	if attempt > 0 {
		s += fmt.Sprintf(", attempt %d", attempt+1)
	}
	return s
}

// watchStatus prints each change of the run's state to w until ctx ends,
// so that an attached apply is not silent while its run waits, is
// retried, or fails before it prints anything.
func watchStatus(ctx context.Context, c *client.Client, id int64, w io.Writer) {
	last := ""
	tick := time.NewTicker(statusEvery)
	defer tick.Stop()
	for {
		if r, err := c.Run(ctx, fmt.Sprint(id)); err == nil {
			if line := statusLine(r); line != last {
				fmt.Fprintln(w, line)
				last = line
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
