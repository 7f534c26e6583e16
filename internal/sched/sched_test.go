package sched

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Unix(1_700_000_000, 0).UTC()

// aNode is a fixture builder: a node with all of its resources free.
func aNode(name string, cpus int, mem Bytes, gpus ...GPU) Node {
	n := Node{Name: name, Online: true, CPUs: cpus, Memory: mem, GPUs: gpus, FreeCPUs: cpus, FreeMemory: mem}
	for _, g := range gpus {
		n.FreeGPUs = append(n.FreeGPUs, g.Index)
	}
	return n
}

func aRun(id int64, cpus int) Pending {
	return Pending{RunID: id, Nodes: 1, JobIDs: []int64{id * 10}, SubmittedAt: t0.Add(time.Duration(id) * time.Second), Request: &Request{CPUs: cpus}}
}

func (p Pending) prio(v int) Pending { p.Priority = v; return p }
func (p Pending) nodes(n int) Pending {
	p.Nodes = n
	p.JobIDs = nil
	for k := range n {
		p.JobIDs = append(p.JobIDs, p.RunID*10+int64(k))
	}
	return p
}
func (p Pending) gpu(r GPURequest) Pending { p.Request = p.req(); p.Request.GPU = r; return p }
func (p Pending) mem(m Bytes) Pending      { p.Request = p.req(); p.Request.Memory = m; return p }

// req is a copy of the run's request, to change (the request is shared).
func (p Pending) req() *Request { r := *p.Request; return &r }

const gb = Bytes(1 << 30)

func a100(i int) GPU {
	return GPU{Index: i, Vendor: "nvidia", Name: "NVIDIA A100-SXM4-80GB", Memory: 80 * gb}
}
func t4(i int) GPU { return GPU{Index: i, Vendor: "nvidia", Name: "Tesla T4", Memory: 16 * gb} }

