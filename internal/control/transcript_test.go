package control

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control/transcript"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
	gocmp "github.com/google/go-cmp/cmp"
)

// Transcripts drive the cluster through runs' whole lives by Step alone,
// on a virtual clock, as etcd's raft tests do: each file of testdata is a
// list of commands, each followed by what it did — the batches it emitted
// (as the store ends up once they are applied) and the messages it sent to
// agents. `go test ./internal/control -run Transcripts -update` rewrites
// the outputs; review them as a diff.
//
// The command language is internal/server's transcript driver's, which
// runs the same files on a real server over SQLite (`go test
// ./internal/server -run Transcripts -control-transcripts`) and keeps the
// files that need the store itself (a restart).
//
//	node N cpus=C [mem=8G] [gpus=G] [fleet=F]   register N and open its stream
//	away N                                    N's stream ends
//	connect N                                 N's agent opens its stream again
//	submit R [name=N] [cpus=C] [mem=M] [gpus=G] [nodes=K] [limit=1h] [retry=error,interruption [duration=1h]] [startup=master-first]
//	         [held] [begin=+30s] [singleton] [user=U]  (U is a new user; the default is admin)
//	         [cron=*/5_*_*_*_*] (a schedule; _ for spaces; its runs are named R@1, R@2…)
//	         [het=NODES:CPUS,NODES:CPUS] (a heterogeneous run's groups)
//	         [stop-criteria=master-done] [depends=afterok:R2[?afterok:R3|+afterok:R3]] [kill-invalid-depend]
//	         [priority=P] [qos=Q] [array=0-3%2]                (? any of them, + all)
//	         [fleets=F1,F2] (fleet or partition names, sbatch's -p)
//	                                          (an array's tasks are named R_INDEX)
//	policy FILE.yml                           the policy file's rules (testdata/FILE.yml)
//	schedule                                  the tick (schedules' due runs), then one scheduling pass
//	agent N started|exited R.K [code=C] [reason=stopped|aborted|max_duration|start_failed|lost_by_agent] [oom]
//	stop R [abort] | requeue R | hold R | release R | update R [limit=S] [priority=P] [throttle=T]
//	                                          (stop R_INDEX of a task not made yet cancels it)
//	tick D                                    the clock moves on by D (1m, 30s…)
//	check-nodes                               the tick alone: nodes away past the timeout fail their jobs
//	print runs                                every run and job as the batches left them
//	print waiting                             the waiting runs' reasons, estimates and blockers
//	print priorities                          the waiting runs' priority factors (sprio)
//	print nodes                               the nodes as berth fleet shows them: status, CPUs and jobs held
var update = flag.Bool("update", false, "rewrite the transcripts' outputs")

func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runTranscript(t, f) })
	}
}

func runTranscript(t *testing.T, path string) {
	runTranscriptOn(t, path, newTranscriptEnv(filepath.Dir(path)))
}

// runTranscriptOn runs the transcript at path on e and checks (or, with
// -update, rewrites) its outputs; the state machine's invariants hold
// after every command.
func runTranscriptOn(t *testing.T, path string, e *transcriptEnv) {
	transcript.Run(t, path, *update, func(cmd string) string { return e.do(t, cmd) }, e.c.Check)
}

// transcriptEnv is a Cluster fed by a transcript's commands, as its
// owner feeds it (internal/server's obligations, inputs.go): each input
// at the virtual clock's time, what it emitted taken at once. Nothing is
// persisted: the batches are printed, and folded into the records as the
// store's upserts leave them (durable) for `print runs` and for what a
// submission's dependencies learn of ended runs.
type transcriptEnv struct {
	c     *Cluster
	dir   string // where policy files are
	now   time.Time
	start time.Time
	// epochs are the nodes' open streams (a message is sent on the stream
	// it was emitted for, as the server does).
	epochs map[string]uint64
	nodes  int // registered so far: the next node's address
	users  map[string]int64
	// n are the runs' names; runs and names are its maps.
	n     *transcript.Names
	runs  map[string]int64 // name -> ID
	names map[int64]string
	// durable are the runs and jobs as the emitted batches leave them.
	durable struct {
		runs map[int64]*store.Run
		jobs map[int64]*store.Job
	}
	// commits are what the last command emitted.
	commits []Commit
	// st, when set, is a real store each batch is applied to as well
	// (TestTranscriptRecordsAreTheStore); its users are made as the
	// transcript names them.
	st store.Store
}

