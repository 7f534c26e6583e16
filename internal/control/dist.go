package control

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// Distributed runs: what each job of a multi-node run learns of the
// others (see jobEnv).
//
//   - Job k's node rank is k. Within each group of jobs (the whole run, or
//     one group of a heterogeneous run) the nodes are ordered as Slurm
//     orders a hostlist, so that SLURM_NODEID 0 is the first host of
//     SLURM_JOB_NODELIST, as scripts that take the master from
//     `scontrol show hostnames $SLURM_JOB_NODELIST | head -n1` expect.
//   - MASTER_ADDR and DSTACK_MASTER_NODE_IP are job 0's node address as the
//     other nodes reach it (its agent's advertised address); MASTER_PORT is
//     the run's port (masterPort).
//   - The agent writes the MPI hostfile the server composes (hostfile) into
//     the job's directory and names it in DSTACK_MPI_HOSTFILE.

// Ports of MASTER_PORT: below Linux's ephemeral range (32768 and up), so
// that no outgoing connection holds the port a run is given.
const (
	masterPortBase = 20000
	masterPortSpan = 10000
)

// MasterPort is the run's MASTER_PORT: derived from its ID, so that every
// job of the run (and every retry) agrees on it without asking, and
// consecutive runs sharing a node get different ports. A run's `env` may
// set MASTER_PORT itself.
func MasterPort(runID int64) int {
	return masterPortBase + int((runID%masterPortSpan+masterPortSpan)%masterPortSpan)
}

// orderPlacements puts each group's placements in Slurm's hostlist order of
// their nodes (job IDs stay where they were: only nodes and their
// allocations move between the jobs of a group, whose requests are equal).
func orderPlacements(t *spec.Task, ps []sched.Placement) {
	for lo := 0; lo < len(ps); {
		hi := len(ps)
		if len(t.Groups) > 0 {
			g := groupOf(t, lo)
			hi = lo
			for hi < len(ps) && groupOf(t, hi) == g {
				hi++
			}
		}
		sortByHostlist(ps[lo:hi])
		lo = hi
	}
}

func sortByHostlist(ps []sched.Placement) {
	if len(ps) < 2 {
		return
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Node
	}
	sorted, err := slurm.ExpandHostlist(slurm.CompressHostlist(names))
	if err != nil || len(sorted) != len(ps) {
		return // names a hostlist cannot hold, or a node twice: keep the plan's order
	}
	pos := make(map[string]int, len(sorted))
	for i, n := range sorted {
		pos[n] = i
	}
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.JobID
	}
	sort.SliceStable(ps, func(a, b int) bool { return pos[ps[a].Node] < pos[ps[b].Node] })
	for i := range ps {
		ps[i].JobID = ids[i]
	}
}

// slots is what a job's node counts for in the MPI hostfile: its GPUs, or
// its CPUs when it has none.
func slots(a api.Alloc) int {
	if len(a.GPUs) > 0 {
		return len(a.GPUs)
	}
	return max(a.CPUs, 1)
}

// hostfile is the run's MPI hostfile in Open MPI's form, one node a line in
// rank order: "ADDR slots=N" (MPICH's Hydra reads "ADDR:N"; convert with
// sed 's/ slots=/:/'). ips are the nodes' addresses by rank; a node
// without one is named.
func hostfile(rs *runState, ips []string) string {
	var b strings.Builder
	for k, js := range rs.jobs {
		host := js.rec.Node
		if k < len(ips) && ips[k] != "" {
			host = ips[k]
		}
		fmt.Fprintf(&b, "%s slots=%d\n", host, slots(js.alloc))
	}
	return b.String()
}

// gpusNum is DSTACK_GPUS_NUM: the GPUs of every job of the run.
func gpusNum(rs *runState) int {
	n := 0
	for _, js := range rs.jobs {
		n += len(js.alloc.GPUs)
	}
	return n
}

// signalOf is the assignment's form of the run's `signal:` (nil: none).
// It goes out even without a time limit to send it before: scontrol update
// may give the run one while its jobs run.
func signalOf(t *spec.Task) *api.SignalAt {
	sig := t.ParsedSignal()
	if sig == nil {
		return nil
	}
	return &api.SignalAt{Number: sig.Number, Before: int64(sig.Before), BatchOnly: sig.BatchOnly, StepsOnly: sig.StepsOnly}
}
