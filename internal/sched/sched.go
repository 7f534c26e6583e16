package sched

import (
	"sort"
	"strings"
	"time"
)

// Bytes is an amount of memory.
type Bytes int64

// GPU is one device of a node.
type GPU struct {
	Index  int
	Vendor string
	Name   string
	Memory Bytes
}

// Node is a host as the scheduler sees it: what it has and what is free.
type Node struct {
	Name       string
	Online     bool
	CPUs       int
	Memory     Bytes
	GPUs       []GPU
	FreeCPUs   int
	FreeMemory Bytes
	FreeGPUs   []int // indices into GPUs' Index values that no job holds
}

// GPURequest is what a run needs of GPUs on each node.
type GPURequest struct {
	Count     int
	Vendor    string   // "" any
	Names     []string // any of these models; empty: any model
	MinMemory Bytes    // per GPU
	MaxMemory Bytes    // 0: no upper bound
}

// Request is what each job of a run needs on its node.
type Request struct {
	CPUs   int
	Memory Bytes
	GPU    GPURequest
}

// Pending is a run waiting to start.
type Pending struct {
	RunID       int64
	Priority    int
	SubmittedAt time.Time
	Nodes       int     // how many jobs, each on its own node
	JobIDs      []int64 // one per node, in job order
	Request     Request
}

// Snapshot is the cluster as one scheduling pass sees it. Schedule does not
// modify it.
type Snapshot struct {
	Nodes   []Node
	Pending []Pending
}

// Placement puts one job on one node.
type Placement struct {
	JobID  int64
	Node   string
	CPUs   int
	Memory Bytes
	GPUs   []int
}

// Start is a run that starts now, with one placement per job.
type Start struct {
	RunID      int64
	Placements []Placement
}

// Plan is the outcome of one pass: what starts, and why the rest waits.
type Plan struct {
	Starts  []Start
	Reasons map[int64]string // run ID -> Slurm-style pending reason
}

// Pending reasons.
const (
	ReasonResources = "Resources"
	ReasonNoNode    = "ReqNodeNotAvail"
)

// Schedule places pending runs in priority order (higher first, then older,
// then lower ID), each on the first nodes where it fits now.
func Schedule(s Snapshot, now time.Time) Plan {
	_ = now // age-based factors use it once priority is multifactor
	plan := Plan{Reasons: map[int64]string{}}
	nodes := make([]Node, len(s.Nodes))
	for i, n := range s.Nodes {
		nodes[i] = n
		nodes[i].FreeGPUs = append([]int(nil), n.FreeGPUs...)
	}
	order := make([]int, len(s.Pending))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := &s.Pending[order[a]], &s.Pending[order[b]]
		if pa.Priority != pb.Priority {
			return pa.Priority > pb.Priority
		}
		if !pa.SubmittedAt.Equal(pb.SubmittedAt) {
			return pa.SubmittedAt.Before(pb.SubmittedAt)
		}
		return pa.RunID < pb.RunID
	})
	for _, i := range order {
		p := &s.Pending[i]
		st, ok := place(nodes, p)
		if ok {
			plan.Starts = append(plan.Starts, st)
			continue
		}
		if Fits(s.Nodes, p.Request, p.Nodes, false) {
			plan.Reasons[p.RunID] = ReasonResources
		} else {
			plan.Reasons[p.RunID] = ReasonNoNode
		}
	}
	return plan
}

// place finds distinct nodes for every job of p and takes their resources
// from nodes; it changes nothing when p does not fit.
func place(nodes []Node, p *Pending) (Start, bool) {
	want := max(p.Nodes, 1)
	var picked []int
	var gpus [][]int
	for i := range nodes {
		if len(picked) == want {
			break
		}
		g, ok := fitsOn(&nodes[i], p.Request, true)
		if ok {
			picked = append(picked, i)
			gpus = append(gpus, g)
		}
	}
	if len(picked) < want {
		return Start{}, false
	}
	st := Start{RunID: p.RunID}
	for k, i := range picked {
		n := &nodes[i]
		n.FreeCPUs -= p.Request.CPUs
		n.FreeMemory -= p.Request.Memory
		n.FreeGPUs = without(n.FreeGPUs, gpus[k])
		jobID := int64(0)
		if k < len(p.JobIDs) {
			jobID = p.JobIDs[k]
		}
		st.Placements = append(st.Placements, Placement{JobID: jobID, Node: n.Name, CPUs: p.Request.CPUs, Memory: p.Request.Memory, GPUs: gpus[k]})
	}
	return st, true
}