func newTranscriptEnv(dir string) *transcriptEnv {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &transcriptEnv{c: New(Config{StopGrace: 10 * time.Second, Drift: 30 * time.Second}), dir: dir, now: start, start: start,
		epochs: map[string]uint64{}, users: map[string]int64{"admin": 1}, n: transcript.NewNames()}
	e.runs, e.names = e.n.Runs, e.n.IDs
	e.durable.runs, e.durable.jobs = map[int64]*store.Run{}, map[int64]*store.Job{}
	// As the server starts on an empty store.
	if err := e.c.Restore(&Loaded{Active: &store.Active{}}, start); err != nil {
		panic(err)
	}
	e.take()
	e.commits = nil
	return e
}

// step feeds in at the clock's time and takes what it emitted.
func (e *transcriptEnv) step(in Input) (any, error) {
	r, err := e.c.Step(e.now, in)
	e.take()
	return r, err
}

// take takes what the cluster emitted and makes it "durable": folded as
// the store's upserts do (a record's configuration, once written, stays
// when a later version has none).
func (e *transcriptEnv) take() {
	for _, cm := range e.c.Take().Commits {
		if e.st != nil {
			if err := e.st.Apply(context.Background(), cm.Batch); err != nil {
				panic(fmt.Sprintf("the store refused a batch: %v", err))
			}
		}
		e.commits = append(e.commits, cm)
		// Arrays and schedules are their records: the store reads them
		// as runs (store.Array.Run).
		runs := slices.Clone(cm.Batch.Runs)
		for _, a := range cm.Batch.Arrays {
			runs = append(runs, a.Run())
		}
		for _, c := range cm.Batch.Schedules {
			runs = append(runs, c.Run())
		}
		for _, r := range runs {
			cp := *r
			if old, ok := e.durable.runs[r.ID]; ok && len(cp.Spec) == 0 {
				cp.Spec = old.Spec
			}
			e.durable.runs[r.ID] = &cp
		}
		for _, j := range cm.Batch.Jobs {
			cp := *j
			e.durable.jobs[j.ID] = &cp
		}
	}
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
	e.commits = nil
	var err error
	switch f[0] {
	case "node":
		err = e.node(flags[0], args)
	case "away":
		epoch, ok := e.epochs[flags[0]]
		delete(e.epochs, flags[0])
		if ok {
			_, err = e.step(DisconnectInput{Node: flags[0], Epoch: epoch})
		}
	case "connect":
		err = e.connect(flags[0])
	case "submit":
		err = e.submit(t, flags[0], flags[1:], args)
	case "policy":
		p, perr := policy.Load(filepath.Join(e.dir, flags[0]))
		if perr != nil {
			t.Fatalf("%s: %v", line, perr)
		}
		_, err = e.step(RulesInput{Rules: p})
	case "schedule":
		e.step(TickInput{})
		e.pass()
	case "agent":
		err = e.agent(flags, args)
	case "stop":
		if array, index, ok := e.taskNotMade(flags[0]); ok {
			_, err = e.step(CancelTaskInput{Array: array, Index: index})
			break
		}
		_, err = e.step(StopInput{ID: e.runs[flags[0]], Abort: slices.Contains(flags, "abort")})
	case "requeue", "hold", "release":
		_, err = e.step(ControlInput{ID: e.runs[flags[0]], Req: api.ControlRequest{Action: f[0]}, Admin: true})
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
		_, err = e.step(ControlInput{ID: e.runs[flags[0]], Req: req, Admin: true})
	case "tick":
		d, perr := time.ParseDuration(flags[0])
		if perr != nil {
			t.Fatalf("%s: %v", line, perr)
		}
		e.now = e.now.Add(d)
		return fmt.Sprintf("now +%s\n", e.now.Sub(e.start))
	case "check-nodes":
		e.step(TickInput{})
	case "print":
		switch flags[0] {
		case "waiting":
			return e.printWaiting()
		case "priorities":
			return e.printPriorities(t)
		case "nodes":
			return printNodes(e.c.Nodes())
		}
		return e.printRuns(t)
	case "restart":
		t.Fatalf("%s: a restart loads the store: internal/server's transcripts have it", line)
	default:
		t.Fatalf("unknown command %q", line)
	}
	var out strings.Builder
	if err != nil {
		fmt.Fprintf(&out, "error: %v\n", err)
	}
	out.WriteString(e.describe())
	out.WriteString(e.sent())
	return out.String()
}

