package control

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// onRegister records a node's resources: a new node, or one that changed.
func (s *Cluster) onRegister(now time.Time, in RegisterInput) {
	info := in.Info
	ns, ok := s.nodes[info.Name]
	if !ok {
		ns = newNode(info)
		ns.rec.RegisteredAt = now
		s.nodes[info.Name] = ns
	}
	ns.info = info
	s.syncNode(ns)
	ns.rec.Name, ns.rec.Info, ns.rec.LastSeen = info.Name, in.Body, now
	s.freed = true
	if ns.rec.RegisteredAt.IsZero() {
		ns.rec.RegisteredAt = now
	}
	rec := ns.rec
	s.emit(&store.Batch{Nodes: []*store.Node{&rec}}, wakeEffect)
}

// onConnect marks the node up on a new stream (a new epoch, its answer),
// whose first message is the full sync of its jobs.
func (s *Cluster) onConnect(now time.Time, in ConnectInput) (uint64, error) {
	ns, ok := s.nodes[in.Node]
	if !ok {
		return 0, fmt.Errorf("node %q: %w (register first)", in.Node, ErrNotFound)
	}
	ns.online = true
	s.syncNode(ns)
	ns.epoch++
	ns.downSince, ns.unreachable = time.Time{}, false
	for _, js := range ns.jobs {
		if !js.stopSent.IsZero() || api.Status(js.rec.Status) == api.StatusTerminating {
			js.stopSent = now // the sync asks again
		}
	}
	s.freed = true
	// The sync goes out once everything it reflects is durable, ahead of any
	// later change's messages.
	s.emit(&store.Batch{}, sendEffect(ns, s.syncLocked(ns)), wakeEffect)
	return ns.epoch, nil
}

// onDisconnect marks the node away from now, unless a newer stream (epoch)
// replaced the one that ended.
func (s *Cluster) onDisconnect(now time.Time, in DisconnectInput) {
	ns, ok := s.nodes[in.Node]
	if !ok || !ns.online || ns.epoch != in.Epoch {
		return
	}
	ns.online = false
	s.syncNode(ns)
	ns.rec.LastSeen = now
	ns.downSince = now
	rec := ns.rec
	s.emit(&store.Batch{Nodes: []*store.Node{&rec}})
}

// syncLocked lists every active job placed on the node.
func (s *Cluster) syncLocked(ns *nodeState) api.AgentMessage {
	m := api.AgentMessage{Type: "sync", Jobs: []api.Assignment{}}
	for _, js := range ns.jobs {
		if js.held {
			continue // startup_order: sent once the jobs it waits for run
		}
		hosts, ips := s.runHosts(js.run)
		m.Jobs = append(m.Jobs, s.assignment(js, hosts, ips))
	}
	return m
}

func (s *Cluster) runHosts(rs *runState) (hosts, ips []string) {
	for _, js := range rs.jobs {
		hosts = append(hosts, js.rec.Node)
		ip := ""
		if ns, ok := s.nodes[js.rec.Node]; ok {
			ip = ns.info.Addr
		}
		ips = append(ips, ip)
	}
	return hosts, ips
}

// assignment is what an agent needs to run a job.
// graceOf is the time between SIGTERM and SIGKILL when rs is stopped: its
// own stop_duration (dstack's meaning; off: SIGKILL at once), else the
// server's.
func (s *Cluster) graceOf(rs *runState) time.Duration {
	if d := rs.task().StopDuration; d != nil {
		return time.Duration(max(int64(*d), 0)) * time.Second
	}
	return s.cfg.StopGrace
}

