package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// A tunnel is a byte stream from the server to a port inside a job (see
// api.TunnelOpen). The server asks the job's agent on the stream it
// already keeps; the agent connects to the target and dials back with a
// connection of its own, which the server joins to the asker's. One
// connection per tunnel, rather than streams multiplexed in one: each
// gets TCP's own flow control (a slow reader slows only its writer) and
// half-close, many run at once without a window scheme of Berth's own,
// and the agent's assignment stream carries only a line per tunnel.
// Tunnels do not outlive the server's process, as an ssh session would
// not.

// tunnelWait is how long the server waits for an agent's end.
const tunnelWait = 30 * time.Second

// tunnelWaits are the tunnels asked of agents and not yet dialed back.
type tunnelWaits struct {
	mu   sync.Mutex
	wait map[string]*tunnelAsk
}

// tunnelAsk is one tunnel waiting for its agent: the node it was asked of
// and where its end goes.
type tunnelAsk struct {
	node string
	end  chan tunnelEnd
}

// tunnelEnd is an agent's end of a tunnel, or why it has none.
type tunnelEnd struct {
	conn net.Conn
	rd   io.Reader
	err  error
}

// tunnel is an open tunnel's server-side connection to the agent.
type tunnel struct {
	conn net.Conn
	rd   io.Reader
}

// openTunnel connects to port (0: the SSH endpoint) of node rank num of
// the active run, through its agent.
func (s *Server) openTunnel(ctx context.Context, run int64, num, port int) (*tunnel, error) {
	s.mu.Lock()
	_, jobs, ok := s.ActiveRun(run)
	s.unlock()
	if !ok {
		return nil, fmt.Errorf("%w: run %d is not active", ErrNotFound, run)
	}
	var job *store.Job
	for i := range jobs {
		if jobs[i].Num == num {
			job = &jobs[i]
		}
	}
	if job == nil {
		return nil, fmt.Errorf("%w: run %d has no job %d", ErrNotFound, run, num)
	}
	if job.Status != string(api.StatusRunning) || job.Node == "" {
		return nil, fmt.Errorf("%w: job %d of run %d is %s, not running", ErrConflict, num, run, job.Status)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ask := &tunnelAsk{node: job.Node, end: make(chan tunnelEnd, 1)}
	s.tunnels.mu.Lock()
	if s.tunnels.wait == nil {
		s.tunnels.wait = map[string]*tunnelAsk{}
	}
	s.tunnels.wait[id] = ask
	s.tunnels.mu.Unlock()
	forget := func() bool {
		s.tunnels.mu.Lock()
		defer s.tunnels.mu.Unlock()
		_, ok := s.tunnels.wait[id]
		delete(s.tunnels.wait, id)
		return ok
	}

	s.connMu.Lock()
	nc := s.conns[job.Node]
	s.connMu.Unlock()
	if nc.conn == nil {
		forget()
		return nil, fmt.Errorf("%w: node %s (job %d of run %d) is not connected", ErrUnavailable, job.Node, num, run)
	}
	nc.conn.send(api.AgentMessage{Type: "tunnel", Tunnel: &api.TunnelOpen{ID: id, JobID: job.ID, Port: port, SSH: port == 0}})

	timer := time.NewTimer(tunnelWait)
	defer timer.Stop()
	var end tunnelEnd
	answered := false
	select {
	case end = <-ask.end:
		answered = true
	case <-ctx.Done():
		end.err = ctx.Err()
	case <-timer.C:
		end.err = fmt.Errorf("%w: node %s did not answer for the tunnel to job %d of run %d", ErrUnavailable, job.Node, num, run)
	}
	if !answered && !forget() {
		// The agent's end came as the wait ended: it is on its way.
		if late := <-ask.end; late.conn != nil {
			late.conn.Close()
		}
	}
	if end.err != nil {
		return nil, end.err
	}
	return &tunnel{conn: end.conn, rd: end.rd}, nil
}

// handleAgentTunnel takes an agent's end of a tunnel (or, with error=,
// why it could not connect).
func (s *Server) handleAgentTunnel(w http.ResponseWriter, r *http.Request, scope string) {
	id := r.PathValue("id")
	s.tunnels.mu.Lock()
	ask := s.tunnels.wait[id]
	if ask != nil && (scope == "" || scope == ask.node) {
		delete(s.tunnels.wait, id)
	} else {
		ask = nil
	}
	s.tunnels.mu.Unlock()
	if ask == nil {
		writeError(w, fmt.Errorf("%w: no tunnel %s waits for this node", ErrNotFound, id))
		return
	}
	if msg := r.URL.Query().Get("error"); msg != "" {
		ask.end <- tunnelEnd{err: fmt.Errorf("%w: node %s: %s", ErrUnavailable, ask.node, msg)}
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	conn, rd, err := upgradeTunnel(w, r)
	if err != nil {
		ask.end <- tunnelEnd{err: fmt.Errorf("%w: node %s: %v", ErrUnavailable, ask.node, err)}
		return
	}
	ask.end <- tunnelEnd{conn: conn, rd: rd}
}

// handleRunTunnel opens a tunnel to a port of one of the run's jobs
// (job=RANK, port=PORT or ssh=1) and joins it to this connection.
func (s *Server) handleRunTunnel(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, _, err := s.activeRun(r.Context(), r.PathValue("ref"), u)
	if err != nil {
		writeError(w, err)
		return
	}
	num, err := intParam(r, "job", 0)
	port := 0
	if err == nil && r.URL.Query().Get("ssh") == "" {
		port, err = intParam(r, "port", 0)
		if err == nil && (port < 1 || port > 65535) {
			err = fmt.Errorf("%w: port=%d: want 1 to 65535 (or ssh=1)", ErrInvalid, port)
		}
	}
	if err == nil && !strings.EqualFold(r.Header.Get("Upgrade"), api.TunnelProtocol) {
		err = fmt.Errorf("%w: a tunnel wants Upgrade: %s", ErrInvalid, api.TunnelProtocol)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := s.openTunnel(r.Context(), run, num, port)
	if err != nil {
		writeError(w, err)
		return
	}
	conn, rd, err := upgradeTunnel(w, r)
	if err != nil {
		t.conn.Close()
		return
	}
	s.log.Debug("tunnel open", "run_id", run, "job", num, "port", port)
	api.Pipe(conn, rd, t.conn, t.rd)
}

// upgradeTunnel switches r's connection to the tunnel protocol.
func upgradeTunnel(w http.ResponseWriter, r *http.Request) (net.Conn, io.Reader, error) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), api.TunnelProtocol) {
		err := fmt.Errorf("%w: a tunnel wants Upgrade: %s", ErrInvalid, api.TunnelProtocol)
		writeError(w, err)
		return nil, nil, err
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, fmt.Errorf("tunnel: %w", err))
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + api.TunnelProtocol + "\r\nConnection: Upgrade\r\n\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, brw.Reader, nil
}
