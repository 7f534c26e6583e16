package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// agentConn is one open assignment stream to an agent.
type agentConn struct {
	mu     sync.Mutex
	ch     chan api.AgentMessage
	closed bool
	gone   chan struct{} // closed when the stream must end (replaced or overflowed)
}

func newAgentConn() *agentConn {
	return &agentConn{ch: make(chan api.AgentMessage, 4096), gone: make(chan struct{})}
}

// send queues m without blocking. A stream that cannot keep up is closed; the
// agent reconnects and gets a full sync, so nothing is lost.
func (c *agentConn) send(m api.AgentMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	select {
	case c.ch <- m:
	default:
		c.closed = true
		close(c.gone)
	}
}

func (c *agentConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.gone)
	}
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request, _ *store.User) {
	var info api.NodeInfo
	if err := decode(r, &info); err != nil {
		writeError(w, err)
		return
	}
	if err := s.register(info); err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("node registered", "node", info.Name, "addr", info.Addr, "cpus", info.CPUs, "memory", info.Memory, "gpus", len(info.GPUs))
	writeJSON(w, http.StatusOK, struct{}{})
}

// register records a node's resources (a new node, or one that changed) and
// returns once that is durable.
func (s *Server) register(info api.NodeInfo) error {
	if info.Name == "" || info.CPUs <= 0 {
		return fmt.Errorf("%w: a node needs a name and at least one CPU", ErrInvalid)
	}
	body, _ := json.Marshal(info)
	_, err := s.do(registerInput{info: info, body: body})
	return err
}

// onRegister records a node's resources: a new node, or one that changed.
func (s *cluster) onRegister(now time.Time, in registerInput) {
	info := in.info
	ns, ok := s.nodes[info.Name]
	if !ok {
		ns = newNode(info)
		ns.rec.RegisteredAt = now
		s.nodes[info.Name] = ns
	}
	ns.info = info
	ns.rec.Name, ns.rec.Info, ns.rec.LastSeen = info.Name, in.body, now
	s.freed = true
	if ns.rec.RegisteredAt.IsZero() {
		ns.rec.RegisteredAt = now
	}
	rec := ns.rec
	s.emit(&store.Batch{Nodes: []*store.Node{&rec}}, wakeEffect)
}

// handleStream keeps an agent's assignment stream: a full sync first, then
// assignments and stop requests as they are committed, and keep-alives.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request, _ *store.User) {
	name := r.URL.Query().Get("node")
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, fmt.Errorf("server: streaming unsupported"))
		return
	}
	c, err := s.connect(name)
	if err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("agent connected", "node", name)

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	enc := json.NewEncoder(w)
	ping := time.NewTicker(s.cfg.PingEvery)
	defer ping.Stop()
	defer func() {
		s.disconnect(name, c)
		s.log.Info("agent disconnected", "node", name)
	}()
	for {
		var m api.AgentMessage
		select {
		case <-r.Context().Done():
			return
		case <-c.conn.gone:
			// Deliver what is queued, then end: the agent reconnects.
			for {
				select {
				case m = <-c.conn.ch:
					if enc.Encode(m) != nil {
						return
					}
				default:
					fl.Flush()
					return
				}
			}
		case m = <-c.conn.ch:
		case <-ping.C:
			m = api.AgentMessage{Type: "ping"}
		}
		if err := enc.Encode(m); err != nil {
			return
		}
		// Write what else is queued before flushing: one flush for a burst.
		for more := true; more; {
			select {
			case m = <-c.conn.ch:
				if err := enc.Encode(m); err != nil {
					return
				}
			default:
				more = false
			}
		}
		fl.Flush()
	}
}

// nodeConn is a node's open stream and the epoch of the node it serves.
type nodeConn struct {
	conn  *agentConn
	epoch uint64
}

// connect makes a new stream the node's (closing an earlier one): the node
// is up again, and its first message is the full sync of its jobs.
func (s *Server) connect(name string) (nodeConn, error) {
	s.mu.Lock()
	defer s.unlock()
	if s.broken != nil {
		return nodeConn{}, s.broken
	}
	r, err := s.step(s.clock.Now(), connectInput{node: name})
	if err != nil {
		return nodeConn{}, err
	}
	// The stream is the node's before the sync can be sent on it (once
	// queued, after unlock).
	c := nodeConn{conn: newAgentConn(), epoch: r.(uint64)}
	s.connMu.Lock()
	old := s.conns[name]
	s.conns[name] = c
	s.connMu.Unlock()
	if old.conn != nil {
		old.conn.close()
	}
	return c, nil
}