func TestSchedule(t *testing.T) {
	tests := map[string]struct {
		snap        Snapshot
		wantStarts  []Start
		wantReasons map[int64]string
	}{
		"first fit in priority then FIFO order": {
			snap: Snapshot{
				Nodes:   []Node{aNode("n1", 2, 8*gb)},
				Pending: []Pending{aRun(1, 1), aRun(2, 1).prio(50), aRun(3, 1)},
			},
			wantStarts: []Start{
				{RunID: 2, Placements: []Placement{{JobID: 20, Node: "n1", CPUs: 1}}},
				{RunID: 1, Placements: []Placement{{JobID: 10, Node: "n1", CPUs: 1}}},
			},
			wantReasons: map[int64]string{3: ReasonResources},
		},
		"a smaller run later in the queue fills what is left": {
			snap: Snapshot{
				Nodes:   []Node{aNode("n1", 4, 8*gb)},
				Pending: []Pending{aRun(1, 3), aRun(2, 2), aRun(3, 1)},
			},
			wantStarts: []Start{
				{RunID: 1, Placements: []Placement{{JobID: 10, Node: "n1", CPUs: 3}}},
				{RunID: 3, Placements: []Placement{{JobID: 30, Node: "n1", CPUs: 1}}},
			},
			wantReasons: map[int64]string{2: ReasonResources},
		},
		"memory is consumable": {
			snap: Snapshot{
				Nodes:   []Node{aNode("n1", 8, 10*gb)},
				Pending: []Pending{aRun(1, 1).mem(6 * gb), aRun(2, 1).mem(6 * gb)},
			},
			wantStarts:  []Start{{RunID: 1, Placements: []Placement{{JobID: 10, Node: "n1", CPUs: 1, Memory: 6 * gb}}}},
			wantReasons: map[int64]string{2: ReasonResources},
		},
		"GPUs by model name and count, by device index": {
			snap: Snapshot{
				Nodes: []Node{aNode("t4s", 8, 64*gb, t4(0), t4(1)), aNode("a100s", 8, 64*gb, a100(0), a100(1), a100(2))},
				Pending: []Pending{
					aRun(1, 1).gpu(GPURequest{Count: 2, Names: []string{"A100"}}),
					aRun(2, 1).gpu(GPURequest{Count: 1, MinMemory: 40 * gb}),
					aRun(3, 1).gpu(GPURequest{Count: 2, Names: []string{"T4"}}),
				},
			},
			wantStarts: []Start{
				{RunID: 1, Placements: []Placement{{JobID: 10, Node: "a100s", CPUs: 1, GPUs: []int{0, 1}}}},
				{RunID: 2, Placements: []Placement{{JobID: 20, Node: "a100s", CPUs: 1, GPUs: []int{2}}}},
				{RunID: 3, Placements: []Placement{{JobID: 30, Node: "t4s", CPUs: 1, GPUs: []int{0, 1}}}},
			},
			wantReasons: map[int64]string{},
		},
		"a request no node could ever hold says so": {
			snap: Snapshot{
				Nodes:   []Node{aNode("n1", 2, 8*gb, t4(0))},
				Pending: []Pending{aRun(1, 4), aRun(2, 1).gpu(GPURequest{Count: 1, Names: []string{"H100"}})},
			},
			wantReasons: map[int64]string{1: ReasonNoNode, 2: ReasonNoNode},
		},
		"multi-node runs are placed all or nothing": {
			snap: Snapshot{
				Nodes:   []Node{aNode("n1", 2, 8*gb), aNode("n2", 2, 8*gb), aNode("n3", 1, 8*gb)},
				Pending: []Pending{aRun(1, 2).nodes(3), aRun(2, 2).nodes(2)},
			},
			wantStarts: []Start{{RunID: 2, Placements: []Placement{
				{JobID: 20, Node: "n1", CPUs: 2}, {JobID: 21, Node: "n2", CPUs: 2},
			}}},
			wantReasons: map[int64]string{1: ReasonNoNode},
		},
		"fleets: a run goes only to nodes of the fleets it names": {
			snap: Snapshot{
				Nodes: []Node{func() Node { n := aNode("c1", 4, 8*gb); n.Fleet = "cpu"; return n }(),
					func() Node { n := aNode("g1", 4, 8*gb); n.Fleet = "gpu"; return n }()},
				Pending: []Pending{
					func() Pending { p := aRun(1, 1); p.Request.Fleets = []string{"gpu", "big"}; return p }(),
					func() Pending { p := aRun(2, 1); p.Request.Fleets = []string{"nope"}; return p }(),
					aRun(3, 1),
				},
			},
			wantStarts: []Start{
				{RunID: 1, Placements: []Placement{{JobID: 10, Node: "g1", CPUs: 1}}},
				{RunID: 3, Placements: []Placement{{JobID: 30, Node: "c1", CPUs: 1}}},
			},
			wantReasons: map[int64]string{2: ReasonNoNode},
		},
		"offline nodes take nothing": {
			snap: Snapshot{
				Nodes:   []Node{func() Node { n := aNode("n1", 2, 8*gb); n.Online = false; return n }()},
				Pending: []Pending{aRun(1, 1)},
			},
			wantReasons: map[int64]string{1: ReasonResources},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := cloneSnapshot(tc.snap)
			got := Schedule(tc.snap, t0)
			if diff := cmp.Diff(tc.wantStarts, got.Starts); diff != "" {
				t.Errorf("starts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReasons, got.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.snap); diff != "" {
				t.Errorf("Schedule changed its input (-before +after):\n%s", diff)
			}
			again := Schedule(tc.snap, t0)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("not deterministic (-first +second):\n%s", diff)
			}
		})
	}
}

