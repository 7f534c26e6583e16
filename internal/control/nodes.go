package control

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// Drains and health. A node gets no new jobs while it is drained, by an
// administrator (POST /nodes/{name}/drain, lifted by /resume) or by its own
// health check failing (lifted by the next check that passes; /resume does
// not lift it). Jobs running there go on. To the scheduler a drained node
// is offline (schedNode): nothing is placed or reserved on it, and a run
// that only it could hold waits with reason Resources, as behind a busy
// node. Both kinds of drain, and the last health report that is not ok,
// are in the node's store record (nodes.drain), so they survive a restart
// of the server.

// nodeCond is a node's drain and health, as stored (JSON in nodes.drain).
type nodeCond struct {
	Manual *api.NodeDrain  `json:"manual,omitempty"`
	Health *api.NodeHealth `json:"health,omitempty"`
}

// drained tells whether the node may get no new jobs.
func (c *nodeCond) drained() bool {
	return c.Manual != nil || c.Health != nil && c.Health.Status == api.HealthFailure
}

// condition is the node's drain and health, read from its record the
// first time.
func (ns *nodeState) condition() *nodeCond {
	if ns.cond == nil {
		ns.cond = &nodeCond{}
		if len(ns.rec.Drain) > 0 {
			_ = json.Unmarshal(ns.rec.Drain, ns.cond) // unreadable: none
		}
	}
	return ns.cond
}

// saveCondLocked writes the node's condition into its record and queues
// the record; the scheduler reconsiders everything (a drain may end a
// reservation, a resume frees a node).
func (s *Cluster) saveCondLocked(ns *nodeState) {
	c := ns.condition()
	ns.rec.Drain = nil
	if c.Manual != nil || c.Health != nil && c.Health.Status != api.HealthOK {
		ns.rec.Drain, _ = json.Marshal(c)
	}
	s.syncNode(ns)
	s.freed = true
	rec := ns.rec
	s.emit(&store.Batch{Nodes: []*store.Node{&rec}}, wakeEffect)
}

// onHealth takes a node's health report. Only a change of status or
// reason is made durable (and may drain the node or lift its drain); the
// time of the check is kept in memory.
func (s *Cluster) onHealth(in HealthInput) error {
	h := in.Health
	ns, ok := s.nodes[in.Node]
	if !ok {
		return fmt.Errorf("node %q: %w (register first)", in.Node, ErrNotFound)
	}
	c := ns.condition()
	prev := c.Health
	if prev == nil {
		prev = &api.NodeHealth{Status: api.HealthOK}
	}
	c.Health = &h
	if prev.Status == h.Status && prev.Reason == h.Reason {
		return nil
	}
	switch {
	case h.Status == api.HealthFailure:
		s.log.Warn("node failed its health check: drained", "node", in.Node, "reason", h.Reason)
	case prev.Status == api.HealthFailure:
		s.log.Info("node passed its health check: drain lifted", "node", in.Node, "status", h.Status)
	case h.Status == api.HealthWarning:
		s.log.Warn("node health warning", "node", in.Node, "reason", h.Reason)
	}
	s.saveCondLocked(ns)
	return nil
}

// onDrain drains the node (in.Drain set) or lifts its manual drain, and
// answers the node as it now is.
func (s *Cluster) onDrain(now time.Time, in DrainInput) (api.Node, error) {
	ns, ok := s.nodes[in.Node]
	if !ok {
		return api.Node{}, fmt.Errorf("node %q: %w", in.Node, ErrNotFound)
	}
	c := ns.condition()
	switch {
	case in.Drain != nil:
		d := &api.NodeDrain{Reason: strings.TrimSpace(in.Drain.Reason), By: in.By, Since: now, Down: in.Drain.Down}
		if c.Manual != nil && c.Manual.Down == d.Down {
			d.Since = c.Manual.Since // drained already: a new reason
		}
		c.Manual = d
		s.log.Info("node drained", "node", in.Node, "reason", d.Reason, "by", in.By)
	case c.Manual != nil:
		c.Manual = nil
		s.log.Info("node resumed", "node", in.Node, "by", in.By)
	}
	s.saveCondLocked(ns)
	return s.apiNodeLocked(ns), nil
}

// ErrNodeBusy refuses the removal of a node that holds jobs.
var ErrNodeBusy = fmt.Errorf("%w: node busy", ErrConflict)

