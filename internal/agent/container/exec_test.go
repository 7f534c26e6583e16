package container_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
)

// An exec runs in the container with its environment and working
// directory, reads stdin to its end, keeps stdout and stderr apart and
// gives its exit status; with a terminal, it has one. (The test image's
// static busybox cannot read a terminal's size, stty fails with ENOTTY:
// the size is not checked here.)
func TestExec(t *testing.T) {
	t.Parallel()
	e := containertest.Engine(t)
	s := newSpec(t, "sleep 300")
	s.Env, s.WorkingDir = []string{"FROM_CONTAINER=yes"}, "/tmp"
	c := start(t, e, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	x, err := c.Exec(ctx, container.ExecSpec{Cmd: []string{"/bin/sh", "-c", `echo $FROM_CONTAINER $ADDED $(pwd); cat; echo oops >&2; exit 5`}, Env: []string{"ADDED=too"}})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := x.Stream(strings.NewReader("typed\n"), &out, &errb); err != nil {
		t.Fatal(err)
	}
	code, err := x.Wait(ctx)
	x.Close()
	if err != nil || code != 5 {
		t.Errorf("exit status %d, %v; want 5", code, err)
	}
	if out.String() != "yes too /tmp\ntyped\n" || errb.String() != "oops\n" {
		t.Errorf("stdout %q, stderr %q; want the container's env and dir, the input, and oops apart", out.String(), errb.String())
	}

	x, err = c.Exec(ctx, container.ExecSpec{Cmd: []string{"/bin/sh", "-c", "tty"}, TTY: true, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := x.Stream(strings.NewReader(""), &out, &out); err != nil {
		t.Fatal(err)
	}
	code, err = x.Wait(ctx)
	x.Close()
	if got := strings.ReplaceAll(out.String(), "\r", ""); err != nil || code != 0 || !strings.Contains(got, "/dev/pts/") {
		t.Errorf("with a terminal: exit %d, %v, %q; want a /dev/pts terminal", code, err, got)
	}
}
