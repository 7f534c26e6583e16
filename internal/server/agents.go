package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
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

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request, scope string) {
	var info api.NodeInfo
	err := decode(r, &info)
	if err == nil {
		err = s.actsAs(scope, info.Name, "register")
	}
	if err == nil {
		err = s.register(info)
	}
	if err != nil {
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
	_, err := s.do(control.RegisterInput{Info: info, Body: body})
	return err
}

// handleStream keeps an agent's assignment stream: a full sync first, then
// assignments and stop requests as they are committed, and keep-alives.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request, scope string) {
	name := r.URL.Query().Get("node")
	if err := s.actsAs(scope, name, "stream"); err != nil {
		writeError(w, err)
		return
	}
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
	r, err := s.Step(s.clock.Now(), control.ConnectInput{Node: name})
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
	s.changes.notify()
	return c, nil
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
		_, _ = s.Step(s.clock.Now(), control.DisconnectInput{Node: name, Epoch: c.epoch})
	}
	s.unlock()
	c.conn.close()
	s.changes.notify()
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, scope string) {
	var evs api.AgentEvents
	err := decode(r, &evs)
	if err == nil {
		err = s.actsAs(scope, evs.Node, "report")
	}
	if err != nil {
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
