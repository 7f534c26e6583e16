package server

import (
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

// An attach stream joins srun (side=client) and the step host running
// task 0 of a step (side=host): both upgrade an HTTP request to a raw
// connection and the server copies bytes between them. Whichever end
// comes first waits for the other; the frames (api.Frame*) are the two
// ends' business. A stream does not outlive the server: a restart ends
// the interactive session, as an ssh session's would.

// attachWait is how long one end waits for the other.
const attachWait = time.Minute

type attachKey struct {
	run        int64
	step, rank int
}

// attachEnd is one end of a stream: its connection and what the HTTP
// server had read of it already.
type attachEnd struct {
	side string
	conn net.Conn
	rd   io.Reader
	// peer receives the other end when it arrives.
	peer chan *attachEnd
}

func (s *Server) handleStepAttach(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, id, rank, ok := s.stepParams(w, r, u, false)
	if !ok {
		return
	}
	rank = max(rank, 0)
	side := r.URL.Query().Get("side")
	if side != "client" && side != "host" {
		writeError(w, fmt.Errorf("%w: side=%q: want client or host", ErrInvalid, side))
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), api.AttachProtocol) {
		writeError(w, fmt.Errorf("%w: attach wants Upgrade: %s", ErrInvalid, api.AttachProtocol))
		return
	}
	s.steps.mu.Lock()
	_, st, err := s.steps.stepOf(run, id)
	if err == nil && !st.req.Attach {
		err = fmt.Errorf("%w: step %d.%d has no attached task", ErrInvalid, run, id)
	}
	s.steps.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, fmt.Errorf("attach: %w", err))
		return
	}
	_ = conn.SetDeadline(time.Time{})
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + api.AttachProtocol + "\r\nConnection: Upgrade\r\n\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		return
	}
	me := &attachEnd{side: side, conn: conn, rd: brw.Reader, peer: make(chan *attachEnd, 1)}
	key := attachKey{run: run, step: id, rank: rank}

	s.steps.mu.Lock()
	if s.steps.attach == nil {
		s.steps.attach = map[attachKey]*attachEnd{}
	}
	other := s.steps.attach[key]
	switch {
	case other != nil && other.side != side:
		delete(s.steps.attach, key)
	case other != nil:
		// The same end again (a reconnect): the newer one waits; the
		// older one is told to go (a nil peer).
		other.conn.Close()
		other.peer <- nil
		other = nil
		s.steps.attach[key] = me
	default:
		s.steps.attach[key] = me
	}
	s.steps.mu.Unlock()

	if other != nil {
		other.peer <- me
		return // the waiting end's handler copies
	}
	timer := time.NewTimer(attachWait)
	defer timer.Stop()
	select {
	case other = <-me.peer:
		if other == nil {
			return // replaced by a newer connection of the same end
		}
	case <-timer.C:
	}
	if other == nil {
		s.steps.mu.Lock()
		mine := s.steps.attach[key] == me
		if mine {
			delete(s.steps.attach, key)
		}
		s.steps.mu.Unlock()
		if mine {
			conn.Close()
			return
		}
		// The peer took this end as the timer fired: it is on its way.
		if other = <-me.peer; other == nil {
			return
		}
	}
	splice(me, other)
}

// splice copies both ways until either end closes, then closes both.
func splice(a, b *attachEnd) {
	var once sync.Once
	stop := func() {
		once.Do(func() {
			a.conn.Close()
			b.conn.Close()
		})
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b.conn, a.rd); stop(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(a.conn, b.rd); stop(); done <- struct{}{} }()
	<-done
	<-done
}
