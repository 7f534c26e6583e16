package control

import (
	"sort"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/sched"
)

// Queries for the server's metrics endpoint (GET /metrics). Like those of
// queries.go they change nothing, and their caller serialises them with
// the inputs; unlike most of them they copy numbers and short labels only,
// counted in one walk of the state, so that a scrape holds the owner's lock
// for as little as a walk of the waiting runs and encodes nothing under it.

// Figures are the cluster's counts at one moment.
type Figures struct {
	// Runs counts the active runs by status and project. An array counts
	// as the tasks it has made (its own record is not counted).
	Runs map[RunGroup]int
	// Waiting counts the waiting runs by pending reason and fleets.
	Waiting map[WaitGroup]int
	// Oldest is when the longest-waiting run was submitted (zero: none
	// waits).
	Oldest time.Time
	// Ages counts the waiting runs by age at now: Ages[i] those of at most
	// the caller's bounds[i] seconds and more than bounds[i-1] (not
	// cumulative); the last entry, those older than every bound. AgeSum is
	// the sum of their ages in seconds.
	Ages   []uint64
	AgeSum float64
	// Nodes are the nodes, by name.
	Nodes []NodeFigures
	// Usage is each account's past CPU-seconds decayed to now (fairshare).
	Usage map[sched.Account]float64
	// fleets are the requests' fleets joined, for AddWaiting.
	fleets map[*sched.Request]string
}

// RunGroup is a status and a project.
type RunGroup struct {
	Status  lifecycle.Status
	Project string
}

// WaitGroup is a pending reason (Slurm's code; "None" before a pass has
// seen the run) and the fleets a run may use, comma-separated ("": any).
type WaitGroup struct {
	Reason string
	Fleets string
}

// NodeFigures are a node's resources and state.
type NodeFigures struct {
	Name, Fleet string
	// State is berth fleet's status without its reason: idle, busy,
	// draining, drained, offline or unreachable; Health the last health
	// report's (ok, warning, failure).
	State, Health     string
	CPUs, UsedCPUs    int
	Memory, UsedBytes int64
	GPUs              []GPUFigures
}

// GPUFigures are one of a node's GPUs.
type GPUFigures struct {
	Index int
	Model string
	Used  bool
}

// JobFigures are a placed job and what its run is called, for the per-job
// metrics of its agent's samples.
type JobFigures struct {
	ID, RunID          int64
	Num                int
	Node               string
	CPUs               int
	Run, Project, User string
	Status             lifecycle.Status
}

// Figures counts the cluster at now but its waiting runs, which
// AddWaiting adds a part at a time: a long queue is read in parts, so
// that the owner need not hold its lock for the whole (100,000 waiting
// runs took 68-116 ms, one cache miss each); ageBounds (seconds,
// ascending) are the buckets of the waiting runs' ages.
func (s *Cluster) Figures(now time.Time, ageBounds []float64) Figures {
	f := Figures{Runs: map[RunGroup]int{}, Waiting: map[WaitGroup]int{}, Ages: make([]uint64, len(ageBounds)+1)}
	// A long queue's runs are mostly waiting ones, and each run's memory is
	// a cache miss: the waiting runs are read once, in the second walk.
	// The runs that do not wait: placed ones (through their jobs, far
	// fewer than the runs of a long queue) and schedules.
	seen := map[*runState]bool{}
	for _, js := range s.jobs {
		rs := js.run
		if _, waiting := s.pending[rs.rec.ID]; waiting || seen[rs] {
			continue
		}
		seen[rs] = true
		f.Runs[RunGroup{lifecycle.Status(rs.rec.Status), rs.project}]++
	}
	for _, rs := range s.schedules {
		f.Runs[RunGroup{lifecycle.Status(rs.rec.Status), rs.project}]++
	}
	f.Nodes = make([]NodeFigures, 0, len(s.nodes))
	for _, ns := range s.nodes {
		c := ns.condition()
		state, _ := nodeStatus(ns.online, ns.unreachable, len(ns.jobs), c)
		state, _, _ = strings.Cut(state, " (")
		health := api.HealthOK
		if c.Health != nil {
			health = c.Health.Status
		}
		n := NodeFigures{Name: ns.info.Name, Fleet: ns.info.Fleet, State: state, Health: health, CPUs: ns.info.CPUs, UsedCPUs: ns.usedCPU,
			Memory: ns.info.Memory, UsedBytes: ns.usedMem}
		for _, g := range ns.info.GPUs {
			_, used := ns.usedGPU[g.Index]
			n.GPUs = append(n.GPUs, GPUFigures{Index: g.Index, Model: g.Name, Used: used})
		}
		f.Nodes = append(f.Nodes, n)
	}
	sort.Slice(f.Nodes, func(i, k int) bool { return f.Nodes[i].Name < f.Nodes[k].Name })
	f.Usage = s.cycle.Usage(now) // decayed to now
	return f
}

// PlacedJobs are the given jobs that are placed on a node, by ID (others,
// and jobs no longer active, are left out).
func (s *Cluster) PlacedJobs(ids []int64) []JobFigures {
	out := make([]JobFigures, 0, len(ids))
	for _, id := range ids {
		js, ok := s.jobs[id]
		if !ok || js.rec.Node == "" || !lifecycle.Status(js.rec.Status).Placed() {
			continue
		}
		rs := js.run
		out = append(out, JobFigures{ID: id, RunID: js.rec.RunID, Num: js.rec.Num, Node: js.rec.Node, CPUs: js.alloc.CPUs,
			Run: rs.rec.Name, Project: rs.project, User: rs.user, Status: lifecycle.Status(js.rec.Status)})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// Examined is how many waiting runs the computed pass considered: those
// it started and those it gave a reason (at most the configured depth).
func (p *Pass) Examined() int {
	n := len(p.plan.Starts) + len(p.plan.Reasons)
	if p.depth > 0 && n > p.depth {
		n = p.depth
	}
	return n
}

// Full reports whether every waiting run was considered by the pass (a
// full pass), not only those changed since the last one and those it
// left holding something (the Cycle's incremental rule).
func (p *Pass) Full() bool {
	full, _ := p.round.Full()
	return full
}

// WaitingIDs are the waiting runs' IDs, for AddWaiting.
func (s *Cluster) WaitingIDs() []int64 {
	ids := make([]int64, 0, len(s.pending))
	for id := range s.pending {
		ids = append(ids, id)
	}
	return ids
}

// AddWaiting adds to f the runs of ids that still wait: their status and
// project, reason and fleets, and age at now.
func (s *Cluster) AddWaiting(f *Figures, ids []int64, now time.Time, ageBounds []float64) {
	if f.fleets == nil {
		f.fleets = map[*sched.Request]string{}
	}
	for _, id := range ids {
		rs, ok := s.pending[id]
		if !ok {
			continue
		}
		f.Runs[RunGroup{lifecycle.Status(rs.rec.Status), rs.project}]++
		// Most waiting runs of a long queue share a request (interned):
		// its fleets are joined once.
		fl, ok := f.fleets[rs.req]
		if !ok {
			fl = strings.Join(rs.req.Fleets, ",")
			f.fleets[rs.req] = fl
		}
		reason := rs.rec.Reason
		if reason == "" {
			reason = "None"
		}
		f.Waiting[WaitGroup{reason, fl}]++
		sub := rs.rec.SubmittedAt
		if f.Oldest.IsZero() || sub.Before(f.Oldest) {
			f.Oldest = sub
		}
		age := max(now.Sub(sub).Seconds(), 0)
		f.AgeSum += age
		f.Ages[sort.SearchFloat64s(ageBounds, age)]++
	}
}