func (s *Cluster) assignment(js *jobState, hosts, ips []string) api.Assignment {
	rs := js.run
	t := rs.task()
	a := api.Assignment{
		JobID: js.rec.ID, RunID: rs.rec.ID, RunName: rs.rec.Name, JobNum: js.rec.Num, Attempt: js.rec.Attempt,
		Status: api.Status(js.rec.Status), Commands: groupCommands(t, js.rec.Num), WorkingDir: t.WorkingDir,
		Alloc: js.alloc, LogSize: js.rec.LogSize, Stop: rs.rec.StopReq, ProjectID: rs.rec.ProjectID, User: login(rs.user),
		Shell: t.Shell,
	}
	a.Archives = t.Archives()
	if t.Image == "" { // runtime.go
		a.Python, a.Nvcc = t.Python, t.Nvcc
	}
	for _, r := range t.URLRepos() { // the server adds their credentials as it sends them (server/clones.go)
		a.Clones = append(a.Clones, api.Clone{URL: r.URL, Branch: r.Branch, Hash: r.Hash, Dest: r.Dest, IfExists: r.IfExists})
	}
	if d := t.Resources.Disk; d != nil {
		a.Disk = int64(d.Min)
	}
	if t.Image == "" {
		// Instance volumes only: a network volume is on the node already,
		// at its path (volumes.go).
		for _, v := range t.Volumes {
			if !v.IsNetwork() {
				a.Mounts = append(a.Mounts, v)
			}
		}
		if t.Resources.SHMSize != nil {
			a.ShmSize = int64(*t.Resources.SHMSize)
		}
	}
	if t.MaxDuration != nil {
		a.MaxDuration = int64(t.MaxDuration.Bounded())
	}
	if js.stopping && a.Stop == 0 {
		a.Stop = int(lifecycle.StopUser) // a sibling failed or the master is done: a resync still stops it
	}
	a.Grace = int64(s.graceOf(rs) / time.Second)
	var devices []api.GPU
	if ns, ok := s.nodes[js.rec.Node]; ok {
		devices = ns.info.GPUs
	}
	a.Env = jobEnv(js, hosts, ips, visibleDevices(js.alloc.GPUs, devices))
	a.Signal, a.Hostfile = signalOf(t), hostfile(rs, ips) // dist.go
	// A Slurm batch script: its files and arguments (slurm.go).
	if sp := batchOf(t); sp != nil {
		if a.Batch = batchScript(js, sp, hosts); a.Batch == nil {
			a.Commands = stepHostCommands
		}
	}
	if c := api.ContainerFor(t); c != nil {
		// dstack's rule: host network when the job has its node to itself
		// (a multi-node run always does), a bridge when it shares it.
		if ns, ok := s.nodes[js.rec.Node]; ok {
			c.HostNetwork = len(rs.jobs) > 1 || js.alloc.CPUs >= ns.info.CPUs && len(js.alloc.GPUs) == len(ns.info.GPUs)
		}
		if g := groupOf(t, js.rec.Num); len(t.Groups) > 0 && len(t.Groups[g].Ports) > 0 {
			c.Ports = t.Groups[g].Ports // dstack's groups[].ports: the group's jobs'
		}
		a.Container = c
	}
	return a
}

// login is the Unix login a user's jobs run as: the user's name, which is
// the login that made them through a node's socket, and root for the admin
// (whom root is there).
func login(user string) string {
	if user == "admin" {
		return api.RootLogin
	}
	return user
}