// onConnect marks the node up on a new stream (a new epoch, its answer),
// whose first message is the full sync of its jobs.
func (s *cluster) onConnect(now time.Time, in connectInput) (uint64, error) {
	ns, ok := s.nodes[in.node]
	if !ok {
		return 0, fmt.Errorf("node %q: %w (register first)", in.node, ErrNotFound)
	}
	ns.online = true
	ns.epoch++
	ns.downSince, ns.unreachable = time.Time{}, false
	s.freed = true
	// The sync goes out once everything it reflects is durable, ahead of any
	// later change's messages.
	s.emit(&store.Batch{}, sendEffect(ns, s.syncLocked(ns)), wakeEffect)
	return ns.epoch, nil
}

// disconnect ends the node's stream c: unless a newer stream replaced it,
// the node is away from now (see nodesLostLocked).
func (s *Server) disconnect(name string, c nodeConn) {
	s.mu.Lock()
	s.connMu.Lock()
	if s.conns[name] == c {
		delete(s.conns, name)
	}
	s.connMu.Unlock()
	if s.broken == nil {
		_, _ = s.step(s.clock.Now(), disconnectInput{node: name, epoch: c.epoch})
	}
	s.unlock()
	c.conn.close()
}

// onDisconnect marks the node away from now, unless a newer stream (epoch)
// replaced the one that ended.
func (s *cluster) onDisconnect(now time.Time, in disconnectInput) {
	ns, ok := s.nodes[in.node]
	if !ok || !ns.online || ns.epoch != in.epoch {
		return
	}
	ns.online = false
	ns.rec.LastSeen = now
	ns.downSince = now
	rec := ns.rec
	s.emit(&store.Batch{Nodes: []*store.Node{&rec}})
}

// syncLocked lists every active job placed on the node.
func (s *cluster) syncLocked(ns *nodeState) api.AgentMessage {
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

func (s *cluster) runHosts(rs *runState) (hosts, ips []string) {
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
func (s *cluster) assignment(js *jobState, hosts, ips []string) api.Assignment {
	rs := js.run
	t := rs.task()
	a := api.Assignment{
		JobID: js.rec.ID, RunID: rs.rec.ID, RunName: rs.rec.Name, JobNum: js.rec.Num, Attempt: js.rec.Attempt,
		Status: api.Status(js.rec.Status), Commands: groupCommands(t, js.rec.Num), WorkingDir: t.WorkingDir,
		Alloc: js.alloc, LogSize: js.rec.LogSize, Stop: rs.rec.StopReq, Grace: int64(s.cfg.StopGrace / time.Second),
	}
	if t.MaxDuration != nil {
		a.MaxDuration = int64(*t.MaxDuration)
	}
	if js.stopping && a.Stop == 0 {
		a.Stop = int(lifecycle.StopUser) // a sibling failed or the master is done: a resync still stops it
	}
	// The run's own stop_duration is its grace period (dstack's meaning);
	// off: SIGKILL at once.
	if d := t.StopDuration; d != nil {
		a.Grace = max(int64(*d), 0)
	}
	var devices []api.GPU
	if ns, ok := s.nodes[js.rec.Node]; ok {
		devices = ns.info.GPUs
	}
	a.Env = jobEnv(js, hosts, ips, visibleDevices(js.alloc.GPUs, devices))
	a.Signal, a.Hostfile = signalOf(t), hostfile(rs, ips) // dist.go
	if c := api.ContainerFor(t); c != nil {
		// dstack's rule: host network when the job has its node to itself
		// (a multi-node run always does), a bridge when it shares it.
		if ns, ok := s.nodes[js.rec.Node]; ok {
			c.HostNetwork = len(rs.jobs) > 1 || js.alloc.CPUs >= ns.info.CPUs && len(js.alloc.GPUs) == len(ns.info.GPUs)
		}
		a.Container = c
	}
	return a
}

// jobEnv is the job's environment: Berth's variables, the dstack set and the
// Slurm set, so that scripts written for either run unchanged, then the
// run's own env, which may override them.
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
		{"MASTER_ADDR", master}, {"MASTER_PORT", strconv.Itoa(masterPort(rs.rec.ID))}, // dist.go
		{"SLURM_JOB_ID", id}, {"SLURM_JOBID", id}, {"SLURM_JOB_NAME", rs.rec.Name},
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
	env := make([]string, 0, len(kv)+len(rs.task().Env))
	for _, p := range kv {
		env = append(env, p[0]+"="+p[1])
	}
	return append(env, rs.task().Env.Strings()...)
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, _ *store.User) {
	var evs api.AgentEvents
	if err := decode(r, &evs); err != nil {
		writeError(w, err)
		return
	}
	ack, err := s.agentEvents(evs.Node, evs.Events)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ack)
}

// groupCommands are job k's commands: its group's own, else the run's.
func groupCommands(t *spec.Task, k int) []string {
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
