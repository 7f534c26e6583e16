package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
)

// mixedQueue is a history with what makes squeue's records depend on
// other runs: arrays with throttles whose tasks wait, run or ended,
// dependencies, held runs, several users and partitions.
func mixedQueue(rng *rand.Rand, n int, now time.Time) []api.Run {
	runs := randomHistory(rng, n, now) // newest first
	users := []string{"alice", "bob", "carol"}
	parts := []string{"debug", "batch", "gpu"}
	byID := map[int64]*api.Run{}
	for i := range runs {
		r := &runs[i]
		byID[r.ID] = r
		r.User = users[rng.IntN(len(users))]
		r.Spec.Fleets = []string{parts[rng.IntN(len(parts))]}
		if r.Status == api.StatusSubmitted && rng.IntN(8) == 0 {
			r.Reason = slurm.ReasonJobHeldUser
		}
	}
	// The runs that tasks name become arrays, some throttled, some with
	// tasks still to create.
	for i := range runs {
		r := &runs[i]
		if r.ArrayID == 0 {
			continue
		}
		a := byID[r.ArrayID]
		if a == nil || a.ArrayID != 0 || a.Array != nil {
			continue
		}
		a.Status, a.Reason, a.StartedAt, a.FinishedAt, a.Jobs, a.Nodes = api.StatusSubmitted, "Priority", nil, nil, nil, nil
		a.Array = &api.ArrayInfo{Indices: "0-9", Count: 10, Throttle: rng.IntN(3)}
		if rng.IntN(2) == 0 {
			a.Array.Waiting, a.Array.NWaiting = "6-9", 4
		}
	}
	return runs
}

// listServer serves what squeueJobs reads: the runs a selection lists
// (serverList), streamed as the server does, the nodes and priorities.
func listServer(t testing.TB, runs []api.Run, prio map[int64]int64) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/runs", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		sel := runSelection{all: q.Get("all") == "1"}
		for _, s := range strings.Split(q.Get("ids"), ",") {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil {
				sel.ids = append(sel.ids, id)
			}
		}
		if s := q.Get("since"); s != "" {
			sel.since, _ = time.Parse(time.RFC3339Nano, s)
		}
		w.Write([]byte("["))
		for i, run := range serverList(runs, sel) {
			if i > 0 {
				w.Write([]byte(","))
			}
			b, _ := json.Marshal(run)
			w.Write(b)
		}
		w.Write([]byte("]"))
	})
	mux.HandleFunc("GET /api/v1/nodes", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(convtest.GoldenNodes())
	})
	mux.HandleFunc("GET /api/v1/priorities", func(w http.ResponseWriter, _ *http.Request) {
		out := []api.RunPriority{}
		for id, p := range prio {
			out = append(out, api.RunPriority{RunID: id, Priority: p})
		}
		json.NewEncoder(w).Encode(out)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

// squeue's streamed listing prints what the gathered one (every run, then
// the view) prints, for the filters and orders squeue takes.
func TestSqueueStreamMatchesGathered(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	now := time.Date(2026, 11, 22, 15, 4, 5, 0, time.Local)
	runs := mixedQueue(rng, 600, now)
	prio := map[int64]int64{}
	for _, r := range runs {
		if r.Status == api.StatusSubmitted && rng.IntN(2) == 0 {
			prio[r.ID] = rng.Int64N(5000)
		}
	}
	hs := listServer(t, runs, prio)
	e := &slurmEnv{ctx: context.Background(), now: func() time.Time { return now },
		newClient: func() (*client.Client, error) { return client.New(hs.URL, ""), nil }}
	filters := []slurm.JobFilter{
		{},
		{AllStates: true},
		{Users: []string{"bob"}},
		{Partitions: []string{"gpu", "batch"}},
		{States: []slurm.JobState{slurm.JobPending}},
		{States: []slurm.JobState{slurm.JobCompleted, slurm.JobFailed}},
		{Users: []string{"alice", "carol"}, Partitions: []string{"debug"}, AllStates: true},
	}
	opts := []slurm.SqueueOptions{{}, {Array: true}, {Long: true}, {Start: true}, {Format: "%i %t %r %P %u"}}
	rows, throttled := 0, 0
	for _, f := range filters {
		needAll := f.AllStates
		for _, s := range f.States {
			needAll = needAll || s.Finished()
		}
		sel := runSelection{}
		if needAll {
			sel = inMemory(now)
		}
		v := slurmconv.NewView(fetched(runs, sel), convtest.GoldenNodes(), now)
		v.Prio = prio
		want := slurm.FilterJobs(v.Jobs(), f)
		got, at, err := squeueJobs(e, sel, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !at.Equal(now) {
			t.Fatalf("squeueJobs answered at %v, want %v", at, now)
		}
		for _, o := range opts {
			o.Now = now
			w, _, err := slurm.FormatSqueue(want, o)
			if err != nil {
				t.Fatal(err)
			}
			g, _, _ := slurm.FormatSqueue(got, o)
			if d := cmp.Diff(w, g); d != "" {
				t.Fatalf("squeue %+v %+v streamed differs from gathered (-gathered +streamed):\n%s", f, o, d)
			}
			rows += strings.Count(w, "\n")
			throttled += strings.Count(w, "JobArrayTaskLimit")
		}
		var wj, gj bytes.Buffer
		wj.WriteString(slurm.SqueueJSON(want, slurmconv.ClusterName))
		gj.WriteString(slurm.SqueueJSON(got, slurmconv.ClusterName))
		if d := cmp.Diff(wj.String(), gj.String()); d != "" {
			t.Fatalf("squeue --json %+v streamed differs from gathered:\n%s", f, d)
		}
	}
	if rows < 500 || throttled == 0 {
		t.Fatalf("the queue tests too little: %d rows, %d throttled", rows, throttled)
	}
}

// BenchmarkSqueueStream is the client's side of a full squeue over n
// waiting runs (the server's answer from memory): reading, converting,
// sorting and printing.
func BenchmarkSqueueStream(b *testing.B) {
	now := time.Date(2026, 11, 22, 15, 4, 5, 0, time.Local)
	var runs []api.Run
	for id := int64(20000); id >= 1; id-- {
		runs = append(runs, convtest.ARun(id, "job"+strconv.FormatInt(id, 10)).Build())
	}
	hs := listServer(b, runs, nil)
	e := &slurmEnv{ctx: context.Background(), now: func() time.Time { return now },
		newClient: func() (*client.Client, error) { return client.New(hs.URL, ""), nil }}
	b.ResetTimer()
	for range b.N {
		jobs, at, err := squeueJobs(e, runSelection{}, slurm.JobFilter{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := slurm.FormatSqueue(jobs, slurm.SqueueOptions{Now: at}); err != nil {
			b.Fatal(err)
		}
	}
}
