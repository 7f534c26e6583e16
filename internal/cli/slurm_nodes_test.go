package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
)

// sbatch -C, -x and -w place the job on the nodes they allow (the first
// node is not one of them); -n without -N spreads its tasks over as many
// nodes as it needs, as Slurm does (it waited for ever with ReqNodeNotAvail
// on 2-CPU nodes); sinfo and scontrol show the features agents declare;
// unknown nodes and features are refused with slurmctld's words.
func TestSbatchNodeSelection(t *testing.T) {
	c := testServerWith(t, 2, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.Register(ctx, api.NodeInfo{Name: "n2", CPUs: 2, Memory: 8 << 30, Features: []string{"ib", "nvme"}}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.AgentStream(ctx, "n2", func(api.AgentMessage) error { return nil }) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ns, _ := c.Nodes(ctx)
		if len(ns) == 2 && ns[0].Status == "idle" && ns[1].Status == "idle" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes: %+v", ns)
		}
	}

	submit := func(args ...string) string {
		t.Helper()
		out, errs, code := slurmCmd(append(append([]string{"sbatch", "--parsable"}, args...), "--wrap", "true")...)
		if code != 0 {
			t.Fatalf("sbatch %s: exit %d %s", args, code, errs)
		}
		return strings.TrimSpace(out)
	}
	where := func(id, want string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got, _, _ = slurmCmd("squeue", "-h", "-j", id, "-o", "%D %N %r"); got == want+"\n" {
				return
			}
		}
		all, _, _ := slurmCmd("squeue", "-o", "%i %D %N %r %C %m")
		nodes, _, _ := slurmCmd("sinfo", "-N", "-o", "%N %C %e %t")
		t.Errorf("job %s: squeue -o '%%D %%N %%r' %q, want %q\n%s%s", id, got, want, all, nodes)
	}
	where(submit("-C", "ib&nvme"), "1 n2 None")
	where(submit("-x", "n1"), "1 n2 None")
	where(submit("-w", "n1"), "1 n1 None")
	// Both nodes are busy now: -n 4 waits for two whole nodes.
	where(submit("-n", "4"), "2  Resources")

	if out, _, _ := slurmCmd("sinfo", "-N", "-h", "-o", "%N %f"); out != "n1 (null)\nn2 ib,nvme\n" {
		t.Errorf("sinfo -N -o '%%N %%f': %q", out)
	}
	if out, _, _ := slurmCmd("scontrol", "show", "node", "n2"); !strings.Contains(out, "   AvailableFeatures=ib,nvme\n   ActiveFeatures=ib,nvme\n") {
		t.Errorf("scontrol show node n2:\n%s", out)
	}
	for args, want := range map[string]string{
		"-C gpu":    "Invalid feature specification",
		"-w n9":     "Invalid node name specified",
		"-x n[1-9]": "Invalid node name specified",
	} {
		out, errs, code := slurmCmd(append(append([]string{"sbatch"}, strings.Fields(args)...), "--wrap", "true")...)
		if d := cmp.Diff([]any{"", "sbatch: error: Batch job submission failed: " + want + "\n", 1}, []any{out, errs, code}); d != "" {
			t.Errorf("sbatch %s (-want +got):\n%s", args, d)
		}
	}
}
