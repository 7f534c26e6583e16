package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
)

// jobWithChild is a job whose main shell and a child process each say
// which signals reach them; the main shell ends on USR1.
const jobWithChild = `(trap 'echo child got usr1; exit 0' USR1; sleep 30 & wait) &
trap 'echo main got usr1; sleep 0.3; exit 0' USR1
echo up
sleep 30 & wait`

// TestShimSignalBeforeLimit: `signal:` reaches every process of the job
// Before seconds ahead of max_duration; with BatchOnly (Slurm's B:) only
// the main process. The job ends of it, not of the limit.
func TestShimSignalBeforeLimit(t *testing.T) {
	for name, batch := range map[string]bool{"all processes": false, "batch only": true} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			asg := api.Assignment{MaxDuration: 4, Signal: &api.SignalAt{Number: 10, Before: 3, BatchOnly: batch}}
			ex, out := shimRun(t, shimSpec{Script: jobWithChild, Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: t.TempDir(),
				MaxDuration: asg.MaxDuration, Grace: 5, Assignment: asg}, nil)
			took := time.Since(start)
			if ex.ExitCode != 0 || ex.Reason != "" {
				t.Errorf("exit = %+v, want 0 with no reason (the job ended on its own, before the limit)", ex)
			}
			lines := strings.Split(strings.TrimSpace(strings.TrimPrefix(out, "[stdout]")), "\n")
			slices.Sort(lines)
			want := []string{"child got usr1", "main got usr1", "up"}
			if batch {
				want = []string{"main got usr1", "up"}
			}
			if !slices.Equal(lines, want) {
				t.Errorf("output %q, want the lines %q", out, want)
			}
			if took < 900*time.Millisecond || took > 3500*time.Millisecond {
				t.Errorf("the job ended %v after the shim started; want about 1 s (4 s limit, signal 3 s before)", took)
			}
		})
	}
}

func TestSignalDue(t *testing.T) {
	usr1 := func(before int64) *api.SignalAt { return &api.SignalAt{Number: 10, Before: before} }
	tests := map[string]struct {
		asg  api.Assignment
		want time.Duration
		ok   bool
	}{
		"before the limit":      {asg: api.Assignment{MaxDuration: 3600, Signal: usr1(300)}, want: 3300 * time.Second, ok: true},
		"limit nearer: at once": {asg: api.Assignment{MaxDuration: 30, Signal: usr1(60)}, want: 0, ok: true},
		"no limit":              {asg: api.Assignment{Signal: usr1(60)}},
		"no signal":             {asg: api.Assignment{MaxDuration: 30}},
	}
	for name, tc := range tests {
		if d, ok := signalDue(tc.asg); d != tc.want || ok != tc.ok {
			t.Errorf("%s: signalDue = %v, %v; want %v, %v", name, d, ok, tc.want, tc.ok)
		}
	}
}

// TestHostfile: the server's hostfile lands in the job's directory, named by
// an absolute DSTACK_MPI_HOSTFILE that the run's env may still override.
func TestHostfile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	env, err := writeHostfile("job", api.Assignment{Hostfile: "127.0.1.1 slots=8\n127.0.2.1 slots=8\n"})
	if err == nil {
		t.Fatal("writeHostfile into a missing job directory succeeded")
	}
	if err := os.Mkdir("job", 0o700); err != nil {
		t.Fatal(err)
	}
	asg := api.Assignment{Hostfile: "127.0.1.1 slots=8\n127.0.2.1 slots=8\n", Env: []string{"A=1"}}
	if env, err = writeHostfile("job", asg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "job", fileHostfile)
	if want := []string{"DSTACK_MPI_HOSTFILE=" + path}; !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != asg.Hostfile {
		t.Errorf("hostfile = %q, %v; want %q", b, err, asg.Hostfile)
	}
	all := jobEnv(asg, env...)
	if got := all[len(all)-2:]; !slices.Equal(got, []string{env[0], "A=1"}) {
		t.Errorf("job env ends %q: the agent's variable goes before the server's", got)
	}
	if env, err := writeHostfile("job", api.Assignment{}); env != nil || err != nil {
		t.Errorf("without a hostfile: %q, %v; want nothing", env, err)
	}
	if got := containerHostfileEnv(asg); !slices.Equal(got, []string{"DSTACK_MPI_HOSTFILE=" + containerHostfile}) {
		t.Errorf("container env = %q", got)
	}
}

// TestShimContainerSignalAndHostfile: a container job finds the hostfile
// mounted where DSTACK_MPI_HOSTFILE says, and gets `signal:` before its
// limit in its main process.
func TestShimContainerSignalAndHostfile(t *testing.T) {
	e := containertest.Engine(t)
	sp := containerJob(`cat "$DSTACK_MPI_HOSTFILE"`, "trap 'echo usr1; exit 0' USR1", "sleep 60 & wait")
	sp.MaxDuration = 4
	sp.Assignment.MaxDuration = 4
	sp.Assignment.Signal = &api.SignalAt{Number: 10, Before: 3}
	sp.Assignment.Hostfile = "127.0.1.1 slots=2\n127.0.2.1 slots=2\n"
	dir := t.TempDir()
	b, _ := json.Marshal(sp)
	if err := os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := writeHostfile(dir, sp.Assignment); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left, _ := e.Find(context.Background(), map[string]string{container.LabelDir: dir})
		for _, c := range left {
			t.Errorf("container %s outlived its shim", c.Name)
			_ = c.Remove(context.Background())
		}
	})
	ex, out, errs := finishShim(t, dir, execShimIn(t, dir))
	if ex.ExitCode != 0 || ex.Reason != "" {
		t.Errorf("exit = %+v (stderr %q), want 0 with no reason: the job ends on the signal, before its limit", ex, errs)
	}
	if want := sp.Assignment.Hostfile + "usr1\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}
