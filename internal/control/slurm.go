package control

import (
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// The Slurm personality, applied at placement: a batch job sbatch
// submitted stores its options as typed data (spec.Slurm) and its script
// as its one command; once it has an ID and nodes, the server computes
// what slurmd would — the job's Slurm environment (slurm.BatchEnvironment)
// and its output files (slurm.ExpandFilename) — and the node runs the
// script as slurmd does (api.BatchScript). jobEnv is the one environment
// function: Berth's variables, dstack's, then Slurm's (these for a batch
// job, a generic set for every other run).

// clusterName is SLURM_CLUSTER_NAME (sacct's Cluster).
const clusterName = "berth"

// defaultPartition is the partition of a run that names no fleet.
const defaultPartition = "berth"

// batchOf is the run's Slurm part when it is a batch script the node runs
// as slurmd does; nil for every other run (and sbatch's runs stored with
// a bash wrapper as their command).
func batchOf(t *spec.Task) *spec.Slurm {
	if t.Slurm == nil || !t.Slurm.Script || len(t.Commands) != 1 || t.Image != "" {
		return nil
	}
	return t.Slurm
}

// slurmBatchEnv is a batch job's Slurm environment on its node: what
// slurm.BatchEnvironment gives (less what only slurmd's own process knows:
// SLURM_CONF, SLURM_TASK_PID, SLURM_WORKING_CLUSTER), with what sbatch adds
// from its options, and Berth's SLURM_RESTART_COUNT and heterogeneous job
// variables.
func slurmBatchEnv(js *jobState, sp *spec.Slurm, hosts []string) [][2]string {
	rs := js.run
	t := rs.task()
	e := slurm.BatchEnv{
		JobID: uint32(rs.rec.ID), Name: sp.JobName, Account: rs.project, Partition: partitionOf(t),
		QOS: orStr(t.QOS, "normal"), User: sp.User, UID: uint32(max(sp.UID, 0)), GID: uint32(max(sp.GID, 0)),
		ArrayTaskID: slurm.NoArrayTask, Nodes: hosts, NTasks: sp.NTasksGiven, CPUsPerTask: sp.CPUsPerTask,
		MemPerCPUMB: sp.MemPerCPUMB, MemPerNodeMB: sp.MemPerNodeMB, GPUs: js.alloc.GPUs,
		NodeName: js.rec.Node, NodeID: js.rec.Num, SubmitDir: sp.SubmitDir, SubmitHost: sp.SubmitHost, ClusterName: clusterName,
	}
	if e.NTasks == 0 {
		e.NTasks = sp.NTasks
	}
	for _, o := range rs.jobs {
		e.CPUsPerNode = append(e.CPUsPerNode, o.alloc.CPUs)
		e.TasksPerNode = append(e.TasksPerNode, max(sp.TasksPerNode, 1))
	}
	if p := rs.parent; p != nil && p.array != nil {
		e.ArrayJobID, e.ArrayTaskID = uint32(p.rec.ID), rs.rec.ArrayIndex
		a := p.array.spec
		for k := range a.Count() {
			e.ArrayTasks = append(e.ArrayTasks, a.At(k))
		}
	}
	var kv [][2]string
	for _, s := range slurm.BatchEnvironment(e) {
		k, v, _ := strings.Cut(s, "=")
		switch k {
		case "SLURM_CONF", "SLURM_TASK_PID", "SLURM_WORKING_CLUSTER":
			continue
		}
		kv = append(kv, [2]string{k, v})
	}
	kv = append(kv, [2]string{"SLURM_RESTART_COUNT", strconv.Itoa(js.rec.Attempt)})
	if sp.PerNodeGiven > 0 {
		kv = append(kv, [2]string{"SLURM_NTASKS_PER_NODE", strconv.Itoa(sp.PerNodeGiven)})
	}
	if sp.Export != "" {
		kv = append(kv, [2]string{"SLURM_EXPORT_ENV", sp.Export})
	}
	if sp.Wait {
		kv = append(kv, [2]string{"SLURM_JOB_WAIT", "1"})
	}
	if len(rs.jobs) > 1 && js.rec.Num == 0 {
		// The script's srun steps reach the other nodes, which host them.
		kv = append(kv, [2]string{"BERTH_SLURM_STEPS", "1"})
	}
	return kv
}

// partitionOf is SLURM_JOB_PARTITION: the partitions the run named, else
// the default one.
func partitionOf(t *spec.Task) string {
	if len(t.Fleets) == 0 {
		return defaultPartition
	}
	return strings.Join(t.Fleets, ",")
}

// batchScript is how the node runs job js of a batch job: the first job
// runs the script, its files named as slurmd names them (the batch
// step's: %n and %t are 0, %N the batch host); the others host its steps
// (nil, with batchCommands).
func batchScript(js *jobState, sp *spec.Slurm, hosts []string) *api.BatchScript {
	if js.rec.Num != 0 {
		return nil
	}
	rs := js.run
	t := rs.task()
	c := slurm.FilenameContext{JobID: uint32(rs.rec.ID), ArrayTaskID: slurm.NoArrayTask, StepID: -1,
		JobName: sp.JobName, User: sp.User, WorkDir: t.WorkingDir}
	if len(hosts) > 0 {
		c.Node = hosts[0]
	}
	if p := rs.parent; p != nil && p.array != nil {
		c.ArrayJobID, c.ArrayTaskID = uint32(p.rec.ID), rs.rec.ArrayIndex
	}
	b := &api.BatchScript{Args: sp.Args, Input: "/dev/null", Output: slurm.ExpandFilename(sp.Output, c),
		Append: sp.OpenMode == "append", Links: sp.Links}
	if sp.Error != "" {
		b.Error = slurm.ExpandFilename(sp.Error, c)
	}
	if sp.Input != "" && sp.Input != "/dev/null" {
		b.Input = slurm.ExpandFilename(sp.Input, c)
	}
	return b
}

// stepHostCommands are the commands of a batch job's other nodes: they
// host the script's srun steps until it ends (the node's own berth).
var stepHostCommands = []string{`exec "${BERTH_BIN:-berth}" step-host </dev/null`}

func orStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
