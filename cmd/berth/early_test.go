//go:build linux

package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// TestKillRightAfterSubmit kills the server (with its in-process agent)
// again and again within a few milliseconds of a submission being
// acknowledged: the moments when the scheduler places the run and the agent
// records the job and hands it to a shim. Whatever moment the kill hits, the
// job either never started or is still running, and the restarted server and
// agent must run it to its end: every run must end done with its output.
//
// The kills land at seeded random delays (BERTH_E2E_SEED replays them).
func TestKillRightAfterSubmit(t *testing.T) {
	seed := crashSeed(t)
	t.Logf("seed %d (replay with BERTH_E2E_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	c := newCluster(t)
	srv := c.startServer("--agent-name", "kill-node", "--cpus", "64")
	const rounds = 50
	for i := range rounds {
		c.waitNodes(30*time.Second, "kill-node")
		name := fmt.Sprintf("ack-%d", i)
		task, err := spec.Parse(name+".yml", []byte(fmt.Sprintf("type: task\nname: %s\ncommands:\n  - echo hello %d\n", name, i)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = client.New(srv.url, srv.token).Submit(ctx, api.SubmitRequest{Spec: task})
		cancel()
		if err != nil {
			t.Fatalf("submit %s: %v", name, err)
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		srv.restart()
	}
	deadline := time.Now().Add(60 * time.Second)
	var runs []api.Run
	for {
		var err error
		runs, err = c.runs()
		if err == nil && len(runs) == rounds {
			finished := 0
			for _, r := range runs {
				if r.Status.Finished() {
					finished++
				}
			}
			if finished == rounds {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every run finished after 60s: %v %v", err, summary(runs))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var bad []string
	for i := range rounds {
		name := fmt.Sprintf("ack-%d", i)
		r := findRun(runs, name)
		if r == nil {
			t.Errorf("acknowledged run %s is gone", name)
			continue
		}
		out, _ := c.berthCombined("logs", name)
		if r.Status != api.StatusDone || out != fmt.Sprintf("hello %d\n", i) {
			bad = append(bad, fmt.Sprintf("%s: %s (%s), log %q", name, r.Status, r.Reason, out))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d runs did not run to completion after a kill right after their submission:\n%s",
			len(bad), rounds, strings.Join(bad, "\n"))
	}
}

// TestStopRightAfterStart stops runs in the first moments of their jobs:
// the agent is frozen (SIGSTOP) while the server places the runs on it and
// the user stops three and aborts three, so that when it resumes it reads
// each assignment and its stop request back to back, and signals the job's
// shim just after starting it.
//
// A stop must end its run terminated and an abort aborted, with no job
// process left, whether or not the jobs had started.
func TestStopRightAfterStart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--no-local-agent", "--stop-grace", "2s")
	agent := srv.startAgent("early-node", filepath.Join(c.home, "agent-data"), "--cpus", "8")
	c.waitNodes(30*time.Second, "early-node")

	if err := agent.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	type stopped struct {
		name, marker string
		abort        bool
	}
	var runs []stopped
	for i := range 6 {
		r := stopped{name: fmt.Sprintf("early-stop-%d", i), marker: fmt.Sprintf("%s%d", marker(), i), abort: i%2 == 1}
		if r.abort {
			r.name = fmt.Sprintf("early-abort-%d", i)
		}
		runs = append(runs, r)
	}
	stop := func(r stopped) {
		args := []string{"stop", r.name}
		if r.abort {
			args = []string{"stop", "--abort", r.name}
		}
		if res := c.berth("", args...); res.code != 0 {
			t.Fatalf("berth %s: %s", strings.Join(args, " "), res)
		}
	}
	// Each stop request follows its run's assignment on the agent's stream.
	for _, r := range runs {
		file := c.writeConfig(r.name+".yml", "type: task\nname: "+r.name+"\ncommands:\n  - sleep 100."+r.marker+"\n")
		if res := c.berth("", "apply", "-y", "--detach", "-f", file); res.code != 0 {
			t.Fatalf("apply %s: %s", r.name, res)
		}
		c.waitRun(r.name, 30*time.Second, "placed", func(run *api.Run) bool {
			return len(run.Jobs) == 1 && run.Jobs[0].Status == api.StatusProvisioning
		})
		stop(r)
	}
	if err := agent.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// Every run ends within the grace period and some slack; a second
	// request is made for those that did not, and must not be needed.
	final := map[string]*api.Run{}
	poll := func(timeout time.Duration) {
		deadline := time.Now().Add(timeout)
		for len(final) < len(runs) && time.Now().Before(deadline) {
			if list, err := c.runs(); err == nil {
				for _, r := range runs {
					if run := findRun(list, r.name); run != nil && run.Status.Finished() && final[r.name] == nil {
						final[r.name] = run
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	poll(6 * time.Second)
	var again []string
	for _, r := range runs {
		if final[r.name] == nil {
			again = append(again, r.name)
			stop(r)
		}
	}
	if len(again) > 0 {
		poll(4 * time.Second)
	}
	for _, r := range runs {
		want := [2]string{string(api.StatusTerminated), api.ReasonTerminatedByUser}
		if r.abort {
			want = [2]string{string(api.StatusAborted), api.ReasonAbortedByUser}
		}
		run := final[r.name]
		switch {
		case run == nil:
			t.Errorf("run %s: not finished 6s after it was stopped (grace 2s), nor 4s after a second request", r.name)
		case slices.Contains(again, r.name):
			t.Errorf("run %s: the first request to stop it was lost; a second one ended it %s (%s)", r.name, run.Status, run.Reason)
		case string(run.Status) != want[0] || run.Reason != want[1]:
			t.Errorf("run %s: status %s, reason %q; want %s, %s", r.name, run.Status, run.Reason, want[0], want[1])
		}
	}
	for _, r := range runs {
		if left := waitNone(sleepProcs("100."+r.marker), 3*time.Second); len(left) > 0 {
			t.Errorf("run %s: its job survived: %v", r.name, left)
		}
	}
}
