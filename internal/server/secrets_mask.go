package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// Masking: a job that prints one of its secrets' values gets *** in the
// log the server stores (and so in every reader's stream). It is done
// where the server takes the agents' reports, after their frames are
// checked and before the cluster stores them: the agent's file keeps the
// job's output as it was (it is the job's), the server never stores the
// value. A value split across two frames is caught by holding back the
// end of a frame that could be the start of a value until the next frame
// (or the job's end) says what follows; a server that dies meanwhile loses
// those few bytes, never shows them.

// maskMin is the shortest value masked: shorter ones would mask common
// text (and say what the value is, by where *** appears).
const maskMin = 4

var maskText = []byte("***")

type masker struct {
	mu   sync.Mutex
	runs map[int64][]string // run → the values to mask, longest first (empty: none)
	jobs map[int64]*jobMask // job → what its log holds back
}

type jobMask struct {
	run    int64
	tail   []byte // the end of the last frame, perhaps a value's start
	stream string
}

func (m *masker) init() {
	m.runs = map[int64][]string{}
	m.jobs = map[int64]*jobMask{}
}

// addRun adds values to mask in the run's logs (the values handOff put in).
func (m *masker) addRun(run int64, values []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[run] = mergeMasks(m.runs[run], values)
}

func mergeMasks(have, values []string) []string {
	out := slices.Clone(have)
	for _, v := range values {
		if len(v) >= maskMin && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	if out == nil {
		out = []string{}
	}
	return out
}

// forgetRun drops what was kept for a run that ended.
func (m *masker) forgetRun(run int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, run)
	for id, j := range m.jobs {
		if j.run == run {
			delete(m.jobs, id)
		}
	}
}

// maskEventsLocked masks the runs' secrets in a node's report, under
// s.mu (it reads the cluster: a job's run, its log's end, the run's
// configuration). Frames the cluster will drop (a resend) or refuse (a
// lie about their size, a gap) are left as they are. A job's end first
// releases what its log held back, as one more chunk of no size in the
// agent's file.
func (s *Server) maskEventsLocked(evs []api.AgentEvent) []api.AgentEvent {
	m := &s.secrets.mask
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []api.AgentEvent
	next := map[int64]int64{} // job → its log's end, as this report goes
	for _, ev := range evs {
		j, ok := s.Job(ev.JobID)
		if !ok {
			out = append(out, ev)
			continue
		}
		vals, ok := m.runs[j.RunID]
		if !ok {
			vals = mergeMasks(nil, s.runSecretValuesLocked(j.RunID))
			m.runs[j.RunID] = vals
		}
		if len(vals) == 0 {
			out = append(out, ev)
			continue
		}
		if _, ok := next[j.ID]; !ok {
			next[j.ID] = j.LogSize
		}
		st := m.jobs[j.ID]
		if st == nil {
			st = &jobMask{run: j.RunID}
			m.jobs[j.ID] = st
		}
		switch ev.Type {
		case "log":
			if ev.Offset != next[j.ID] || ev.Size != api.LogFrameHeader+int64(len(ev.Data)) {
				break
			}
			data := maskValues(append(slices.Clip(st.tail), ev.Data...), vals)
			hold := heldBack(data, vals)
			st.tail, st.stream = bytes.Clone(data[len(data)-hold:]), ev.Stream
			emit := data[:len(data)-hold]
			ev.Masked = int64(len(ev.Data)) - int64(len(emit))
			ev.Data = emit
			next[j.ID] += ev.Size
		case "exited":
			if len(st.tail) > 0 {
				out = append(out, api.AgentEvent{JobID: ev.JobID, Type: "log", Time: ev.Time, Offset: next[j.ID], Stream: st.stream,
					Data: st.tail, Masked: -(api.LogFrameHeader + int64(len(st.tail)))})
			}
			ev.Message = string(maskValues([]byte(ev.Message), vals))
			delete(m.jobs, j.ID)
		}
		out = append(out, ev)
	}
	return out
}

// runSecretValuesLocked are the values of the secrets an active run's
// configuration references (after a restart, before its hand-off).
func (s *Server) runSecretValuesLocked(run int64) []string {
	rec, _, ok := s.ActiveRun(run)
	if !ok || !bytes.Contains(rec.Spec, []byte("secrets.")) {
		return nil
	}
	var t spec.Task
	if json.Unmarshal(rec.Spec, &t) != nil {
		return nil
	}
	vals := s.secrets.values(rec.ProjectID)
	var out []string
	for _, r := range t.SecretRefs() {
		if v, ok := vals[r.Name]; ok {
			out = append(out, v)
		}
	}
	return out
}

// maskValues replaces every occurrence of each value (longest first) with ***.
func maskValues(data []byte, vals []string) []byte {
	for _, v := range vals {
		if bytes.Contains(data, []byte(v)) {
			data = bytes.ReplaceAll(data, []byte(v), maskText)
		}
	}
	return data
}

// heldBack is how many bytes at the end of data could be the start of a
// value: the longest end of data that is a value's beginning, shorter
// than the value.
func heldBack(data []byte, vals []string) int {
	best := 0
	for _, v := range vals {
		for k := min(len(data), len(v)-1); k > best; k-- {
			if data[len(data)-k] == v[0] && strings.HasPrefix(v, string(data[len(data)-k:])) {
				best = k
				break
			}
		}
	}
	return best
}