// Fits reports whether count distinct nodes could hold a job of r: now (free
// resources) or ever (total resources, offline nodes included).
func Fits(nodes []Node, r Request, count int, now bool) bool {
	n := 0
	for i := range nodes {
		if _, ok := fitsOn(&nodes[i], r, now); ok {
			n++
		}
	}
	return n >= max(count, 1)
}

// FitsNode reports whether one node holds a job of r now, and if not, whether
// it ever could; why says what is short.
func FitsNode(n *Node, r Request) (now, ever bool, why string) {
	if _, ok := fitsOn(n, r, false); !ok {
		return false, false, shortOf(n, r, false)
	}
	if _, ok := fitsOn(n, r, true); !ok {
		return false, true, shortOf(n, r, true)
	}
	return true, true, ""
}

func shortOf(n *Node, r Request, now bool) string {
	cpus, mem, gpus := n.CPUs, n.Memory, len(n.GPUs)
	if now {
		if !n.Online {
			return "node offline"
		}
		cpus, mem, gpus = n.FreeCPUs, n.FreeMemory, len(n.FreeGPUs)
	}
	var why []string
	if r.CPUs > cpus {
		why = append(why, "CPUs")
	}
	if r.Memory > mem {
		why = append(why, "memory")
	}
	if r.GPU.Count > gpus {
		why = append(why, "GPUs")
	} else if r.GPU.Count > 0 {
		why = append(why, "matching GPUs")
	}
	if len(why) == 0 {
		return ""
	}
	adj := "not enough "
	if now {
		adj = "not enough free "
	}
	return adj + strings.Join(why, ", ")
}

// fitsOn returns the GPU indices a job of r would take on n, and whether it fits.
func fitsOn(n *Node, r Request, now bool) ([]int, bool) {
	cpus, mem := n.CPUs, n.Memory
	free := make([]int, 0, len(n.GPUs))
	if now {
		if !n.Online {
			return nil, false
		}
		cpus, mem = n.FreeCPUs, n.FreeMemory
		free = n.FreeGPUs
	} else {
		for _, g := range n.GPUs {
			free = append(free, g.Index)
		}
	}
	if r.CPUs > cpus || r.Memory > mem {
		return nil, false
	}
	if r.GPU.Count == 0 {
		return nil, true
	}
	var take []int
	for _, idx := range free {
		g, ok := gpuByIndex(n.GPUs, idx)
		if ok && r.GPU.matches(g) {
			take = append(take, idx)
			if len(take) == r.GPU.Count {
				return take, true
			}
		}
	}
	return nil, false
}

func gpuByIndex(gs []GPU, idx int) (GPU, bool) {
	for _, g := range gs {
		if g.Index == idx {
			return g, true
		}
	}
	return GPU{}, false
}

func (r GPURequest) matches(g GPU) bool {
	if r.Vendor != "" && !strings.EqualFold(r.Vendor, g.Vendor) {
		return false
	}
	if g.Memory < r.MinMemory || (r.MaxMemory > 0 && g.Memory > r.MaxMemory) {
		return false
	}
	if len(r.Names) == 0 {
		return true
	}
	for _, name := range r.Names {
		if modelMatches(name, g.Name) {
			return true
		}
	}
	return false
}

// modelMatches compares a requested model name ("A100") with a device name
// as drivers report it ("NVIDIA A100-SXM4-80GB"): the request must appear as
// a whole word of the device name, ignoring case.
func modelMatches(want, have string) bool {
	w := strings.ToLower(want)
	for _, word := range strings.FieldsFunc(strings.ToLower(have), func(r rune) bool {
		return r == ' ' || r == '-' || r == '_'
	}) {
		if word == w {
			return true
		}
	}
	return strings.EqualFold(want, have)
}

func without(have, take []int) []int {
	out := have[:0:0]
	for _, h := range have {
		keep := true
		for _, t := range take {
			if h == t {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, h)
		}
	}
	return out
}
