// Package synth builds seeded, reproducible synthetic clusters and queues for
// the scheduler's benchmarks (`berth bench sched`, go test -bench): mixed
// node sizes, GPU nodes of two models, runs already holding resources, and a
// queue of mixed runs of fifty users, some multi-node, some asking for a GPU
// model, scheduled with the server's defaults (Berth's policy, default
// priority weights).
package synth

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/berth-hq/berth/internal/sched"
)

const gb = sched.Bytes(1 << 30)

// Cluster returns a snapshot of nodes nodes, about half of their capacity
// held by running runs, and pending runs waiting, all drawn from seed.
func Cluster(seed uint64, nodes, pending int, now time.Time) sched.Snapshot {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	// The server's defaults: Berth's policy and the default weights, with
	// fifty users of unequal past use.
	w := sched.DefaultWeights
	s := sched.Snapshot{Policy: sched.Berth, Weights: &w, Usage: sched.Usage{}}
	for u := range 50 {
		s.Usage[sched.Account{Project: "main", User: fmt.Sprintf("user%02d", u)}] = float64(rng.IntN(1_000_000))
	}
	models := []string{"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}
	for i := range nodes {
		n := sched.Node{Name: fmt.Sprintf("node%05d", i), Online: true}
		n.CPUs = []int{32, 64, 128}[rng.IntN(3)]
		n.Memory = sched.Bytes([]int{256, 512, 1024}[rng.IntN(3)]) * gb
		if rng.IntN(4) == 0 {
			model := models[rng.IntN(len(models))]
			for g := range 8 {
				n.GPUs = append(n.GPUs, sched.GPU{Index: g, Vendor: "nvidia", Name: model, Memory: 80 * gb})
			}
		}
		n.FreeCPUs, n.FreeMemory = n.CPUs, n.Memory
		for _, g := range n.GPUs {
			n.FreeGPUs = append(n.FreeGPUs, g.Index)
		}
		s.Nodes = append(s.Nodes, n)
	}
	id := int64(1)
	for i := range s.Nodes {
		n := &s.Nodes[i]
		cpus := n.CPUs / 2
		var gpus []int
		if len(n.FreeGPUs) > 0 {
			gpus = n.FreeGPUs[:4]
			n.FreeGPUs = n.FreeGPUs[4:]
		}
		n.FreeCPUs -= cpus
		n.FreeMemory -= n.Memory / 2
		s.Running = append(s.Running, sched.Running{RunID: id, End: now.Add(time.Duration(1+rng.IntN(86400)) * time.Second),
			Placements: []sched.Placement{{JobID: id, Node: n.Name, CPUs: cpus, Memory: n.Memory / 2, GPUs: gpus}}})
		id++
	}
	for range pending {
		p := sched.Pending{RunID: id, Priority: rng.IntN(101), SubmittedAt: now.Add(-time.Duration(rng.IntN(86400)) * time.Second),
			Nodes: 1, Limit: time.Duration(60+rng.IntN(86400)) * time.Second, User: fmt.Sprintf("user%02d", rng.IntN(50)), Project: "main", Request: &sched.Request{}}
		p.Request.CPUs = 1 << rng.IntN(7) // 1..64
		p.Request.Memory = sched.Bytes(1+rng.IntN(128)) * gb
		switch rng.IntN(10) {
		case 0:
			p.Nodes = 2 + rng.IntN(7)
		case 1, 2:
			p.Request.GPU = sched.GPURequest{Count: 1 << rng.IntN(4)}
			if rng.IntN(2) == 0 {
				p.Request.GPU.Names = []string{[]string{"A100", "H100"}[rng.IntN(2)]}
			}
		}
		p.JobIDs = make([]int64, p.Nodes)
		for k := range p.JobIDs {
			p.JobIDs[k] = id*100 + int64(k)
		}
		s.Pending = append(s.Pending, p)
		id++
	}
	return s
}
