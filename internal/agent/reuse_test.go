package agent

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
)

// testAgent is an agent with no server: jobs are started with startLocked
// and their ends read from a.jobs.
func testAgent(t *testing.T) *Agent {
	t.Helper()
	a, err := New(Config{Name: "n1", DataDir: t.TempDir(), ShimCommand: []string{os.Args[0], "berth-shim"}, NoCgroups: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(a.cfg.DataDir+"/jobs", 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.mu.Lock()
		a.stopping = true
		a.mu.Unlock()
		a.releaseWarm()
	})
	return a
}

// waitFor polls cond (called with a.mu held) until it holds.
func waitFor(t *testing.T, a *Agent, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a.mu.Lock()
		ok := cond()
		a.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
	}
}

func runTestJob(t *testing.T, a *Agent, id int64, commands ...string) *localJob {
	t.Helper()
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: id, Commands: commands, Env: []string{"PATH=" + os.Getenv("PATH")}})
	j := a.jobs[id]
	a.mu.Unlock()
	return j
}

// A warm shim that finished its job takes the next one: five jobs one after
// another run in at most three shim processes (the two started ahead and the
// one started to refill), each job in its own directory with its own output.
func TestWarmShimsAreReused(t *testing.T) {
	a := testAgent(t)
	a.mu.Lock()
	a.refillShims()
	a.mu.Unlock()
	waitFor(t, a, "two warm shims", func() bool { return len(a.warm) == warmShims })
	pids := map[int]int{}
	for id := int64(1); id <= 5; id++ {
		j := runTestJob(t, a, id, fmt.Sprintf("echo job-%d", id), "pwd >/dev/null")
		waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
		// The shim goes back among the warm ones once its job is recorded.
		waitFor(t, a, "the shim back among the warm ones", func() bool { return len(a.warm) == warmShims+1 })
		if j.exit.ExitCode != 0 || j.exit.Reason != "" {
			t.Errorf("job %d: exit %+v", id, j.exit)
		}
		if out, _ := jobOutput(t, j.dir); out != fmt.Sprintf("job-%d\n", id) {
			t.Errorf("job %d: output %q", id, out)
		}
		// Idle, it no longer lives in that job's directory: a restarted
		// agent would take it for the job's supervisor.
		if shimAlive(j.shimPid, j.dir) {
			t.Errorf("job %d: its shim %d, idle again, still works in %s", id, j.shimPid, j.dir)
		}
		pids[j.shimPid]++
	}
	if len(pids) > 3 {
		t.Errorf("5 jobs ran in %d shims (%v), want at most 3: finished shims are not reused", len(pids), pids)
	}
}

// A shim the agent signalled (a stop, a forwarded signal, a new time limit)
// takes no other job: the signal may still be on its way to it.
func TestSignalledShimIsNotReused(t *testing.T) {
	a := testAgent(t)
	a.mu.Lock()
	a.refillShims()
	a.mu.Unlock()
	waitFor(t, a, "two warm shims", func() bool { return len(a.warm) == warmShims })
	j := runTestJob(t, a, 1, "echo up", "sleep 30")
	waitForOutput(t, j.dir, "up")
	a.stop(1, false)
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.Reason != exitStopped {
		t.Errorf("exit %+v, want stopped", j.exit)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if err := unix.Kill(j.shimPid, 0); errors.Is(err, unix.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the signalled shim is still running 30s after its job")
		}
	}
	// The next job goes to another shim and runs normally.
	k := runTestJob(t, a, 2, "echo next")
	waitFor(t, a, "the next job's end", func() bool { return k.exit != nil })
	if k.shimPid == j.shimPid || k.exit.ExitCode != 0 {
		t.Errorf("next job: shim %d (signalled one %d), exit %+v", k.shimPid, j.shimPid, k.exit)
	}
}
