//go:build linux

package main_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// TestDstackApplyHabits: apply without -f reads .dstack.yml; --env NAME
// passes this shell's value and refuses an unset one; dstack's overrides
// change the configuration; re-applying an active name shows the change
// and replaces the run (-y; with no change, only with --force); a finished
// name is reused; a schedule is made and apply returns, and stop NAME ends
// the schedule.
func TestDstackApplyHabits(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--agent-name", "habits-node", "--cpus", "4")
	c.waitNodes(30*time.Second, "habits-node")
	home, ok := os.LookupEnv("HOME")
	if !ok {
		t.Skip("no HOME to pass with --env HOME")
	}
	c.writeConfig(".dstack.yml", "type: task\nname: habits\ncommands:\n  - echo \"home=$HOME bar=$BAR cpus=$SLURM_CPUS_ON_NODE\"\n")

	r := c.berth("", "apply", "-y", "--env", "HOME", "--env", "BAR=x", "--cpu", "2", "--max-duration", "10m")
	if r.code != 0 || r.stdout != "home="+home+" bar=x cpus=2\n" {
		t.Fatalf("apply without -f: %s", r)
	}
	if !strings.Contains(r.stderr, " Configuration  .dstack.yml\n") {
		t.Errorf("apply without -f does not say it read .dstack.yml:\n%s", r.stderr)
	}
	c.waitFinished("habits", 30*time.Second)
	run, err := client.New(srv.url, srv.token).Run(context.Background(), "1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Spec == nil || run.Spec.MaxDuration == nil || run.Spec.MaxDuration.String() != "10m" {
		t.Errorf("--max-duration 10m: the stored run has %+v", run.Spec)
	}
	r = c.berth("", "apply", "-y", "--env", "BERTH_TEST_SURELY_UNSET")
	if r.code == 0 || !strings.Contains(r.stderr, "BERTH_TEST_SURELY_UNSET is not set") {
		t.Errorf("--env of an unset variable: %s", r)
	}
	r = c.berth("", "apply", "-y", "--gpu", "A100:nine")
	if r.code == 0 || !strings.Contains(r.stderr, "--gpu: ") {
		t.Errorf("a bad --gpu: %s", r)
	}

	// The finished name is reused, and the first run stays reachable by ID.
	long := c.writeConfig("long.yml", "type: task\nname: habits\ncommands:\n  - sleep 100\n")
	if r := c.berth("", "apply", "-y", "-d", "-f", long); r.code != 0 {
		t.Fatalf("reusing a finished name: %s", r)
	}
	first := c.waitRun("habits", 30*time.Second, "running", func(r *api.Run) bool { return r.Status == api.StatusRunning })
	if got := c.mustBerth("logs", "1"); got != "home="+home+" bar=x cpus=2\n" {
		t.Errorf("the first run by ID: %q", got)
	}

	// The same configuration again: no change, nothing done without --force.
	r = c.berth("", "apply", "-y", "-d", "-f", long)
	if r.code != 0 || !strings.Contains(r.stderr, "Active run habits already exists") || !strings.Contains(r.stderr, "Detected no changes") || !strings.Contains(r.stderr, "--force") {
		t.Errorf("re-apply without a change: %s", r)
	}
	// Asked without -y: the prompt is to stop and replace; "n" leaves it.
	r = c.berth("n\n", "apply", "-d", "-f", long, "--env", "X=1")
	if r.code == 0 || !strings.Contains(r.stderr, "  env: - -> ") || !strings.Contains(r.stderr, "Stop and replace the run habits? [y/n]: ") {
		t.Errorf("re-apply with a change, declined: %s", r)
	}
	if now := c.waitRun("habits", time.Second, "still running", func(r *api.Run) bool { return r.Status == api.StatusRunning }); now.ID != first.ID {
		t.Errorf("declining replaced the run: %d, was %d", now.ID, first.ID)
	}
	// -y with a change replaces it.
	r = c.berth("", "apply", "-y", "-d", "-f", long, "--env", "X=1")
	if r.code != 0 || !strings.Contains(r.stderr, "Stopping run habits (ID 2)") {
		t.Fatalf("re-apply -y with a change: %s", r)
	}
	second := c.waitRun("habits", 30*time.Second, "the replacement running", func(r *api.Run) bool { return r.Status == api.StatusRunning && r.ID != first.ID })
	if old := findByID(c.mustRuns(), first.ID); old == nil || old.Status != api.StatusTerminated {
		t.Errorf("the replaced run: %+v, want terminated", old)
	}
	if r := c.berth("", "stop", "-y", "habits"); r.code != 0 || !strings.Contains(r.stdout, "(ID 3)") {
		t.Errorf("stop -y habits: %s; want the active run %d stopped", r, second.ID)
	}

	// An attached apply prints the run's state changes: here, its retries.
	// It reads them once a second, so a fast machine may show a later
	// attempt first: any retry's line counts.
	flaky := c.writeConfig("flaky.yml", "type: task\nname: flaky\nretry:\n  on_events: [error]\n  duration: 3s\ncommands: [\"exit 3\"]\n")
	r = c.berth("", "apply", "-y", "-f", flaky)
	retried := regexp.MustCompile(`run flaky: submitted( \(\w+\))?, attempt ([2-9]|\d\d)`)
	if r.code == 0 || !retried.MatchString(r.stderr) || !strings.Contains(r.stderr, "run flaky: failed (exited_with_error)") {
		t.Errorf("an attached apply of a retried run: %s", r)
	}

	// A schedule: apply returns at once, saying when it fires; stop NAME
	// ends it.
	cron := c.writeConfig("nightly.yml", "type: task\nname: nightly\nschedule:\n  cron: \"0 3 * * *\"\ncommands: [\"true\"]\n")
	r = c.berth("", "apply", "-y", "-f", cron)
	if r.code != 0 || !strings.Contains(r.stdout, "Scheduled run nightly (ID 5): the next run starts at ") || !strings.Contains(r.stdout, "berth stop nightly") {
		t.Fatalf("apply of a schedule: %s", r)
	}
	if r := c.berth("", "stop", "nightly"); r.code != 0 || !strings.Contains(r.stdout, "Run nightly (ID 5): terminated") {
		t.Errorf("stop nightly: %s", r)
	}

	// ps, as dstack's: newest first; with nothing active, the last run.
	c.waitFinished("habits", 30*time.Second)
	if ids := psIDs(c.mustBerth("ps")); strings.Join(ids, ",") != "5" {
		t.Errorf("ps with nothing active lists %v, want the last run, 5", ids)
	}
	if ids := psIDs(c.mustBerth("ps", "-a")); strings.Join(ids, ",") != "5,4,3,2,1" {
		t.Errorf("ps -a lists %v, want newest first 5,4,3,2,1", ids)
	}
}

func findByID(runs []api.Run, id int64) *api.Run {
	for i := range runs {
		if runs[i].ID == id {
			return &runs[i]
		}
	}
	return nil
}

// psIDs is the ID column of berth ps's table.
func psIDs(out string) []string {
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 {
			ids = append(ids, f[1])
		}
	}
	return ids
}
