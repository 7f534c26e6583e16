package cli

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
)

// slurmCmd runs a Slurm command through Main and returns what it printed
// and its status.
func slurmCmd(args ...string) (stdout, stderr string, code int) {
	var out, errw bytes.Buffer
	code = Main(args, strings.NewReader(""), &out, &errw)
	return out.String(), errw.String(), code
}

var timestampRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)

// scontrol update NodeName=… State=DRAIN|DOWN|RESUME and PartitionName=…
// State=DOWN|UP as Slurm's scontrol takes them (both were refused:
// "Update of this parameter is not supported"), and what sinfo and
// scontrol show afterwards.
func TestScontrolUpdateNodeAndPartition(t *testing.T) {
	c, path := policyServer(t, "fleets:\n  cpu:\n    partitions: [batch]\n")
	ctx := context.Background()
	type step struct {
		args         []string
		stdout, errs string
		code         int
	}
	steps := []step{
		{args: []string{"scontrol", "update", "NodeName=n1", "State=DRAIN"},
			errs: "You must specify a reason when DOWNING or DRAINING a node. Request denied\n", code: 1},
		{args: []string{"scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=bad DIMM"}},
		{args: []string{"sinfo"}, stdout: "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\nberth*       up   infinite      1  drain n1\nbatch        up   infinite      0    n/a \ncpu          up   infinite      0    n/a \n"},
		{args: []string{"sinfo", "-R"}, stdout: "REASON               USER      TIMESTAMP           NODELIST\nbad DIMM             admin     TIME n1\n"},
		{args: []string{"scontrol", "update", "NodeName=n1", "State=DOWN", "Reason=psu"}},
		{args: []string{"sinfo", "-h", "-p", "berth", "-o", "%t %E"}, stdout: "down psu\n"},
		{args: []string{"scontrol", "update", "NodeName=n9", "State=RESUME"}, errs: "slurm_update error: Invalid node name specified\n", code: 1},
		{args: []string{"scontrol", "update", "NodeName=n1", "State=RESUME"}},
		{args: []string{"sinfo", "-R"}, stdout: "REASON               USER      TIMESTAMP           NODELIST\n"},
		{args: []string{"scontrol", "update", "PartitionName=nope", "State=DOWN"}, errs: "slurm_update error: Invalid partition name specified\n", code: 1},
		{args: []string{"scontrol", "update", "PartitionName=batch", "State=DOWN"}},
		{args: []string{"sinfo", "-h", "-p", "batch", "-o", "%P %a"}, stdout: "batch down\n"},
		{args: []string{"scontrol", "update", "PartitionName=batch", "State=UP"}},
		{args: []string{"sinfo", "-h", "-p", "batch", "-o", "%P %a"}, stdout: "batch up\n"},
	}
	for _, s := range steps {
		out, errs, code := slurmCmd(s.args...)
		out = timestampRE.ReplaceAllString(out, "TIME")
		if d := cmp.Diff([]any{s.stdout, s.errs, s.code}, []any{out, errs, code}); d != "" {
			t.Errorf("%s (-want +got):\n%s", strings.Join(s.args, " "), d)
		}
		if strings.Join(s.args, " ") == "scontrol update PartitionName=batch State=DOWN" {
			text, _ := os.ReadFile(path)
			if !strings.Contains(string(text), "partitions:\n  batch:\n    state: down\n") {
				t.Errorf("policy file after State=DOWN:\n%s", text)
			}
			if p, err := c.Policy(ctx); err != nil || !cmp.Equal(p.DownPartitions, []string{"batch"}) {
				t.Errorf("policy in force: %+v, %v", p, err)
			}
		}
	}
	// Only an admin may.
	t.Setenv("BERTH_TOKEN", "bob-token")
	for _, args := range [][]string{
		{"scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=x"},
		{"scontrol", "update", "PartitionName=batch", "State=DOWN"},
	} {
		_, errs, code := slurmCmd(args...)
		if errs != "slurm_update error: Access/permission denied\n" || code != 1 {
			t.Errorf("%s as bob: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}

// A job asking for more GPUs on a node than any node has is refused at
// submission with slurmctld's words (sbatch-err-too-many-gpus.txt), and
// nothing is stored; one that some node could hold is accepted.
func TestSbatchRefusesGPUsBeyondEveryNode(t *testing.T) {
	c := testServer(t)
	gpus := make([]api.GPU, 4)
	for i := range gpus {
		gpus[i] = api.GPU{Index: i, Name: "NVIDIA A100-SXM4-80GB", Memory: 80 << 30}
	}
	if err := c.Register(context.Background(), api.NodeInfo{Name: "g1", CPUs: 8, Memory: 8 << 30, GPUs: gpus}); err != nil {
		t.Fatal(err)
	}
	_, want := convtest.ReadGolden(t, "sbatch-err-too-many-gpus.txt")
	if want != "" {
		t.Fatalf("the golden printed %q on stdout", want)
	}
	for _, args := range [][]string{{"--gres=gpu:8"}, {"--gres=gpu:a100:5"}, {"--gpus-per-node=t4:1"}} {
		out, errs, code := slurmCmd(append(append([]string{"sbatch"}, args...), "--wrap", "true")...)
		if d := cmp.Diff([]any{"", "sbatch: error: Batch job submission failed: Requested node configuration is not available\n", 1}, []any{out, errs, code}); d != "" {
			t.Errorf("sbatch %s (-want +got):\n%s", args, d)
		}
	}
	if out, _, _ := slurmCmd("squeue", "-h"); out != "" {
		t.Errorf("a refused job was stored:\n%s", out)
	}
	if out, errs, code := slurmCmd("sbatch", "--parsable", "--gres=gpu:a100:4", "--wrap", "true"); code != 0 || strings.TrimSpace(out) == "" {
		t.Errorf("sbatch --gres=gpu:a100:4: exit %d, %q %q", code, out, errs)
	}
}

// scancel of another user's job prints slurmctld's refusal without -v and
// exits with its code's low byte (ESLURM_ACCESS_DENIED, 2002: 210), as
// scancel.c's _cancel_job_id does; the job goes on waiting.
func TestScancelOthersJob(t *testing.T) {
	policyServer(t, "")
	id, _, code := slurmCmd("sbatch", "--parsable", "--hold", "--wrap", "true")
	id = strings.TrimSpace(id)
	if code != 0 || id == "" {
		t.Fatalf("sbatch: exit %d %q", code, id)
	}
	t.Setenv("BERTH_TOKEN", "bob-token")
	for _, args := range [][]string{{"scancel", id}, {"scancel", "--signal=USR1", id}} {
		out, errs, code := slurmCmd(args...)
		if d := cmp.Diff([]any{"", "scancel: error: Kill job error on job id " + id + ": Access/permission denied\n", 210}, []any{out, errs, code}); d != "" {
			t.Errorf("%s as bob (-want +got):\n%s", strings.Join(args, " "), d)
		}
	}
	if _, errs, code := slurmCmd("scancel", "99999"); errs != "" || code != 0 {
		t.Errorf("scancel of an unknown job without -v: exit %d, %q (Slurm: nothing, 0)", code, errs)
	}
	t.Setenv("BERTH_TOKEN", "tok")
	if out, _, _ := slurmCmd("squeue", "-h", "-o", "%i %T", "-j", id); out != id+" PENDING\n" {
		t.Errorf("after bob's scancel: %q", out)
	}
}
