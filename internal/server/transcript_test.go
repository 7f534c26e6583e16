package server

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/control/transcript"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
	gocmp "github.com/google/go-cmp/cmp"
)

// Transcripts drive the control plane through a run's whole life without
// HTTP, agents or polling, on a virtual clock, as etcd's raft does: each
// file is a list of commands, each followed by what it did — the changes
// committed to the store (as the store ends up) and the messages sent to
// agents. `go test ./internal/server -run Transcript -update` rewrites the
// outputs; review them as a diff.
//
// Most transcripts live in internal/control/testdata and run on the
// cluster's Step alone (internal/control/transcript_test.go documents the
// command language). This driver runs the same language on a real server
// over SQLite: testdata/transcripts holds the files that need the store
// itself (restart), and -control-transcripts runs internal/control's files
// here too, to check the server decides as the bare cluster does.
// Beside internal/control's commands:
//
//	restart                                   a new server loads the store; agents are away
var update = flag.Bool("update", false, "rewrite the transcripts' outputs")

var controlTranscripts = flag.Bool("control-transcripts", false, "also run internal/control's transcripts on the server")

func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/transcripts/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/transcripts")
	}
	if *controlTranscripts {
		more, _ := filepath.Glob("../control/testdata/*.txt")
		files = append(files, more...)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runTranscript(t, f) })
	}
}

func runTranscript(t *testing.T, path string) {
	e := newTranscriptEnv(t)
	e.dir = filepath.Dir(path)
	// The state machine's invariants hold after every command (an
	// array's or a schedule's record agrees with the cluster...).
	check := func() error {
		e.srv.mu.Lock()
		defer e.srv.unlock()
		return e.srv.Check()
	}
	transcript.Run(t, path, *update, func(cmd string) string { return e.do(t, cmd) }, check)
}

// fakeClock is the transcripts' virtual time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// recordingStore keeps the batches committed since the last command.
type recordingStore struct {
	store.Store
	mu      sync.Mutex
	batches []*store.Batch
	record  bool // set before the server starts; off for benchmarks
}

func (r *recordingStore) Apply(ctx context.Context, b *store.Batch) error {
	if r.record {
		r.mu.Lock()
		r.batches = append(r.batches, b)
		r.mu.Unlock()
	}
	return r.Store.Apply(ctx, b)
}

func (r *recordingStore) take() []*store.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.batches
	r.batches = nil
	return b
}

type transcriptEnv struct {
	srv   *Server
	stop  func() // stops srv's committer
	dir   string // where policy files are
	st    *recordingStore
	clock *fakeClock
	start time.Time
	admin *store.User
	conns map[string]nodeConn
	nodes map[string]bool
	// n are the runs' names; runs and names are its maps.
	n     *transcript.Names
	runs  map[string]int64 // name -> ID
	names map[int64]string
}

func newTranscriptEnv(t testing.TB) *transcriptEnv {
	sq, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "berth.db"), store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &transcriptEnv{st: &recordingStore{Store: sq, record: true}, clock: &fakeClock{now: start}, start: start,
		conns: map[string]nodeConn{}, nodes: map[string]bool{}, n: transcript.NewNames()}
	e.runs, e.names = e.n.Runs, e.n.IDs
	e.startServer(t)
	uid, _ := sq.EnsureUser(context.Background(), "admin", true)
	e.admin = &store.User{ID: uid, Name: "admin", Admin: true}
	t.Cleanup(func() { e.stopServer(); sq.Close() })
	e.st.take()
	return e
}

