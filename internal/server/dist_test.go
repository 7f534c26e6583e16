package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/spec"
)

// distAgent is a real agent with a declared address (as `berth agent
// --addr`).
type distAgent struct {
	name, addr, gpus string
	cpus             int
}

func startDistAgent(t *testing.T, h *harness, o distAgent) {
	t.Helper()
	cfg := agent.Config{Server: h.http.URL, Token: testToken, Name: o.name, Addr: o.addr, DataDir: t.TempDir(), CPUs: o.cpus,
		ShimCommand: []string{os.Args[0], "berth-shim"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogTick: 20 * time.Millisecond}
	if o.gpus != "" {
		g, err := agent.ParseGPUs(o.gpus, func(s string) (int64, error) { b, err := spec.ParseBytes(s); return int64(b), err })
		if err != nil {
			t.Fatal(err)
		}
		cfg.GPUs, cfg.DeclaredGPUs = g, true
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "node "+o.name+" online", func() bool {
		ns, err := h.c.Nodes(context.Background())
		for _, n := range ns {
			if err == nil && n.Name == o.name && n.Status != "offline" {
				return true
			}
		}
		return false
	})
}

// byRank sorts a run's output lines "R| …" (each job prefixes its own)
// into one string per rank.
func byRank(out string) map[string]string {
	ranks := map[string]string{}
	for _, line := range strings.SplitAfter(out, "\n") {
		if r, rest, ok := strings.Cut(line, "| "); ok {
			ranks[r] += rest
		}
	}
	return ranks
}

// TestDistributedEnv: every job of a two-node run learns the master's
// address and the run's port, its rank, the nodes' addresses, the GPU
// counts, Slurm's compressed node list in Slurm's node order, and an MPI
// hostfile; a one-node run gets the same variables about itself.
func TestDistributedEnv(t *testing.T) {
	h := newHarness(t, t.TempDir())
	// node10 registers first and sorts after node2 in a Slurm hostlist.
	startDistAgent(t, h, distAgent{name: "node10", addr: "127.0.0.13", cpus: 2, gpus: "A100:80GB:2"})
	startDistAgent(t, h, distAgent{name: "node2", addr: "127.0.0.12", cpus: 2, gpus: "A100:80GB:2"})
	show := `p="$DSTACK_NODE_RANK| "
echo "$p$BERTH_NODE_NAME master=$MASTER_ADDR:$MASTER_PORT dstack_master=$DSTACK_MASTER_NODE_IP ips=$(echo $DSTACK_NODES_IPS | tr ' ' ,)"
echo "${p}nodes=$DSTACK_NODES_NUM gpus=$DSTACK_GPUS_PER_NODE/$DSTACK_GPUS_NUM cuda=$CUDA_VISIBLE_DEVICES slurm=$SLURM_NODEID/$SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST $SLURM_NODELIST"
sed "s/^/$p/" "$DSTACK_MPI_HOSTFILE"
case "$DSTACK_MPI_HOSTFILE" in /*) ;; *) echo "${p}hostfile path not absolute: $DSTACK_MPI_HOSTFILE";; esac`
	r := submit(t, h, "type: task\nnodes: 2\nresources: {gpu: 2}\ncommands:\n  - |\n"+indent(show, "    ")+"\n")
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusDone {
		t.Fatalf("run ended %s (%s):\n%s", end.Status, end.Reason, out)
	}
	port := control.MasterPort(r.ID)
	hostfile := "127.0.0.12 slots=2\n127.0.0.13 slots=2\n"
	want := map[string]string{}
	for rank, node := range []string{"node2", "node10"} {
		want[fmt.Sprint(rank)] = fmt.Sprintf("%s master=127.0.0.12:%d dstack_master=127.0.0.12 ips=127.0.0.12,127.0.0.13\n", node, port) +
			fmt.Sprintf("nodes=2 gpus=2/4 cuda=0,1 slurm=%d/2 node[2,10] node[2,10]\n", rank) + hostfile
	}
	if diff := cmp.Diff(want, byRank(out)); diff != "" {
		t.Errorf("job environments (-want +got):\n%s\noutput:\n%s", diff, out)
	}
	nodes := map[int]string{}
	for _, j := range end.Jobs {
		nodes[j.Num] = j.Node
	}
	if nodes[0] != "node2" || nodes[1] != "node10" {
		t.Errorf("jobs on %v, want job 0 on node2 and job 1 on node10 (Slurm's node order)", nodes)
	}

	// One node: the master is the node itself; the hostfile counts CPUs
	// when the job has no GPU.
	r = submit(t, h, "type: task\nresources: {cpu: 2}\nenv: [PORT_OVERRIDE=x]\ncommands:\n  - echo $MASTER_ADDR $MASTER_PORT $SLURM_JOB_NODELIST $DSTACK_GPUS_NUM; cat $DSTACK_MPI_HOSTFILE\n")
	out, _ = follow(t, h, r.ID)
	want1 := map[string]bool{fmt.Sprintf("127.0.0.12 %d node2 0\n127.0.0.12 slots=2\n", control.MasterPort(r.ID)): true,
		fmt.Sprintf("127.0.0.13 %d node10 0\n127.0.0.13 slots=2\n", control.MasterPort(r.ID)): true}
	if !want1[out] {
		t.Errorf("one-node run printed %q, want one of %v", out, want1)
	}

	// The run's env wins over Berth's variables.
	r = submit(t, h, "type: task\nenv: [MASTER_PORT=12345, DSTACK_MPI_HOSTFILE=/mine]\ncommands: [\"echo $MASTER_PORT $DSTACK_MPI_HOSTFILE\"]\n")
	if out, _ = follow(t, h, r.ID); out != "12345 /mine\n" {
		t.Errorf("env override: %q, want %q", out, "12345 /mine\n")
	}
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}