// pass is one scheduling pass as the server runs it: prepared, computed
// (off the lock there), applied.
func (e *transcriptEnv) pass() {
	r, _ := e.step(PassInput{})
	p, _ := r.(*Pass)
	if p == nil {
		return
	}
	plan := p.Schedule()
	e.step(PlanInput{Pass: p, Plan: plan, Reasons: e.c.NewReasons(plan)})
	e.c.ForgetReasons(p, plan)
}

func (e *transcriptEnv) node(name string, args map[string]string) error {
	e.nodes++
	info := api.NodeInfo{Name: name, Addr: "10.0.0." + strconv.Itoa(e.nodes), CPUs: atoi(args["cpus"], 1), Fleet: args["fleet"]}
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
	body, _ := json.Marshal(info)
	if _, err := e.step(RegisterInput{Info: info, Body: body}); err != nil {
		return err
	}
	return e.connect(name)
}

func (e *transcriptEnv) connect(name string) error {
	r, err := e.step(ConnectInput{Node: name})
	if err != nil {
		return err
	}
	e.epochs[name] = r.(uint64)
	return nil
}

// taskNotMade reads R_INDEX, a task of array R not made yet (stopping it
// cancels it before it exists).
func (e *transcriptEnv) taskNotMade(name string) (array int64, index int, ok bool) {
	if _, made := e.runs[name]; made {
		return 0, 0, false
	}
	a, i, found := strings.Cut(name, "_")
	index, err := strconv.Atoi(i)
	if array = e.runs[a]; !found || err != nil || array == 0 {
		return 0, 0, false
	}
	return array, index, true
}

func atoi(s string, def int) int {
	if v, err := strconv.Atoi(s); err == nil {
		return v
	}
	return def
}

func (e *transcriptEnv) submit(t testing.TB, name string, flags []string, args map[string]string) error {
	y := e.n.TaskYAML(name, flags, args)
	var opts SubmitOpts
	opts.Hold = slices.Contains(flags, "held")
	if v := args["begin"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("begin=%s: %v", v, err)
		}
		opts.Begin = e.now.Add(d)
	}
	task, err := spec.Parse("transcript.yml", []byte(y))
	if err != nil {
		t.Fatalf("submit %s: %v\n%s", name, err, y)
	}
	// What the server's API does before the input: the QOS named, the
	// dependencies resolved to IDs with what is known of those that ended.
	q, err := e.c.Rules().QOSOf(task.QOS)
	if err != nil {
		return fmt.Errorf("%w: qos: %v", ErrInvalid, err)
	}
	task.QOS = q
	ended := map[int64]Outcome{}
	for i := range task.DependsOn {
		d := &task.DependsOn[i]
		d.IDs = make([]int64, len(d.Runs))
		for k, ref := range d.Runs {
			id, _ := strconv.ParseInt(ref, 10, 64)
			r, ok := e.durable.runs[id]
			if !ok {
				return fmt.Errorf("%w: depends_on[%d].%s: no run %d", ErrInvalid, i, d.Type, id)
			}
			d.IDs[k] = id
			if api.Status(r.Status).Finished() {
				ended[id] = OutcomeOf(r)
			}
		}
	}
	user := cmp.Or(args["user"], "admin")
	uid, ok := e.users[user]
	if !ok {
		uid = int64(len(e.users) + 1)
		if e.st != nil {
			if uid, err = e.st.EnsureUser(context.Background(), user, false); err != nil {
				t.Fatal(err)
			}
		}
		e.users[user] = uid
	}
	body, _ := json.Marshal(task)
	r, err := e.step(SubmitInput{UserID: uid, User: user, ProjectID: 1, Project: "main", Task: task, Body: body, Ended: ended, Opts: opts})
	if err != nil {
		return err
	}
	id := r.(store.Run).ID
	e.runs[name], e.names[id] = id, name
	return nil
}

func (e *transcriptEnv) agent(flags []string, args map[string]string) error {
	node, typ := flags[0], flags[1]
	run, num, _ := strings.Cut(flags[2], ".")
	num, _, _ = strings.Cut(num, "#") // the attempt is the run's current one
	_, jobs, ok := e.c.ActiveRun(e.runs[run])
	var id int64
	if ok && atoi(num, 0) < len(jobs) {
		id = jobs[atoi(num, 0)].ID
	}
	ev := api.AgentEvent{JobID: id, Type: typ, Time: e.now, ExitCode: atoi(args["code"], 0), Reason: args["reason"],
		OOMKilled: slices.Contains(flags, "oom")}
	_, err := e.step(ReportInput{Node: node, Events: []api.AgentEvent{ev}})
	return err
}

