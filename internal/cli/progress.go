package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/pack"
	"github.com/berth-hq/berth/internal/spec"
)

// progressLine is a status line kept at the bottom of a terminal, redrawn
// in place ("\r", erase to the end of the line). Output written through
// its writers (progressLine.writer) clears it first and redraws it after
// a whole line; while a line of output is unfinished it stays hidden, so
// that no output is ever erased.
type progressLine struct {
	mu      sync.Mutex
	tty     io.Writer
	text    string
	shown   bool
	partial bool // the output's last write did not end a line
}

const eraseLine = "\r\x1b[K"

// set replaces the line's text.
func (p *progressLine) set(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.text = s
	if p.partial {
		return
	}
	io.WriteString(p.tty, eraseLine+s)
	p.shown = true
}

// end leaves the last text as a line of its own (a summary).
func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		io.WriteString(p.tty, eraseLine)
		p.shown = false
	}
	if p.text != "" {
		if p.partial {
			io.WriteString(p.tty, "\n")
		}
		io.WriteString(p.tty, p.text+"\n")
	}
	p.text = ""
}

// writer is w with the line kept below what it writes.
func (p *progressLine) writer(w io.Writer) io.Writer { return &progressWriter{p: p, w: w} }

type progressWriter struct {
	p *progressLine
	w io.Writer
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	p := pw.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		io.WriteString(p.tty, eraseLine)
		p.shown = false
	}
	n, err := pw.w.Write(b)
	if len(b) > 0 {
		p.partial = b[len(b)-1] != '\n'
	}
	if !p.partial && p.text != "" {
		io.WriteString(p.tty, p.text)
		p.shown = true
	}
	return n, err
}

// arrayProgressEvery is how often berth apply reads an array's progress.
const arrayProgressEvery = time.Second

// arrayProgress shows, while berth apply follows an array's output on a
// terminal (errw), a line with the array's tasks created, running,
// finished and failed, redrawn in place. Elsewhere, or for a run that is
// not an array, it changes nothing. It returns the writers to follow the
// output through and a function that stops it (leaving the last count as
// a line).
func arrayProgress(ctx context.Context, c *client.Client, run *api.Run, t *spec.Task, out, errw io.Writer) (io.Writer, io.Writer, func()) {
	if t.Array == "" || !isTTY(errw) {
		return out, errw, func() {}
	}
	p := &progressLine{tty: errw}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(arrayProgressEvery)
		defer tick.Stop()
		for {
			if s, err := readArrayProgress(ctx, c, run.ID); err == nil {
				p.set(s)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p.writer(out), p.writer(errw), func() {
		cancel()
		<-done
		p.end()
	}
}

// readArrayProgress lists an array and its tasks (GET /runs?id=ID) and
// says how far it is.
func readArrayProgress(ctx context.Context, c *client.Client, id int64) (string, error) {
	var parent *api.Run
	var tasks []api.Status
	err := c.EachRun(ctx, client.ListOptions{All: true, IDs: []int64{id}}, func(r *api.Run) error {
		switch {
		case r.ID == id:
			x := *r
			parent = &x
		case r.ArrayID == id:
			tasks = append(tasks, r.Status)
		}
		return nil
	})
	if err != nil || parent == nil || parent.Array == nil {
		return "", fmt.Errorf("array %d: not found (%v)", id, err)
	}
	return arrayProgressText(parent, tasks), nil
}

// arrayProgressText is the progress line of an array whose created tasks
// are in the statuses given.
func arrayProgressText(parent *api.Run, tasks []api.Status) string {
	var running, done, failed int
	for _, s := range tasks {
		switch s {
		case api.StatusRunning, api.StatusTerminating:
			running++
		case api.StatusDone:
			done++
		case api.StatusFailed, api.StatusAborted, api.StatusTerminated:
			failed++
		}
	}
	a := parent.Array
	var b bytes.Buffer
	fmt.Fprintf(&b, "array %s: %d tasks: %d created, %d running, %d done, %d failed", parent.Name, a.Count, a.Count-a.NWaiting, running, done, failed)
	if a.NWaiting > 0 {
		fmt.Fprintf(&b, ", %d not created yet", a.NWaiting)
	}
	return b.String()
}

// uploadProgress is, on a terminal (w), a line "WHAT: SENT of TOTAL
// (P%)" redrawn in place as an archive is uploaded, at most every
// percent, and erased when done; elsewhere nothing (a nil callback).
func uploadProgress(w io.Writer, what string, total int64) (func(int64), func()) {
	if !isTTY(w) || total <= 0 {
		return nil, func() {}
	}
	p := &progressLine{tty: w}
	last := int64(-1)
	return func(sent int64) {
			pct := sent * 100 / total
			if pct == last {
				return
			}
			last = pct
			p.set(fmt.Sprintf("%s: %s of %s sent (%d%%)", what, pack.Size(sent), pack.Size(total), pct))
		}, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.shown {
				io.WriteString(w, eraseLine)
			}
		}
}
