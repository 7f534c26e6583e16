package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// --watch redraws in place on a terminal, and elsewhere prints a render
// only when it changed; Ctrl-C (the context) ends it without an error.
func TestWatch(t *testing.T) {
	renders := []string{"A\nB\n", "A\nB\n", "A\nC\n", "A\nC\n"}
	run := func(tty bool) string {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		var out bytes.Buffer
		err := watch(ctx, &out, tty, time.Millisecond, func(w io.Writer) error {
			fmt.Fprint(w, renders[n])
			if n++; n == len(renders) {
				cancel()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if got, want := run(false), "A\nB\n\nA\nC\n"; got != want {
		t.Errorf("plain watch printed %q, want %q", got, want)
	}
	got := run(true)
	if !strings.HasPrefix(got, "\x1b[2J\x1b[HA\x1b[K\nB\x1b[K\n\x1b[J") || strings.Count(got, "\x1b[H") != len(renders) || strings.Count(got, "\x1b[2J") != 1 {
		t.Errorf("terminal watch printed %q", got)
	}
}
