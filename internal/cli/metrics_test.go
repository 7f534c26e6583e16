package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/server"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

func pct(v float64) *float64 { return &v }

func TestPrintMetrics(t *testing.T) {
	const gb = 1 << 30
	tests := map[string]struct {
		m    api.RunMetrics
		want string
	}{
		"one job, two GPUs": {
			m: api.RunMetrics{Name: "train", Status: api.StatusRunning, Jobs: []api.JobMetrics{{Node: "g1", Status: api.StatusRunning,
				Latest: &api.JobSample{CPUPercent: pct(45.4), MemoryUsed: 16660 << 20, MemoryLimit: 200 * gb, GPUs: []api.GPUSample{
					{Index: 0, Util: 95, MemoryUsed: 74219 << 20, MemoryTotal: 80 * gb}, {Index: 1, Util: 3, MemoryUsed: gb / 2, MemoryTotal: 80 * gb}}}}}},
			want: `
NAME   NODE  STATUS   CPU  MEMORY        GPU
train  g1    running  45%  16.3GB/200GB  gpu=0 mem=72.5GB/80GB util=95%
                                         gpu=1 mem=512MB/80GB util=3%
`,
		},
		"two jobs, one not sampled yet": {
			m: api.RunMetrics{Name: "ddp", Status: api.StatusRunning, Jobs: []api.JobMetrics{
				{JobNum: 0, Node: "a", Status: api.StatusRunning, Latest: &api.JobSample{CPUPercent: pct(99.6), MemoryUsed: gb}},
				{JobNum: 1, Node: "b", Status: api.StatusRunning}}},
			want: `
NAME     NODE  STATUS   CPU   MEMORY  GPU
ddp            running
  job 0  a     running  100%  1GB     -
  job 1  b     running  -     -       -
`,
		},
		"nothing sampled": {
			m: api.RunMetrics{Name: "q", Status: api.StatusSubmitted},
			want: `
NAME  NODE  STATUS     CPU  MEMORY  GPU
q           submitted
(no samples yet)
`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printMetrics(&b, &tc.m); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// testServer is a server in this process with one node whose "agent" is
// this test: it holds the node's stream open and posts samples itself.
func testServer(t *testing.T) *client.Client {
	return testServerWith(t, 4, nil, nil)
}

// testServerWith is testServer with a node of cpus CPUs, a configuration
// the test adjusts, and records the test adds to the store first.
func testServerWith(t *testing.T, cpus int, adjust func(*server.Config), setup func(context.Context, *store.SQLite)) *client.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "berth.db"), store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.EnsureAdmin(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(ctx, st)
	}
	hs := httptest.NewServer(srv.Handler())
	done := make(chan struct{})
	go func() { _ = srv.Run(ctx); close(done) }()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		st.Close()
	})
	t.Setenv("BERTH_HOME", t.TempDir())
	t.Setenv("BERTH_URL", hs.URL)
	t.Setenv("BERTH_TOKEN", "tok")
	c := client.New(hs.URL, "tok")
	if err := c.Register(ctx, api.NodeInfo{Name: "n1", CPUs: cpus, Memory: 8 << 30}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.AgentStream(ctx, "n1", func(api.AgentMessage) error { return nil }) }()
	waitNode(t, c, func(n api.Node) bool { return n.Status == "idle" })
	return c
}

func waitNode(t *testing.T, c *client.Client, ok func(api.Node) bool) api.Node {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ns, err := c.Nodes(context.Background())
		if err == nil && len(ns) == 1 && ok(ns[0]) {
			return ns[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("node: %+v, %v", ns, err)
		}
	}
}

func berth(t *testing.T, args ...string) string {
	t.Helper()
	var out, errw bytes.Buffer
	if code := Main(args, strings.NewReader(""), &out, &errw); code != 0 {
		t.Fatalf("berth %s: exit %d: %s", strings.Join(args, " "), code, errw.String())
	}
	return out.String()
}

func TestNodeDrainResume(t *testing.T) {
	testServer(t)
	if out := berth(t, "node", "drain", "n1", "--reason", "bad DIMM"); out != "Node n1: drained (bad DIMM)\n" {
		t.Errorf("drain: %q", out)
	}
	out := berth(t, "fleet")
	if lines := strings.Split(out, "\n"); len(lines) < 2 || !strings.Contains(lines[0], "REASON") || !strings.Contains(lines[1], "drained (bad DIMM)") {
		t.Errorf("fleet:\n%s", out)
	}
	var ns []api.Node
	if err := json.Unmarshal([]byte(berth(t, "fleet", "--json")), &ns); err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 || ns[0].Status != "drained (bad DIMM)" || ns[0].Reason != "bad DIMM" || ns[0].Drain == nil || ns[0].Drain.By != "admin" {
		t.Errorf("fleet --json: %+v", ns)
	}
	if out := berth(t, "node", "resume", "n1"); out != "Node n1: idle\n" {
		t.Errorf("resume: %q", out)
	}
	var stderr bytes.Buffer
	if code := Main([]string{"node", "drain", "nope"}, strings.NewReader(""), io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "nope") {
		t.Errorf("drain of an unknown node: exit %d, %q", code, stderr.String())
	}
}

func TestMetricsCommand(t *testing.T) {
	c := testServer(t)
	ctx := context.Background()
	task, err := spec.Parse("t.yml", []byte("type: task\nname: burn\nresources: {cpu: 2}\ncommands: [\"true\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Submit(ctx, api.SubmitRequest{Spec: task})
	if err != nil {
		t.Fatal(err)
	}
	var job int64
	for deadline := time.Now().Add(10 * time.Second); job == 0; time.Sleep(10 * time.Millisecond) {
		r, err := c.Run(ctx, "burn")
		if err == nil && len(r.Jobs) == 1 && r.Jobs[0].Node == "n1" {
			job = r.Jobs[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("never placed: %+v %v", r, err)
		}
	}
	for i, p := range []float64{10, 87.5} {
		s := api.JobSample{JobID: job, Time: time.Now().Add(time.Duration(i) * time.Second), CPUPercent: pct(p), MemoryUsed: 3 << 30, MemoryLimit: 4 << 30}
		if err := c.AgentMetrics(ctx, api.AgentMetrics{Node: "n1", Samples: []api.JobSample{s}}); err != nil {
			t.Fatal(err)
		}
	}
	// A sample of a job the node does not run is dropped.
	if err := c.AgentMetrics(ctx, api.AgentMetrics{Node: "other", Samples: []api.JobSample{{JobID: job, CPUPercent: pct(1)}}}); err != nil {
		t.Fatal(err)
	}
	out := berth(t, "metrics", "burn")
	if lines := strings.Split(out, "\n"); len(lines) < 2 || strings.Join(strings.Fields(lines[1]), " ") != "burn n1 provisioning 88% 3GB/4GB -" {
		t.Errorf("metrics:\n%s", out)
	}
	var m api.RunMetrics
	if err := json.Unmarshal([]byte(berth(t, "metrics", "--json", "burn")), &m); err != nil {
		t.Fatal(err)
	}
	if m.RunID != run.ID || len(m.Jobs) != 1 || len(m.Jobs[0].History) != 2 || *m.Jobs[0].Latest.CPUPercent != 87.5 {
		t.Errorf("metrics --json: %+v", m)
	}
}
