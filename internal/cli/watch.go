package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// watchInterval is how often --watch redraws.
const watchInterval = 2 * time.Second

// isTTY tells whether w is a terminal.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// watch renders into w every interval until ctx ends (Ctrl-C), which is
// not an error. On a terminal each render replaces the one before it, in
// place; elsewhere (a pipe, a file) a render is printed only when it
// differs from the one before, after a blank line, so that a log of the
// output reads as a history.
func watch(ctx context.Context, w io.Writer, tty bool, interval time.Duration, render func(io.Writer) error) error {
	var last []byte
	t := time.NewTicker(interval)
	defer t.Stop()
	for first := true; ; first = false {
		var b bytes.Buffer
		if err := render(&b); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch {
		case tty:
			// Home, the render with each line's rest cleared, then the
			// screen's rest cleared: no flicker, no scrolling.
			out := []byte("\x1b[H")
			out = append(out, bytes.ReplaceAll(b.Bytes(), []byte("\n"), []byte("\x1b[K\n"))...)
			out = append(out, "\x1b[J"...)
			if first {
				out = append([]byte("\x1b[2J"), out...)
			}
			if _, err := w.Write(out); err != nil {
				return err
			}
		case !bytes.Equal(b.Bytes(), last):
			if !first {
				if _, err := io.WriteString(w, "\n"); err != nil {
					return err
				}
			}
			if _, err := w.Write(b.Bytes()); err != nil {
				return err
			}
			last = b.Bytes()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