// describe prints what the last command's batches committed, as the
// store ends up (transcript.Names.Describe).
func (e *transcriptEnv) describe() string {
	var batches []*store.Batch
	for _, cm := range e.commits {
		batches = append(batches, cm.Batch)
	}
	return e.n.Describe(e.start, batches)
}

// sent prints the messages the last command's effects send, node by node
// in name order, each node's in order; a message for a stream that is no
// longer open is not sent (the next stream begins with a full sync).
func (e *transcriptEnv) sent() string {
	byNode := map[string][]api.AgentMessage{}
	for _, cm := range e.commits {
		for _, ef := range cm.Effects {
			if ep, open := e.epochs[ef.Node]; ef.Kind == EffectSend && open && ep == ef.Epoch {
				byNode[ef.Node] = append(byNode[ef.Node], ef.Msg)
			}
		}
	}
	var out strings.Builder
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		for _, m := range byNode[n] {
			out.WriteString(e.message(n, m))
		}
	}
	return out.String()
}

func (e *transcriptEnv) jobName(id int64) string {
	if j, ok := e.c.Job(id); ok {
		return e.n.Job(&j)
	}
	return fmt.Sprintf("job %d", id)
}

func (e *transcriptEnv) message(node string, m api.AgentMessage) string {
	return e.n.Message(node, m, e.jobName)
}

// printPriorities prints the waiting runs' priority factors as the API
// weighs them (sprio's), highest first. Asked for one run (squeue -j),
// each gets what the whole listing gives it, computed without copying
// the queue where PrioritiesOf can.
func (e *transcriptEnv) printPriorities(t testing.TB) string {
	snap, names := e.c.Priorities(e.now)
	all := sched.Priorities(snap, e.now)
	for id, f := range all {
		one, _, cheap := e.c.PrioritiesOf(e.now, []int64{id})
		if !cheap {
			continue // the caller copies the queue: the listing's own
		}
		if d := gocmp.Diff(map[int64]sched.Factors{id: f}, one); d != "" {
			t.Errorf("priorities of %s differ from the whole listing's (-all +one):\n%s", e.names[id], d)
		}
	}
	wt := sched.DefaultWeights
	w := func(w int64, f float64) int64 { return int64(math.Round(float64(w) * f)) }
	ids := slices.SortedFunc(maps.Keys(all), func(a, b int64) int {
		return cmp.Or(cmp.Compare(all[b].Total, all[a].Total), cmp.Compare(a, b))
	})
	var out strings.Builder
	for _, id := range ids {
		f := all[id]
		fmt.Fprintf(&out, "priority %s (%s): %d = age %d + fairshare %d + size %d + qos %d + partition %d + expansion %d + own %d - nice %d\n",
			e.names[id], names[id][1], f.Total, w(wt.Age, f.Age), w(wt.Fairshare, f.Fairshare), w(wt.Size, f.Size), w(wt.QOS, f.QOS),
			w(wt.Partition, f.Partition), w(wt.Expansion, f.Expansion), w(wt.Priority, f.Priority), f.Nice)
	}
	return out.String()
}

// printWaiting prints each waiting run's reason, estimated start and the
// runs it waits for, as the last pass left them in memory.
func (e *transcriptEnv) printWaiting() string {
	var out strings.Builder
	for _, w := range e.c.Waiting() {
		out.WriteString(e.n.Waiting(w.ID, w.Reason, w.EstimatedStart, e.start, w.BlockedBy))
	}
	return out.String()
}

// printRuns prints every run and its jobs (by number and attempt) as the
// batches left them.
func (e *transcriptEnv) printRuns(t testing.TB) string {
	byRun := map[int64][]*store.Job{}
	for _, j := range e.durable.jobs {
		byRun[j.RunID] = append(byRun[j.RunID], j)
	}
	var out strings.Builder
	for _, id := range slices.Sorted(maps.Keys(e.durable.runs)) {
		jobs := byRun[id]
		slices.SortFunc(jobs, func(a, b *store.Job) int { return cmp.Or(cmp.Compare(a.Num, b.Num), cmp.Compare(a.Attempt, b.Attempt)) })
		s, err := e.n.Run(e.durable.runs[id], jobs)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(s)
	}
	return out.String()
}

// printNodes prints the nodes as the API shows them (berth fleet).
func printNodes(nodes []api.Node) string {
	var out strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&out, "node %s: %s cpus %d/%d jobs %d\n", n.Name, n.Status, n.AllocCPUs, n.CPUs, n.Jobs)
	}
	return out.String()
}
