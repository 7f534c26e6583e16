package slurm

import (
	"sort"
	"strconv"
	"strings"
)

// BatchEnv is what the environment of a batch job's shell is made of.
type BatchEnv struct {
	JobID     uint32
	Name      string
	Account   string
	Partition string
	QOS       string
	User      string
	UID, GID  uint32

	ArrayJobID  uint32 // 0 when not an array task
	ArrayTaskID int
	ArrayTasks  []int // every task id of the array, for COUNT/MIN/MAX/STEP

	Nodes        []string // allocated nodes, in allocation order
	CPUsPerNode  []int    // one per node
	TasksPerNode []int    // one per node
	NTasks       int      // when -n was given, else 0
	CPUsPerTask  int      // when -c was given, else 0
	MemPerCPUMB  uint64   // one of these two
	MemPerNodeMB uint64
	GPUs         []int // GPU indices allocated on this node

	NodeName    string // this node (SLURMD_NODENAME)
	NodeID      int
	TaskPID     int
	SubmitDir   string
	SubmitHost  string
	ClusterName string
	Conf        string // SLURM_CONF
	Controller  string // SLURM_WORKING_CLUSTER: "cluster:host:port:protocol:plugins"
}

// CompressCounts prints per-node counts as Slurm's SLURM_TASKS_PER_NODE and
// SLURM_JOB_CPUS_PER_NODE do: "2(x2)", "4(x3),2".
func CompressCounts(counts []int) string {
	var parts []string
	for i := 0; i < len(counts); {
		j := i
		for j+1 < len(counts) && counts[j+1] == counts[i] {
			j++
		}
		s := strconv.Itoa(counts[i])
		if n := j - i + 1; n > 1 {
			s += "(x" + strconv.Itoa(n) + ")"
		}
		parts = append(parts, s)
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// BatchEnvironment is the SLURM_* (and GPU) variables Slurm 22.05 gives a
// batch job's shell, sorted, as "NAME=value".
func BatchEnvironment(e BatchEnv) []string {
	env := map[string]string{}
	set := func(k, v string) { env[k] = v }
	u := func(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
	nodelist := CompressHostlist(e.Nodes)
	cpusOnNode := 0
	if e.NodeID < len(e.CPUsPerNode) {
		cpusOnNode = e.CPUsPerNode[e.NodeID]
	}
	set("SLURMD_NODENAME", e.NodeName)
	set("SLURM_CLUSTER_NAME", e.ClusterName)
	set("SLURM_CONF", e.Conf)
	set("SLURM_CPUS_ON_NODE", strconv.Itoa(cpusOnNode))
	set("SLURM_GTIDS", "0")
	set("SLURM_JOBID", u(e.JobID))
	set("SLURM_JOB_ID", u(e.JobID))
	set("SLURM_JOB_ACCOUNT", e.Account)
	set("SLURM_JOB_CPUS_PER_NODE", CompressCounts(e.CPUsPerNode))
	set("SLURM_JOB_GID", u(e.GID))
	set("SLURM_JOB_NAME", e.Name)
	set("SLURM_JOB_NODELIST", nodelist)
	set("SLURM_NODELIST", nodelist)
	set("SLURM_JOB_NUM_NODES", strconv.Itoa(len(e.Nodes)))
	set("SLURM_NNODES", strconv.Itoa(len(e.Nodes)))
	set("SLURM_JOB_PARTITION", e.Partition)
	set("SLURM_JOB_QOS", e.QOS)
	set("SLURM_JOB_UID", u(e.UID))
	set("SLURM_JOB_USER", e.User)
	set("SLURM_LOCALID", "0")
	set("SLURM_NODEID", strconv.Itoa(e.NodeID))
	set("SLURM_NODE_ALIASES", "(null)")
	set("SLURM_PRIO_PROCESS", "0")
	set("SLURM_PROCID", "0")
	set("SLURM_SUBMIT_DIR", e.SubmitDir)
	set("SLURM_SUBMIT_HOST", e.SubmitHost)
	set("SLURM_TASKS_PER_NODE", CompressCounts(e.TasksPerNode))
	set("SLURM_TASK_PID", strconv.Itoa(e.TaskPID))
	set("SLURM_TOPOLOGY_ADDR", e.NodeName)
	set("SLURM_TOPOLOGY_ADDR_PATTERN", "node")
	set("SLURM_WORKING_CLUSTER", e.Controller)
	switch {
	case e.MemPerNodeMB > 0:
		set("SLURM_MEM_PER_NODE", strconv.FormatUint(e.MemPerNodeMB, 10))
	case e.MemPerCPUMB > 0:
		set("SLURM_MEM_PER_CPU", strconv.FormatUint(e.MemPerCPUMB, 10))
	}
	if e.NTasks > 0 {
		set("SLURM_NTASKS", strconv.Itoa(e.NTasks))
		set("SLURM_NPROCS", strconv.Itoa(e.NTasks))
	}
	if e.CPUsPerTask > 0 {
		set("SLURM_CPUS_PER_TASK", strconv.Itoa(e.CPUsPerTask))
	}
	if e.ArrayJobID != 0 {
		tasks := append([]int(nil), e.ArrayTasks...)
		sort.Ints(tasks)
		step := 1
		if len(tasks) > 1 {
			step = tasks[1] - tasks[0]
			for i := 2; i < len(tasks); i++ {
				if tasks[i]-tasks[i-1] != step {
					step = 1
					break
				}
			}
		}
		set("SLURM_ARRAY_JOB_ID", u(e.ArrayJobID))
		set("SLURM_ARRAY_TASK_ID", strconv.Itoa(e.ArrayTaskID))
		set("SLURM_ARRAY_TASK_COUNT", strconv.Itoa(len(tasks)))
		if len(tasks) > 0 {
			set("SLURM_ARRAY_TASK_MIN", strconv.Itoa(tasks[0]))
			set("SLURM_ARRAY_TASK_MAX", strconv.Itoa(tasks[len(tasks)-1]))
		}
		set("SLURM_ARRAY_TASK_STEP", strconv.Itoa(step))
	}
	if len(e.GPUs) > 0 {
		ids := make([]string, len(e.GPUs))
		for i, g := range e.GPUs {
			ids[i] = strconv.Itoa(g)
		}
		list := strings.Join(ids, ",")
		set("SLURM_GPUS_ON_NODE", strconv.Itoa(len(e.GPUs)))
		set("SLURM_JOB_GPUS", list)
		set("CUDA_VISIBLE_DEVICES", list)
		set("GPU_DEVICE_ORDINAL", list)
		set("ROCR_VISIBLE_DEVICES", list)
		set("ZE_AFFINITY_MASK", list)
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
