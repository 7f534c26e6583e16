package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/store"
)

// Node removal (issue 17): a node whose SSH host left its fleet, whose
// fleet was deleted or whose instance was terminated leaves the node list
// (control.RemoveNodeInput) instead of staying offline for ever; its jobs'
// records keep its name. `berth node delete NAME` does the same on an
// administrator's word, refused while jobs are placed there or its agent
// is connected.
//
// A removal the server decides is retried: a node still holding jobs (a
// --force delete) is remembered and removed by the sweep once they are
// gone, and the sweep also removes, after a restart, the nodes of
// instances recorded gone.

// forgetNodeOf removes node, whose agent the server has just stopped (its
// stream may still be open: closed here), and revokes its node tokens. A
// node that still holds jobs is left for the sweep.
func (s *Server) forgetNodeOf(ctx context.Context, node, why string) {
	s.revokeNodeTokens(ctx, node)
	_, err := s.do(control.RemoveNodeInput{Node: node, Why: why, Online: true})
	switch {
	case err == nil:
		s.closeConn(node)
	case errors.Is(err, control.ErrNotFound):
	default:
		s.log.Info("node: removal waits for its jobs", "node", node, "err", err)
		s.cloud.mu.Lock()
		if s.cloud.forget == nil {
			s.cloud.forget = map[string]string{}
		}
		s.cloud.forget[node] = why
		s.cloud.mu.Unlock()
	}
}

// closeConn ends node's agent stream, if open.
func (s *Server) closeConn(node string) {
	s.connMu.Lock()
	c, ok := s.conns[node]
	delete(s.conns, node)
	s.connMu.Unlock()
	if ok && c.conn != nil {
		c.conn.close()
	}
}

// revokeNodeTokens revokes every node token made for node.
func (s *Server) revokeNodeTokens(ctx context.Context, node string) {
	ts, err := s.store.ListTokens(ctx, 0)
	if err != nil {
		s.log.Warn("node: cannot list tokens to revoke", "node", node, "err", err)
		return
	}
	for _, t := range ts {
		if t.Node != node {
			continue
		}
		_, _ = s.store.RevokeToken(ctx, t.ID)
		id := t.ID
		s.forgetTokens(func(c cachedCred) bool { return c.tok != nil && c.tok.ID == id })
	}
}

// sweepNodes removes the nodes waiting for their jobs to end, and the
// offline nodes of instances recorded gone (a restart between a
// termination and the removal).
func (s *Server) sweepNodes(ctx context.Context) {
	s.cloud.mu.Lock()
	todo := map[string]string{}
	for n, why := range s.cloud.forget {
		todo[n] = why
	}
	s.cloud.mu.Unlock()
	if recs, err := s.store.ListInstances(ctx, true); err == nil {
		s.mu.Lock()
		nodes := s.Nodes()
		s.unlock()
		known := map[string]bool{}
		for _, n := range nodes {
			known[n.Name] = n.Status == "offline" || strings.HasPrefix(n.Status, "offline")
		}
		live := map[string]bool{}
		for _, r := range recs {
			if r.State != string(provider.RecordGone) {
				live[r.Node] = true
			}
		}
		for _, r := range recs {
			if r.State == string(provider.RecordGone) && known[r.Node] && !live[r.Node] {
				if _, ok := todo[r.Node]; !ok {
					todo[r.Node] = "instance " + r.Key + " gone"
				}
			}
		}
		// Nodes their fleet removed before a restart (nodes_orphan.go).
		if fs, err := s.store.ListFleets(ctx); err == nil {
			for node, why := range orphanFleetNodes(nodes, fs, live) {
				if _, ok := todo[node]; !ok {
					todo[node] = why
				}
			}
		}
	}
	for node, why := range todo {
		_, err := s.do(control.RemoveNodeInput{Node: node, Why: why, Online: true})
		if err == nil || errors.Is(err, control.ErrNotFound) {
			if err == nil {
				s.closeConn(node)
			}
			s.cloud.mu.Lock()
			delete(s.cloud.forget, node)
			s.cloud.mu.Unlock()
		}
	}
}

// nodeSweepLoop sweeps at start and every 10 s.
func (s *Server) nodeSweepLoop(ctx context.Context) {
	for {
		s.sweepNodes(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// handleNodeDelete is `berth node delete NAME`: an administrator removes a
// node that runs nothing and whose agent is not connected.
func (s *Server) handleNodeDelete(w http.ResponseWriter, r *http.Request, u *store.User) {
	if !u.Admin {
		writeError(w, fmt.Errorf("%w: deleting nodes takes an admin's token", ErrForbidden))
		return
	}
	name := r.PathValue("name")
	if _, err := s.do(control.RemoveNodeInput{Node: name, Why: "deleted by " + u.Name}); err != nil {
		writeError(w, err)
		return
	}
	s.revokeNodeTokens(r.Context(), name)
	s.log.Info("node deleted", "node", name, "by", u.Name)
	writeJSON(w, http.StatusOK, map[string]string{"deleted": name})
}