// startServer starts a server on the transcript's store, as a restart does:
// its state is what the store holds.
func (e *transcriptEnv) startServer(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, Config{Store: e.st, Clock: e.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StopGrace: 10 * time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := srv.EnsureAdmin(ctx, ""); err != nil {
		cancel()
		t.Fatal(err)
	}
	// Only the committer runs: passes happen when the transcript says so.
	done := make(chan error, 1)
	go func() { done <- srv.committer(ctx) }()
	e.srv, e.stop = srv, func() { cancel(); <-done }
}

// stopServer stops the server once what it queued is durable.
func (e *transcriptEnv) stopServer() {
	if e.stop != nil {
		e.settle()
		e.stop()
		e.stop = nil
	}
}

// settle waits until everything queued so far is committed and its effects
// have run.
func (e *transcriptEnv) settle() {
	e.srv.mu.Lock()
	done := e.srv.enqueue(&store.Batch{})
	e.srv.unlock()
	<-done
}

func (e *transcriptEnv) do(t testing.TB, line string) string {
	f := strings.Fields(line)
	args := map[string]string{}
	var flags []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else {
			flags = append(flags, a)
		}
	}
	var err error
	switch f[0] {
	case "node":
		err = e.node(flags[0], args)
	case "away":
		e.srv.disconnect(flags[0], e.conns[flags[0]])
		delete(e.conns, flags[0])
	case "submit":
		err = e.submit(t, flags[0], flags[1:], args)
	case "policy":
		p, perr := policy.Load(filepath.Join(e.dir, flags[0]))
		if perr != nil {
			t.Fatalf("%s: %v", line, perr)
		}
		e.srv.setRules(p)
	case "schedule":
		// As an iteration of schedLoop: the tick (schedules' due runs,
		// nodes away too long), then a pass.
		e.srv.tick()
		e.srv.scheduleOnce()
	case "agent":
		err = e.agent(flags, args)
	case "stop":
		if _, made := e.runs[flags[0]]; !made {
			// R_INDEX of a task not made yet: cancelled before it exists.
			if a, i, ok := strings.Cut(flags[0], "_"); ok && e.runs[a] != 0 {
				err = e.srv.cancelTask(e.runs[a], atoi(i, -1))
				break
			}
		}
		err = e.srv.stop(e.runs[flags[0]], slices.Contains(flags, "abort"))
	case "requeue", "hold", "release":
		err = e.srv.control(e.runs[flags[0]], api.ControlRequest{Action: f[0]}, true)
	case "update":
		req := api.ControlRequest{Action: "update"}
		for k, v := range args {
			n := int64(atoi(v, -1))
			switch k {
			case "limit":
				req.TimeLimit = &n
			case "priority":
				p := int(n)
				req.Priority = &p
			case "throttle":
				p := int(n)
				req.ArrayThrottle = &p
			default:
				t.Fatalf("%s: unknown field %s", line, k)
			}
		}
		err = e.srv.control(e.runs[flags[0]], req, true)
	case "restart":
		// The server stops (what it acknowledged is durable) and a new one
		// loads the store; the agents' streams are gone until they connect.
		e.stopServer()
		for n, c := range e.conns {
			c.conn.close()
			delete(e.conns, n)
		}
		e.startServer(t)
		e.st.take()
		return ""
	case "connect":
		conn, cerr := e.srv.connect(flags[0])
		if cerr != nil {
			t.Fatalf("%s: %v", line, cerr)
		}
		e.nodes[flags[0]], e.conns[flags[0]] = true, conn
	case "tick":
		d, perr := time.ParseDuration(flags[0])
		if perr != nil {
			t.Fatalf("%s: %v", line, perr)
		}
		e.clock.mu.Lock()
		e.clock.now = e.clock.now.Add(d)
		e.clock.mu.Unlock()
		return fmt.Sprintf("now +%s\n", e.clock.Now().Sub(e.start))
	case "check-nodes":
		e.srv.tick()
	case "print":
		e.settle()
		e.st.take()
		switch flags[0] {
		case "waiting":
			return e.printWaiting()
		case "priorities":
			return e.printPriorities(t)
		case "nodes":
			e.srv.mu.Lock()
			nodes := e.srv.Nodes()
			e.srv.unlock()
			var out strings.Builder
			for _, n := range nodes {
				fmt.Fprintf(&out, "node %s: %s cpus %d/%d jobs %d\n", n.Name, n.Status, n.AllocCPUs, n.CPUs, n.Jobs)
			}
			return out.String()
		}
		return e.printRuns(t)
	default:
		t.Fatalf("unknown command %q", line)
	}
	e.settle()
	var out strings.Builder
	if err != nil {
		fmt.Fprintf(&out, "error: %v\n", err)
	}
	out.WriteString(e.n.Describe(e.start, e.st.take()))
	out.WriteString(e.sent())
	return out.String()
}

func (e *transcriptEnv) node(name string, args map[string]string) error {
	info := api.NodeInfo{Name: name, Addr: "10.0.0." + strconv.Itoa(len(e.nodes)+1), CPUs: atoi(args["cpus"], 1), Fleet: args["fleet"]}
	if m := args["mem"]; m != "" {
		v, err := spec.ParseBytes(m)
		if err != nil {
			return err
		}
		info.Memory = int64(v)
	}
	for k := range atoi(args["gpus"], 0) {
		info.GPUs = append(info.GPUs, api.GPU{Index: k, Vendor: "nvidia", Name: "H100", Memory: 80 << 30})
	}
	if err := e.srv.register(info); err != nil {
		return err
	}
	conn, err := e.srv.connect(name)
	if err != nil {
		return err
	}
	e.nodes[name], e.conns[name] = true, conn
	return nil
}

func atoi(s string, def int) int {
	if v, err := strconv.Atoi(s); err == nil {
		return v
	}
	return def
}