// jobEnv is the job's environment: Berth's variables, the dstack set and the
// Slurm set, so that scripts written for either run unchanged, then the
// run's own env, which may override them. The Slurm set of a batch job
// sbatch submitted is slurmd's (slurmBatchEnv); every other run gets a
// generic one.
func jobEnv(js *jobState, hosts, ips []string, visible string) []string {
	rs := js.run
	n := len(rs.jobs)
	id := strconv.FormatInt(rs.rec.ID, 10)
	rank := strconv.Itoa(js.rec.Num)
	gpus := make([]string, len(js.alloc.GPUs))
	for i, g := range js.alloc.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	master := ""
	if len(ips) > 0 {
		master = ips[0]
	}
	kv := [][2]string{
		{"BERTH_RUN_ID", id}, {"BERTH_RUN_NAME", rs.rec.Name}, {"BERTH_JOB_ID", strconv.FormatInt(js.rec.ID, 10)},
		{"BERTH_NODE_RANK", rank}, {"BERTH_NODES_NUM", strconv.Itoa(n)}, {"BERTH_NODE_NAME", js.rec.Node},
		{"BERTH_ATTEMPT", strconv.Itoa(js.rec.Attempt)}, {"BERTH_CPUS", strconv.Itoa(js.alloc.CPUs)},
		{"DSTACK_RUN_NAME", rs.rec.Name}, {"DSTACK_NODE_RANK", rank}, {"DSTACK_NODES_NUM", strconv.Itoa(n)},
		{"DSTACK_MASTER_NODE_IP", master}, {"DSTACK_NODES_IPS", strings.Join(ips, "\n")},
		{"DSTACK_GPUS_PER_NODE", strconv.Itoa(len(gpus))}, {"DSTACK_GPUS_NUM", strconv.Itoa(gpusNum(rs))},
		{"MASTER_ADDR", master}, {"MASTER_PORT", strconv.Itoa(MasterPort(rs.rec.ID))}, // dist.go
		{"SLURM_JOB_ID", id}, {"SLURM_JOBID", id}, {"SLURM_JOB_NAME", rs.rec.Name}, {"SLURM_JOB_ACCOUNT", rs.project},
		{"SLURM_JOB_NUM_NODES", strconv.Itoa(n)}, {"SLURM_NNODES", strconv.Itoa(n)}, {"SLURM_NODEID", rank},
		{"SLURM_JOB_NODELIST", slurm.CompressHostlist(hosts)}, {"SLURM_NODELIST", slurm.CompressHostlist(hosts)},
		{"SLURMD_NODENAME", js.rec.Node}, {"SLURM_CPUS_ON_NODE", strconv.Itoa(js.alloc.CPUs)},
		{"SLURM_NTASKS", strconv.Itoa(n)}, {"SLURM_RESTART_COUNT", strconv.Itoa(js.rec.Attempt)},
		{"CUDA_VISIBLE_DEVICES", visible},
	}
	if len(gpus) > 0 {
		kv = append(kv, [2]string{"SLURM_JOB_GPUS", strings.Join(gpus, ",")}, [2]string{"GPU_DEVICE_ORDINAL", strings.Join(gpus, ",")})
	}
	if len(rs.task().Groups) > 0 {
		g := strconv.Itoa(groupOf(rs.task(), js.rec.Num))
		kv = append(kv, [2]string{"BERTH_GROUP", g}, [2]string{"SLURM_HET_JOB_ID", id}, [2]string{"SLURM_JOB_COMPONENT_ID", g},
			[2]string{"SLURM_HET_SIZE", strconv.Itoa(len(rs.task().Groups))})
		if name := rs.task().Groups[groupOf(rs.task(), js.rec.Num)].Name; name != "" {
			kv = append(kv, [2]string{"BERTH_GROUP_NAME", name})
		}
	}
	if p := rs.parent; p != nil && p.array != nil {
		a := p.array.spec
		idx, count := strconv.Itoa(rs.rec.ArrayIndex), strconv.Itoa(a.Count())
		kv = append(kv, [2]string{"BERTH_ARRAY_ID", strconv.FormatInt(p.rec.ID, 10)}, [2]string{"BERTH_ARRAY_INDEX", idx}, [2]string{"BERTH_ARRAY_COUNT", count},
			[2]string{"SLURM_ARRAY_JOB_ID", strconv.FormatInt(p.rec.ID, 10)}, [2]string{"SLURM_ARRAY_TASK_ID", idx},
			[2]string{"SLURM_ARRAY_TASK_COUNT", count}, [2]string{"SLURM_ARRAY_TASK_MIN", strconv.Itoa(a.Min())},
			[2]string{"SLURM_ARRAY_TASK_MAX", strconv.Itoa(a.Max())}, [2]string{"SLURM_ARRAY_TASK_STEP", strconv.Itoa(a.Step())})
	}
	if sp := batchOf(rs.task()); sp != nil {
		// slurmd's set in place of the generic one; the heterogeneous
		// job's variables stay (BatchEnvironment has none).
		generic := kv
		kv = kv[:0:0]
		for _, p := range generic {
			if !strings.HasPrefix(p[0], "SLURM") || strings.HasPrefix(p[0], "SLURM_HET_") || p[0] == "SLURM_JOB_COMPONENT_ID" {
				kv = append(kv, p)
			}
		}
		kv = append(kv, slurmBatchEnv(js, sp, hosts)...)
		if visible != "" {
			kv = append(kv, [2]string{"CUDA_VISIBLE_DEVICES", visible}) // a MIG instance's UUID
		}
	}
	env := make([]string, 0, len(kv)+len(rs.task().Env))
	for _, p := range kv {
		env = append(env, p[0]+"="+p[1])
	}
	return append(env, rs.task().Env.Strings()...)
}

// groupCommands are job k's commands: its group's own, else the run's.
func groupCommands(t *spec.Task, k int) []string {
	if t.IsDevEnvironment() {
		return t.DevCommands()
	}
	if len(t.Groups) > 0 {
		if c := t.Groups[groupOf(t, k)].Commands; len(c) > 0 {
			return c
		}
	}
	return t.Commands
}

// visibleDevices is CUDA_VISIBLE_DEVICES for the allocated device indices:
// the indices, or, when one of them is a MIG instance (which CUDA reaches
// only by UUID), every device's UUID.
func visibleDevices(alloc []int, devices []api.GPU) string {
	out := make([]string, len(alloc))
	mig := false
	for i, idx := range alloc {
		out[i] = strconv.Itoa(idx)
		for _, d := range devices {
			if d.Index == idx && strings.HasPrefix(d.UUID, "MIG-") {
				mig = true
			}
		}
	}
	if !mig {
		return strings.Join(out, ",")
	}
	for i, idx := range alloc {
		for _, d := range devices {
			if d.Index == idx && d.UUID != "" {
				out[i] = d.UUID
			}
		}
	}
	return strings.Join(out, ",")
}