// onRemoveNode forgets a node: it leaves the node list, the Cycle and the
// store. Its jobs' records keep its name (sacct, berth ps). A node that
// registers again under the name later is a new node.
func (s *Cluster) onRemoveNode(in RemoveNodeInput) error {
	ns, ok := s.nodes[in.Node]
	if !ok {
		return fmt.Errorf("node %q: %w", in.Node, ErrNotFound)
	}
	if n := len(ns.jobs); n > 0 {
		return fmt.Errorf("%w: node %s runs %d job(s): drain it and wait for them, or stop them", ErrNodeBusy, in.Node, n)
	}
	if ns.online && !in.Online {
		return fmt.Errorf("%w: node %s: its agent is connected: stop the agent first (berth fleet delete does both)", ErrConflict, in.Node)
	}
	delete(s.nodes, in.Node)
	s.cycle.RemoveNode(in.Node)
	s.cycDirty = true
	s.freed = true
	s.log.Info("node removed", "node", in.Node, "why", in.Why)
	s.emit(&store.Batch{DeleteNodes: []string{in.Node}}, wakeEffect)
	return nil
}

// apiNodeLocked is a node as the API shows it.
func (s *Cluster) apiNodeLocked(ns *nodeState) api.Node {
	n := api.Node{NodeInfo: ns.info, AllocCPUs: ns.usedCPU, AllocMemory: ns.usedMem, AllocGPUs: len(ns.usedGPU),
		Jobs: len(ns.jobs), LastSeen: ns.rec.LastSeen}
	c := ns.condition()
	if c.Manual != nil {
		d := *c.Manual
		n.Drain = &d
	}
	if c.Health != nil {
		h := *c.Health
		n.Health = &h
	}
	n.Status, n.Reason = nodeStatus(ns.online, ns.unreachable, len(ns.jobs), c)
	if b := s.blocksOf(ns); b > 1 {
		n.Blocks, n.BusyBlocks = b, busyBlocks(ns, b)
	}
	return n
}

// blocksOf is how many blocks the node is split into: what its agent
// says (berth agent --blocks, which a fleet's installer gives), else its
// fleet's in the policy file.
func (s *Cluster) blocksOf(ns *nodeState) int {
	if ns.info.Blocks > 0 {
		return ns.info.Blocks
	}
	return s.rules.Load().Fleets[ns.info.Fleet].Blocks
}

// busyBlocks is how many of a node's b blocks its jobs hold: each job
// holds whole blocks (sched), so the largest share of CPUs, memory or
// GPUs in use, in blocks, rounded up.
func busyBlocks(ns *nodeState, b int) int {
	ceil := func(used, total int64) int {
		per := total / int64(b)
		if per <= 0 || used <= 0 {
			return 0
		}
		return int((used + per - 1) / per)
	}
	return min(b, max(ceil(int64(ns.usedCPU), int64(ns.info.CPUs)), ceil(ns.usedMem, ns.info.Memory), ceil(int64(len(ns.usedGPU)), int64(len(ns.info.GPUs)))))
}

// nodeStatus is what berth fleet shows of a node, and why:
//
//	offline, unreachable            its agent is away (unreachable: for longer than the node timeout, with jobs)
//	drained (REASON), draining (…)  an administrator drained it; draining while jobs still run
//	down (REASON)                   an administrator set it down (jobs running there go on)
//	idle, busy                      in service (busy: it runs jobs)
//	idle (warning), busy (warning)  in service, its health check warns
//	idle (failure), busy (failure)  its health check failed: drained until one passes
func nodeStatus(online, unreachable bool, jobs int, c *nodeCond) (status, reason string) {
	health := ""
	if c.Health != nil && c.Health.Status != api.HealthOK {
		health, reason = c.Health.Status, c.Health.Reason
	}
	if c.Manual != nil {
		// The administrator's word first; a failing check still says why.
		why := reason
		reason = c.Manual.Reason
		if health != "" {
			reason = strings.TrimPrefix(reason+"; health "+health+": "+why, "; ")
		}
	}
	switch {
	case !online && unreachable:
		return "unreachable", reason
	case !online:
		return "offline", reason
	case c.Manual != nil && c.Manual.Down:
		status = "down"
		if c.Manual.Reason != "" {
			status += " (" + c.Manual.Reason + ")"
		}
		return status, reason
	case c.Manual != nil:
		status = "drained"
		if jobs > 0 {
			status = "draining"
		}
		if c.Manual.Reason != "" {
			status += " (" + c.Manual.Reason + ")"
		}
		return status, reason
	}
	status = "idle"
	if jobs > 0 {
		status = "busy"
	}
	if health != "" {
		status += " (" + health + ")"
	}
	return status, reason
}