func cloneSnapshot(s Snapshot) Snapshot {
	c := Snapshot{Policy: s.Policy}
	for _, r := range s.Running {
		r.Placements = append([]Placement(nil), r.Placements...)
		c.Running = append(c.Running, r)
	}
	for _, n := range s.Nodes {
		n.GPUs = append([]GPU(nil), n.GPUs...)
		n.FreeGPUs = append([]int(nil), n.FreeGPUs...)
		c.Nodes = append(c.Nodes, n)
	}
	for _, p := range s.Pending {
		p.JobIDs = append([]int64(nil), p.JobIDs...)
		p.Request = p.req()
		p.Request.Fleets = append([]string(nil), p.Request.Fleets...)
		c.Pending = append(c.Pending, p)
	}
	return c
}

func TestFitsNode(t *testing.T) {
	n := aNode("n1", 4, 8*gb, t4(0))
	n.FreeCPUs, n.FreeGPUs = 1, nil
	n.Features = []string{"volume:ml/b:/d"}
	tests := map[string]struct {
		req       Request
		now, ever bool
		why       string
	}{
		"fits now":        {req: Request{CPUs: 1}, now: true, ever: true},
		"busy now":        {req: Request{CPUs: 2}, ever: true, why: "not enough free CPUs"},
		"never":           {req: Request{CPUs: 8, Memory: 16 * gb}, why: "not enough CPUs, memory"},
		"gpu busy":        {req: Request{CPUs: 1, GPU: GPURequest{Count: 1}}, ever: true, why: "not enough free GPUs"},
		"gpu wrong model": {req: Request{CPUs: 1, GPU: GPURequest{Count: 1, Names: []string{"A100"}}}, why: "not enough matching GPUs"},
		"other fleet":     {req: Request{CPUs: 1, Fleets: []string{"gpu"}}, why: "not in fleet gpu"},
		// The node has the model: only the CPUs are short, and that is
		// all the reason says.
		"right model, CPUs short": {req: Request{CPUs: 8, GPU: GPURequest{Count: 1, Names: []string{"T4"}}}, why: "not enough CPUs"},
		// Features a node lacks say which; "a|b" is either.
		"volume not here": {req: Request{CPUs: 1, Features: []string{"volume:ml/a:/d|volume:ml/c:/d"}}, why: "volume ml/a or ml/c is not attached to this node (a backend attaches a network volume to the nodes it creates for the run; other nodes get one only for a run with `image:`, on the Docker engine that holds it)"},
		"other engine":    {req: Request{CPUs: 1, Features: []string{EngineFeature + "e1"}}, why: "its container engine is not the one that holds the run's network volume (a Docker volume mounts only on its own engine)"},
		"one of volumes":  {req: Request{CPUs: 1, Features: []string{"volume:ml/x:/d|volume:ml/b:/d"}}, now: true, ever: true},
		"no mounts":       {req: Request{CPUs: 1, Features: []string{MountsFeature, "volume:ml/b:/d"}}, why: "cannot mount volumes or /dev/shm for a run without an image (the agent is not root, or has no CAP_SYS_ADMIN)"},
		"other feature":   {req: Request{CPUs: 1, Features: []string{"ib"}}, why: "lacks feature ib"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now, ever, why := FitsNode(&n, tc.req)
			if now != tc.now || ever != tc.ever || why != tc.why {
				t.Errorf("FitsNode = %v, %v, %q; want %v, %v, %q", now, ever, why, tc.now, tc.ever, tc.why)
			}
		})
	}
}

func TestModelMatches(t *testing.T) {
	tests := map[string]struct {
		want, have string
		match      bool
	}{
		"word of the device name": {"A100", "NVIDIA A100-SXM4-80GB", true},
		"case-insensitive":        {"a10g", "NVIDIA A10G", true},
		"not a prefix":            {"A10", "NVIDIA A100-SXM4-80GB", false},
		"declared plain name":     {"A100", "A100", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := modelMatches(tc.want, tc.have); got != tc.match {
				t.Errorf("modelMatches(%q, %q) = %v", tc.want, tc.have, got)
			}
		})
	}
}
