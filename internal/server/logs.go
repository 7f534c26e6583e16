package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// hub wakes the followers of a run's logs when something of the run was
// committed.
type hub struct {
	mu sync.Mutex
	ch map[int64]*waiters
}

type waiters struct {
	ch chan struct{} // closed at the run's next notify
	n  int           // followers holding ch
}

func newHub() *hub { return &hub{ch: map[int64]*waiters{}} }

// wait returns a channel closed at the run's next notify; the follower
// calls release when it no longer waits on it.
func (h *hub) wait(runID int64) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.ch[runID]
	if !ok {
		w = &waiters{ch: make(chan struct{})}
		h.ch[runID] = w
	}
	w.n++
	return w.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		w.n--
		if w.n == 0 && h.ch[runID] == w {
			delete(h.ch, runID)
		}
	}
}

func (h *hub) notify(runID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.ch[runID]; ok {
		close(w.ch)
		delete(h.ch, runID)
	}
}

// handleLogs streams a run's output as JSON lines; with follow=1 it goes on
// until the run has ended and all of its output was sent, then sends the run.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, err := s.findRun(r.Context(), u, r.PathValue("ref"))
	if err == nil {
		err = s.mayLog(u, run)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	follow := r.URL.Query().Get("follow") == "1"
	onlyJob := -1
	if v := r.URL.Query().Get("job"); v != "" {
		if onlyJob, err = strconv.Atoi(v); err != nil {
			writeError(w, fmt.Errorf("%w: job: %v", ErrInvalid, err))
			return
		}
	}
	// from=JOB:OFFSET,… resumes a stream: only chunks at or past OFFSET.
	offsets, err := parseFrom(r.URL.Query().Get("from"))
	if err != nil {
		writeError(w, err)
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	ctx := r.Context()
	for {
		// Take the wake-up channel before reading, so that nothing committed
		// between the read and the wait is missed.
		woken, release := s.hub.wait(run.ID)
		cur, jobs, sent, err := s.readAndSend(ctx, enc, run.ID, onlyJob, offsets)
		if err != nil {
			release()
			return
		}
		if sent && fl != nil {
			fl.Flush()
		}
		if sent {
			release()
			continue
		}
		// The run was read before its logs: when it was final then, every
		// chunk of it was already committed, and this read found none left.
		if !follow || api.Status(cur.Status).Finished() {
			release()
			if follow {
				end := s.apiRun(cur, jobs, s.name(ctx, 'u', cur.UserID), nil)
				_ = enc.Encode(api.LogFrame{End: end})
			}
			return
		}
		select {
		case <-ctx.Done():
		case <-woken:
		case <-time.After(5 * time.Second):
		}
		release()
		if ctx.Err() != nil {
			return
		}
	}
}

// parseFrom reads "JOB:OFFSET,JOB:OFFSET".
func parseFrom(v string) (map[int64]int64, error) {
	out := map[int64]int64{}
	if v == "" {
		return out, nil
	}
	for _, part := range strings.Split(v, ",") {
		job, off, ok := strings.Cut(part, ":")
		j, err1 := strconv.ParseInt(job, 10, 64)
		o, err2 := strconv.ParseInt(off, 10, 64)
		if !ok || err1 != nil || err2 != nil || o < 0 {
			return nil, fmt.Errorf("%w: from: %q is not JOB:OFFSET", ErrInvalid, part)
		}
		out[j] = o
	}
	return out, nil
}

// readAndSend reads the run, then its jobs' new output, and sends the output.
func (s *Server) readAndSend(ctx context.Context, enc *json.Encoder, runID int64, only int, offsets map[int64]int64) (*store.Run, []*store.Job, bool, error) {
	cur, err := s.store.GetRun(ctx, runID)
	if err != nil {
		return nil, nil, false, err
	}
	jobs, err := s.store.ListJobs(ctx, runID)
	if err != nil {
		return nil, nil, false, err
	}
	sent, err := s.sendLogs(ctx, enc, jobs, only, offsets)
	return cur, jobs, sent, err
}

// sendLogs writes the chosen jobs' chunks from offsets on, merged in time
// order, and moves offsets past them.
func (s *Server) sendLogs(ctx context.Context, enc *json.Encoder, jobs []*store.Job, only int, offsets map[int64]int64) (sent bool, err error) {
	var entries []api.LogEntry
	for _, j := range jobs {
		if only >= 0 && j.Num != only {
			continue
		}
		chunks, err := s.store.ReadLogs(ctx, j.ID, offsets[j.ID], 500)
		if err != nil {
			return false, err
		}
		for _, c := range chunks {
			entries = append(entries, api.LogEntry{JobID: c.JobID, JobNum: j.Num, Offset: c.Offset, Stream: c.Stream, Time: c.Time, Data: c.Data})
			offsets[j.ID] = c.Offset + 1
		}
	}
	sort.SliceStable(entries, func(a, b int) bool { return entries[a].Time.Before(entries[b].Time) })
	for i := range entries {
		if err := enc.Encode(api.LogFrame{Entry: &entries[i]}); err != nil {
			return false, err
		}
	}
	return len(entries) > 0, nil
}
