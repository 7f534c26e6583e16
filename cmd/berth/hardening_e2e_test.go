//go:build linux

package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
)

// Batch scripts of every size up to Slurm's max_script_size run through
// sbatch, end to end: a 130 KB one (over Linux's 128 KiB cap on one
// argument, through which the script used to travel: the job failed with
// "argument list too long") runs whole; a 5 MB one is refused as
// slurmctld refuses it, and nothing is stored.
func TestSlurmScriptSizes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "big-n1", "--cpus", "2")
	c.waitNodes(30*time.Second, "big-n1")
	s := newSlurmSite(t, c)

	body := strings.Repeat("# "+strings.Repeat("x", 98)+"\n", 1340) // 130 KiB of comments
	s.write("big.sh", "#!/bin/bash\n"+body+`echo "ran $(wc -c <"$0") bytes"`+"\n")
	id := strings.TrimSpace(s.must("sbatch --parsable big.sh"))
	if st := s.waitState(id, 60*time.Second, "COMPLETED", "FAILED"); st != [2]string{"COMPLETED", "0:0"} {
		t.Fatalf("big.sh: %v\n%s", st, s.sh("cat slurm-"+id+".out").stdout)
	}
	size := len("#!/bin/bash\n"+body) + len(`echo "ran $(wc -c <"$0") bytes"`+"\n")
	if out := mustRead(t, filepath.Join(s.dir, "slurm-"+id+".out")); string(out) != fmt.Sprintf("ran %d bytes\n", size) {
		t.Errorf("slurm-%s.out: %q, want the script run whole (%d bytes)", id, out, size)
	}

	huge := "#!/bin/bash\n" + strings.Repeat("# "+strings.Repeat("y", 98)+"\n", 50000) + "echo never\n" // 5 MB
	if err := os.WriteFile(filepath.Join(s.dir, "huge.sh"), []byte(huge), 0o644); err != nil {
		t.Fatal(err)
	}
	before := s.must("squeue -h -t all -o %i")
	r := s.sh("sbatch huge.sh")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long\n"+
		fmt.Sprintf("sbatch: error: the batch script is %d bytes (", len(huge))) || r.stdout != "" {
		t.Errorf("sbatch huge.sh: %s", r)
	}
	if after := s.must("squeue -h -t all -o %i"); after != before {
		t.Errorf("a refused script left a job: before %q, after %q", before, after)
	}
}

// The server refuses through its API what the YAML path refuses, since
// both check with spec's one validation: values that overflowed, allocated
// no CPU, or could never start were accepted, and stored. Nothing is
// stored for any of them.
func TestAPIRefusesHostileConfigurations(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	srv := c.startServer("--agent-name", "api-n1", "--cpus", "2")
	tests := map[string]struct {
		spec string
		want string
	}{
		"max_duration overflows": {`{"commands":["true"],"max_duration":604799999999395200}`, "max_duration: 999999999999w is too long: at most 100 years (36500d)"},
		"no CPU":                 {`{"commands":["true"],"resources":{"cpu":{"count":{"min":0}}}}`, "resources.cpu.count: a node needs at least one CPU"},
		"NUL in a command":       {`{"commands":["echo a\u0000b"]}`, "commands[0]: holds a NUL byte (at byte 6)"},
		"variable over execve's": {`{"commands":["true"],"env":[{"name":"BIG","value":"` + strings.Repeat("v", 200000) + `"}]}`, "env[0]: BIG is 200004 bytes with its name: a variable may hold at most 131071"},
		"script over 4MB":        {`{"commands":["` + strings.Repeat("x", 5000000) + `"]}`, "commands: the commands hold 5000000 bytes: at most 4194304"},
		"nodes past int32":       {`{"commands":["true"],"nodes":4294967296}`, "nodes: must be at most 2147483647"},
	}
	for name, tc := range tests {
		req, err := http.NewRequest("POST", srv.url+"/api/v1/runs", strings.NewReader(`{"spec":`+tc.spec+`}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+srv.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s: %s %.300s, want 400 with %q", name, resp.Status, body, tc.want)
		}
	}
	if runs := c.mustRuns(); len(runs) != 0 {
		t.Errorf("%d runs stored, want none", len(runs))
	}
}

// A node whose data directory fills up is drained through the health
// report the agent already sends (no server change): a job fills the
// disk, the agent reports the node failed (disk full) at once, the server
// gives it no new jobs; once room is back the next check lifts the drain.
func TestFullDiskDrainsTheNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	data := filepath.Join(c.home, "data-full")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", data, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(data, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", data, err)
		}
	})
	srv := c.startServer("--no-local-agent")
	srv.startAgent("full-n1", data, "--cpus", "1", "--fleet", "full", "--health-interval", "1s", "--min-free-disk", "1MB")
	c.waitNodes(30*time.Second, "full-n1")

	// The job leaves its file outside its own directory, which goes with it.
	cfg := c.writeConfig("fill.yml", "type: task\nname: fill\nfleets: [full]\ncommands:\n  - cat /dev/zero >\"$BERTH_JOB_DIR/../../fill\"\n")
	if r := c.berth("", "apply", "-y", "--detach", "-f", cfg); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	if run := c.waitFinished("fill", 60*time.Second); run.Status != "failed" {
		t.Errorf("fill: %s, want failed (cat: no space left)", run.Status)
	}
	node := c.waitNode("full-n1", 60*time.Second, func(n api.Node) bool { return n.Health != nil && n.Health.Status == api.HealthFailure })
	if !strings.HasPrefix(node.Health.Reason, "disk full: data directory "+data+" has ") || node.Status != "idle (failure)" {
		t.Errorf("node: status %q, health %+v, want drained: disk full", node.Status, node.Health)
	}
	if err := os.Remove(filepath.Join(data, "fill")); err != nil {
		t.Fatal(err)
	}
	c.waitNode("full-n1", 60*time.Second, func(n api.Node) bool { return n.Status == "idle" })
}

// waitNode polls berth fleet --json until node name satisfies ok.
func (c *cluster) waitNode(name string, timeout time.Duration, ok func(api.Node) bool) api.Node {
	c.t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r := c.berth("", "fleet", "--json")
		var nodes []api.Node
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &nodes) != nil {
			last = r.String()
			continue
		}
		last = r.stdout
		for _, n := range nodes {
			if n.Name == name && ok(n) {
				return n
			}
		}
	}
	c.t.Fatalf("node %s: not as wanted after %v; last fleet:\n%s", name, timeout, last)
	return api.Node{}
}
