package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
)

// A step on the other nodes of a multi-node allocation: srun posts it to
// the server's step relay, the nodes' step hosts run it (slurm_stephost.go)
// and srun copies their output to its own and waits for their exits.

type remoteStep struct {
	c     *client.Client
	ref   string
	id    int
	ranks []int
	hosts []string
	ntask int
	nodes int
}

type remoteExit struct {
	host       string
	task, code int
}

// startRemoteStep creates the step on the nodes srun does not run here:
// ranks 1..nodes-1 from the first node of a batch job, all of them from
// salloc's shell (everything).
func startRemoteStep(e *slurmEnv, r *allocRequest, l stepLayout, everything bool) (*remoteStep, error) {
	c, err := e.newClient()
	if err != nil {
		return nil, err
	}
	rs := &remoteStep{c: c, ref: e.getenv("SLURM_JOB_ID"), ntask: l.ntasks, nodes: l.nodes}
	rs.hosts, _ = slurm.ExpandHostlist(e.getenv("SLURM_JOB_NODELIST"))
	for k := 0; k < l.nodes; k++ {
		if k == 0 && !everything {
			continue
		}
		rs.ranks = append(rs.ranks, k)
	}
	env := append([]string(nil), e.environ()...)
	for k, v := range map[string]string{
		"SLURM_NTASKS": strconv.Itoa(l.ntasks), "SLURM_NPROCS": strconv.Itoa(l.ntasks),
		"SLURM_STEP_NUM_TASKS": strconv.Itoa(l.ntasks), "SLURM_STEP_NUM_NODES": strconv.Itoa(l.nodes),
		"SLURM_STEP_NODELIST": slurm.CompressHostlist(rs.hosts[:min(l.nodes, len(rs.hosts))]),
	} {
		env = append(env, k+"="+v)
	}
	if r.opt.CPUsPerTask > 0 {
		env = append(env, "SLURM_CPUS_PER_TASK="+strconv.Itoa(r.opt.CPUsPerTask))
	}
	if r.label {
		env = append(env, "BERTH_SLURM_STEP_LABEL=1")
	}
	dir := r.opt.Chdir
	if dir == "" {
		dir = e.cwd
	}
	created, err := c.CreateStep(e.ctx, rs.ref, api.StepRequest{Argv: r.command, Env: env, Dir: dir, Ranks: rs.ranks})
	if err != nil {
		return nil, err
	}
	rs.id = created.ID
	return rs, nil
}

// follow copies the step's output on the other nodes to w until all of
// them have exited, and returns their exits.
func (rs *remoteStep) follow(e *slurmEnv, w io.Writer) []remoteExit {
	from := map[int]int64{}
	failures := 0
	for {
		st, err := rs.c.StepStatus(e.ctx, rs.ref, rs.id, from)
		if err != nil {
			if e.ctx.Err() != nil {
				return nil
			}
			failures++
			if errors.Is(err, client.ErrNotFound) || failures > 20 {
				fmt.Fprintf(os.Stderr, "srun: error: step %s.%d: lost the other nodes' tasks: %v\n", rs.ref, rs.id, err)
				var out []remoteExit
				for _, k := range rs.ranks {
					_, first := stepShare(rs.ntask, rs.nodes, k)
					out = append(out, remoteExit{host: rs.host(k), task: first, code: 1})
				}
				return out
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		failures = 0
		all := true
		for _, ro := range st.Ranks {
			if len(ro.Data) > 0 {
				_, _ = w.Write(ro.Data)
			}
			from[ro.Rank] = ro.Next
			all = all && ro.Exited
		}
		if all {
			var out []remoteExit
			for _, ro := range st.Ranks {
				_, first := stepShare(rs.ntask, rs.nodes, ro.Rank)
				out = append(out, remoteExit{host: rs.host(ro.Rank), task: first, code: ro.Code})
			}
			return out
		}
	}
}

func (rs *remoteStep) host(k int) string {
	if k < len(rs.hosts) {
		return rs.hosts[k]
	}
	return "node" + strconv.Itoa(k)
}