func (e *transcriptEnv) submit(t testing.TB, name string, flags []string, args map[string]string) error {
	y := e.n.TaskYAML(name, flags, args)
	var opts control.SubmitOpts
	opts.Hold = slices.Contains(flags, "held")
	if v := args["begin"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("begin=%s: %v", v, err)
		}
		opts.Begin = e.clock.Now().Add(d)
	}
	task, err := spec.Parse("transcript.yml", []byte(y))
	if err != nil {
		t.Fatalf("submit %s: %v\n%s", name, err, y)
	}
	// As the API does: the server's checks, the dependencies resolved.
	if err := e.srv.admit(task); err != nil {
		return err
	}
	seen, err := e.srv.resolveDeps(context.Background(), nil, task)
	if err != nil {
		return err
	}
	user := e.admin
	if u := args["user"]; u != "" {
		id, err := e.st.EnsureUser(context.Background(), u, false)
		if err != nil {
			t.Fatal(err)
		}
		user = &store.User{ID: id, Name: u}
	}
	r, err := e.srv.submit(user, task, seen, opts)
	if err != nil {
		return err
	}
	e.runs[name], e.names[r.ID] = r.ID, name
	return nil
}

func (e *transcriptEnv) agent(flags []string, args map[string]string) error {
	node, typ := flags[0], flags[1]
	run, num, _ := strings.Cut(flags[2], ".")
	num, _, _ = strings.Cut(num, "#") // the attempt is the run's current one
	e.srv.mu.Lock()
	_, jobs, ok := e.srv.ActiveRun(e.runs[run])
	var id int64
	if ok && atoi(num, 0) < len(jobs) {
		id = jobs[atoi(num, 0)].ID
	}
	e.srv.unlock()
	ev := api.AgentEvent{JobID: id, Type: typ, Time: e.clock.Now(), ExitCode: atoi(args["code"], 0), Reason: args["reason"],
		OOMKilled: slices.Contains(flags, "oom")}
	_, err := e.srv.agentEvents(node, []api.AgentEvent{ev})
	return err
}

// sent prints the messages queued to the nodes' streams, node by node.
func (e *transcriptEnv) sent() string {
	var out strings.Builder
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range e.conns {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		for more := true; more; {
			select {
			case m := <-e.conns[n].conn.ch:
				out.WriteString(e.message(n, m))
			default:
				more = false
			}
		}
	}
	return out.String()
}

func (e *transcriptEnv) jobName(id int64) string {
	e.srv.mu.Lock()
	defer e.srv.unlock()
	if j, ok := e.srv.Job(id); ok {
		return e.n.Job(&j)
	}
	return fmt.Sprintf("job %d", id)
}

func (e *transcriptEnv) message(node string, m api.AgentMessage) string {
	return e.n.Message(node, m, e.jobName)
}

// printPriorities prints the waiting runs' priority factors as the API
// gives them (sprio's), highest first.
func (e *transcriptEnv) printPriorities(t testing.TB) string {
	w := httptest.NewRecorder()
	e.srv.handlePriorities(w, httptest.NewRequest(http.MethodGet, "/api/v1/priorities", nil), nil)
	var ps []api.RunPriority
	if err := json.Unmarshal(w.Body.Bytes(), &ps); err != nil {
		t.Fatalf("priorities: %v: %s", err, w.Body)
	}
	// Asked for one run (squeue -j), each gets what the whole listing
	// gives it, computed without copying the queue.
	for _, p := range ps {
		w := httptest.NewRecorder()
		e.srv.handlePriorities(w, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/v1/priorities?ids=%d", p.RunID), nil), nil)
		var one []api.RunPriority
		if err := json.Unmarshal(w.Body.Bytes(), &one); err != nil {
			t.Fatalf("priorities?ids=%d: %v: %s", p.RunID, err, w.Body)
		}
		if d := gocmp.Diff([]api.RunPriority{p}, one); d != "" {
			t.Errorf("priorities?ids=%d differs from the whole listing's (-all +one):\n%s", p.RunID, d)
		}
	}
	var out strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&out, "priority %s (%s): %d = age %d + fairshare %d + size %d + qos %d + partition %d + expansion %d + own %d - nice %d\n",
			e.names[p.RunID], p.User, p.Priority, p.Age, p.Fairshare, p.JobSize, p.QOS, p.Partition, p.Expansion, p.Own, p.Nice)
	}
	return out.String()
}

// printWaiting prints each waiting run's reason, estimated start and the
// runs it waits for, as the last pass left them in memory.
func (e *transcriptEnv) printWaiting() string {
	e.srv.mu.Lock()
	defer e.srv.unlock()
	var out strings.Builder
	for _, w := range e.srv.Waiting() {
		out.WriteString(e.n.Waiting(w.ID, w.Reason, w.EstimatedStart, e.start, w.BlockedBy))
	}
	return out.String()
}

func (e *transcriptEnv) printRuns(t testing.TB) string {
	ctx := context.Background()
	runs, err := e.st.ListRuns(ctx, store.RunFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(runs, func(a, b *store.Run) int { return cmp.Compare(a.ID, b.ID) })
	var out strings.Builder
	for _, r := range runs {
		jobs, err := e.st.ListJobs(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.n.Run(r, jobs)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(s)
	}
	return out.String()
}
