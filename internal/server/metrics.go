package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// Metrics of running jobs: agents post samples every few seconds (POST
// /agent/metrics). The server keeps them in the store (samples.go: GET
// /runs/{ref}/metrics, berth metrics, after a restart and once the run has
// ended) and the last metricsHistory of each job in memory, for the
// Prometheus collector, jobs' peaks, and the samples not yet committed.
// Memory is bounded twice: samples per job, and runs kept (the least
// recently sampled go first).

const (
	metricsHistory = 720  // samples per job: an hour at the default 5 s
	metricsRuns    = 2048 // runs whose samples are kept
)

// metricsStore holds the samples, under its own lock: never s.mu, so that
// recording costs the scheduler nothing. Its zero value is ready.
type metricsStore struct {
	mu      sync.Mutex
	perJob  int // samples kept per job (0: metricsHistory)
	maxRuns int // runs kept (0: metricsRuns)
	runs    map[int64]*runSamples
}

type runSamples struct {
	last time.Time // when a sample last came
	jobs map[int64]*ring
}

// ring is one job's samples, oldest overwritten first.
type ring struct {
	buf  []api.JobSample
	next int // where the next sample goes once buf is full
}

func (r *ring) add(s api.JobSample, limit int) {
	if len(r.buf) < limit {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
}

// last returns the newest n samples, oldest first (n < 0: all).
func (r *ring) last(n int) []api.JobSample {
	all := append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
	if n >= 0 && n < len(all) {
		all = all[len(all)-n:]
	}
	return all
}

// sample is an accepted sample with the run it belongs to.
type sample struct {
	run int64
	s   api.JobSample
}

func (m *metricsStore) add(samples []sample, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	perJob, maxRuns := m.perJob, m.maxRuns
	if perJob <= 0 {
		perJob = metricsHistory
	}
	if maxRuns <= 0 {
		maxRuns = metricsRuns
	}
	if m.runs == nil {
		m.runs = map[int64]*runSamples{}
	}
	for _, x := range samples {
		rs, ok := m.runs[x.run]
		if !ok {
			for len(m.runs) >= maxRuns {
				m.evictOldest()
			}
			rs = &runSamples{jobs: map[int64]*ring{}}
			m.runs[x.run] = rs
		}
		rs.last = now
		r, ok := rs.jobs[x.s.JobID]
		if !ok {
			r = &ring{}
			rs.jobs[x.s.JobID] = r
		}
		s := x.s
		s.JobID = 0 // implied by where it is kept
		r.add(s, perJob)
	}
}

// peak is the most memory a job was seen to hold (its newest sample's
// peak; 0: none).
func (m *metricsStore) peak(run, job int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.runs[run]
	if rs == nil || rs.jobs[job] == nil {
		return 0
	}
	var p int64
	for _, s := range rs.jobs[job].buf {
		p = max(p, s.MemoryPeak)
	}
	return p
}

func (m *metricsStore) evictOldest() {
	var oldest int64
	var at time.Time
	first := true
	for id, rs := range m.runs {
		if first || rs.last.Before(at) {
			oldest, at, first = id, rs.last, false
		}
	}
	delete(m.runs, oldest)
}

// of returns each job's newest n samples of a run (n < 0: all).
func (m *metricsStore) of(run int64, n int) map[int64][]api.JobSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs, ok := m.runs[run]
	if !ok {
		return nil
	}
	out := make(map[int64][]api.JobSample, len(rs.jobs))
	for id, r := range rs.jobs {
		out[id] = r.last(n)
	}
	return out
}

// handleAgentMetrics takes a node's samples of the jobs it runs; samples
// of jobs the server does not place there are dropped.
func (s *Server) handleAgentMetrics(w http.ResponseWriter, r *http.Request, scope string) {
	var m api.AgentMetrics
	err := decode(r, &m)
	if err == nil {
		err = s.actsAs(scope, m.Node, "metrics")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	ok := make([]sample, 0, len(m.Samples))
	s.mu.Lock()
	for _, x := range m.Samples {
		if j, found := s.Job(x.JobID); found && j.Node == m.Node {
			ok = append(ok, sample{run: j.RunID, s: x})
		}
	}
	if len(ok) > 0 {
		// Kept in the store too (samples.go), without waiting: they are
		// figures, and the agent sends the next ones in seconds.
		s.enqueue(&store.Batch{Samples: sampleRows(ok)})
	}
	s.unlock()
	s.jm.add(ok, s.clock.Now())
	runs := map[int64]bool{}
	for _, x := range ok {
		if len(x.s.GPUs) > 0 {
			runs[x.run] = true
		}
	}
	s.checkUtilization(r.Context(), runs) // utilization.go
	writeJSON(w, http.StatusOK, struct{}{})
}

// handleRunMetrics answers a run's metrics: each job that was sampled or
// runs, its latest sample, and its history, oldest first and the latest
// included: the newest ?history=N samples, or all kept.
func (s *Server) handleRunMetrics(w http.ResponseWriter, r *http.Request, u *store.User) {
	n := -1
	if v := r.URL.Query().Get("history"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			writeError(w, fmt.Errorf("%w: history: %q is not a count of samples", ErrInvalid, v))
			return
		}
	}
	run, err := s.findRun(r.Context(), u, r.PathValue("ref"))
	if err == nil {
		err = s.mayLog(u, run)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	jobs, err := s.store.ListJobs(r.Context(), run.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	want := n
	if n == 0 {
		want = 1 // the latest
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	got, err := s.storedSamples(r.Context(), ids, want)
	if err != nil {
		writeError(w, err)
		return
	}
	// Samples taken since the store's newest (queued, not yet committed)
	// come from memory.
	for id, mem := range s.jm.of(run.ID, want) {
		stored := got[id]
		for _, x := range mem {
			if len(stored) == 0 || x.Time.After(stored[len(stored)-1].Time) {
				stored = append(stored, x)
			}
		}
		if want > 0 && len(stored) > want {
			stored = stored[len(stored)-want:]
		}
		got[id] = stored
	}
	out := &api.RunMetrics{RunID: run.ID, Name: run.Name, Status: api.Status(run.Status), Jobs: []api.JobMetrics{}}
	for _, j := range jobs {
		samples, sampled := got[j.ID]
		if !sampled && api.Status(j.Status) != api.StatusRunning {
			continue
		}
		jm := api.JobMetrics{JobID: j.ID, JobNum: j.Num, Attempt: j.Attempt, Node: j.Node, Status: api.Status(j.Status)}
		jm.Alloc = decodeAlloc(j.Alloc)
		if k := len(samples); k > 0 {
			latest := samples[k-1]
			jm.Latest = &latest
			if n != 0 {
				jm.History = samples
			}
		}
		out.Jobs = append(out.Jobs, jm)
	}
	sort.SliceStable(out.Jobs, func(i, k int) bool {
		a, b := out.Jobs[i], out.Jobs[k]
		if a.JobNum != b.JobNum {
			return a.JobNum < b.JobNum
		}
		return a.Attempt < b.Attempt
	})
	writeJSON(w, http.StatusOK, out)
}

func decodeAlloc(b []byte) api.Alloc {
	var a api.Alloc
	_ = json.Unmarshal(b, &a)
	return a
}
