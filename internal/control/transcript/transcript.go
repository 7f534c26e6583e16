// Package transcript is what the two transcript drivers share: the
// control plane's (internal/control, on Cluster.Step alone) and the
// server's (internal/server, the same files on a real server over
// SQLite). It holds the file format, the names a transcript gives runs
// and jobs, the configuration a `submit` line stands for, and the
// printing of batches, agent messages and runs, so that both drivers
// read and print the same language. Only tests import it.
package transcript

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// A Block is one step of a transcript: comment lines (#), then one
// command, then "----" and its output. Blocks are separated by blank
// lines.
type Block struct {
	Comments []string
	Cmd      string
	Out      string
}

// Parse reads a transcript's blocks.
func Parse(text string) ([]Block, error) {
	var blocks []Block
	var b *Block
	inOut := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "" && !inOut:
		case line == "" && inOut:
			inOut = false
			b = nil
		case inOut:
			b.Out += line + "\n"
		case line == "----":
			if b == nil || b.Cmd == "" {
				return nil, fmt.Errorf("---- without a command")
			}
			inOut = true
		default:
			if b == nil {
				blocks = append(blocks, Block{})
				b = &blocks[len(blocks)-1]
			}
			if strings.HasPrefix(line, "#") {
				b.Comments = append(b.Comments, line)
			} else if b.Cmd != "" {
				return nil, fmt.Errorf("two commands in one block: %q and %q", b.Cmd, line)
			} else {
				b.Cmd = line
			}
		}
	}
	return blocks, nil
}

// Run runs the transcript at path: each command through do, check after
// it (the state machine's invariants), its output compared with the
// file's, or with update the file rewritten with what the commands print.
func Run(t *testing.T, path string, update bool, do func(cmd string) string, check func() error) {
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Parse(string(text))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out strings.Builder
	for _, b := range blocks {
		for _, c := range b.Comments {
			out.WriteString(c + "\n")
		}
		if b.Cmd == "" {
			out.WriteString("\n")
			continue
		}
		got := do(b.Cmd)
		if err := check(); err != nil {
			t.Errorf("%s: after %s: %v", path, b.Cmd, err)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", b.Cmd, got)
		if !update && got != b.Out {
			t.Errorf("%s: %s\n--- want\n%s--- got\n%s", path, b.Cmd, b.Out, got)
		}
	}
	if update {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Names are the names a transcript gives runs: the name submitted, an
// array's task R_INDEX, a schedule's Nth run R@N.
type Names struct {
	Runs  map[string]int64 // name -> ID
	IDs   map[int64]string // ID -> name
	Ticks map[string]int   // runs fired by each schedule
}

// NewNames is an empty set of names.
func NewNames() *Names {
	return &Names{Runs: map[string]int64{}, IDs: map[int64]string{}, Ticks: map[string]int{}}
}

// Add names run id.
func (n *Names) Add(name string, id int64) { n.Runs[name], n.IDs[id] = id, name }

// learn names r if it has no name yet: an array's task after its array,
// a schedule's run after its schedule (same name, lower ID).
func (n *Names) learn(r *store.Run) {
	if _, named := n.IDs[r.ID]; named {
		return
	}
	if r.ArrayID != 0 {
		n.Add(fmt.Sprintf("%s_%d", n.IDs[r.ArrayID], r.ArrayIndex), r.ID)
		return
	}
	for id, name := range n.IDs {
		if n.Runs[name] == id && r.Name == name && id < r.ID {
			n.Ticks[name]++
			n.Add(fmt.Sprintf("%s@%d", name, n.Ticks[name]), r.ID)
			return
		}
	}
}

// Job names a job: RUN.NUM, and #ATTEMPT after the first.
func (n *Names) Job(j *store.Job) string {
	s := fmt.Sprintf("%s.%d", n.IDs[j.RunID], j.Num)
	if j.Attempt > 0 {
		s += fmt.Sprintf("#%d", j.Attempt)
	}
	return s
}

// Status prints a status with its reason and exit code.
func Status(st, reason string, code *int) string {
	s := st
	if reason != "" {
		s += " (" + reason + ")"
	}
	if code != nil {
		s += fmt.Sprintf(" exit %d", *code)
	}
	return s
}

// TaskYAML is the configuration a `submit NAME …` line stands for (the
// driver parses it and resolves what needs its state: the QOS, ended
// dependencies, submit options).
func (n *Names) TaskYAML(name string, flags []string, args map[string]string) string {
	y := fmt.Sprintf("type: task\nname: %s\ncommands: [\"true\"]\nresources:\n  cpu: %s\n", cmpOr(args["name"], name), cmpOr(args["cpus"], "1"))
	if m := args["mem"]; m != "" {
		y += "  memory: " + m + "\n"
	}
	if g := args["gpus"]; g != "" {
		y += "  gpu: " + g + "\n"
	}
	if slices.Contains(flags, "singleton") {
		y += "singleton: true\n"
	}
	if slices.Contains(flags, "kill-invalid-depend") {
		y += "kill_invalid_depend: true\n"
	}
	fields := map[string]string{"nodes": "nodes", "limit": "max_duration", "startup": "startup_order",
		"stop-criteria": "stop_criteria", "stop-duration": "stop_duration", "priority": "priority", "qos": "qos", "array": "array"}
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		if v := args[key]; v != "" {
			y += fields[key] + ": " + v + "\n"
		}
	}
	if v := args["fleets"]; v != "" {
		y += "fleets: [" + v + "]\n"
	}
	if v := args["retry"]; v != "" {
		y += "retry:\n  on_events: [" + v + "]\n"
		if d := args["duration"]; d != "" {
			y += "  duration: " + d + "\n"
		}
	}
	if v := args["cron"]; v != "" {
		y += fmt.Sprintf("schedule:\n  cron: [%q]\n", strings.ReplaceAll(v, "_", " "))
	}
	if v := args["het"]; v != "" {
		y += "groups:\n"
		for _, g := range strings.Split(v, ",") {
			nodes, cpus, _ := strings.Cut(g, ":")
			y += fmt.Sprintf("  - {nodes: %s, resources: {cpu: %s}}\n", nodes, cpus)
		}
	}
	if v := args["depends"]; v != "" {
		// TYPE:R, alternatives TYPE:R?TYPE:R2 (dependency_policy: any), or
		// all of TYPE:R+TYPE:R2.
		sep := "?"
		if strings.Contains(v, "+") {
			sep = "+"
		}
		var conds []string
		for _, c := range strings.Split(v, sep) {
			typ, ref, _ := strings.Cut(c, ":")
			conds = append(conds, fmt.Sprintf("{%s: %d}", typ, n.Runs[ref]))
		}
		y += "depends_on: [" + strings.Join(conds, ", ") + "]\n"
		if sep == "?" && len(conds) > 1 {
			y += "dependency_policy: any\n"
		}
	}
	return y
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Describe prints what batches committed, as the store ends up: the last
// version of each run, array, schedule and job in ID order, the nodes'
// drains, then the history events in order. Times print from start. It
// names the runs it meets for the first time.
func (n *Names) Describe(start time.Time, batches []*store.Batch) string {
	runs := map[int64]*store.Run{}
	jobs := map[int64]*store.Job{}
	var events []*store.Event
	nodes := map[string]*store.Node{}
	arrays := map[int64]*store.Array{}
	schedules := map[int64]*store.Schedule{}
	for _, b := range batches {
		for _, x := range b.Nodes {
			nodes[x.Name] = x
		}
		for _, a := range b.Arrays {
			arrays[a.ID] = a
		}
		for _, c := range b.Schedules {
			schedules[c.ID] = c
		}
		for _, r := range b.Runs {
			runs[r.ID] = r
			n.learn(r)
		}
		for _, j := range b.Jobs {
			jobs[j.ID] = j
		}
		events = append(events, b.Events...)
	}
	var out strings.Builder
	for _, id := range slices.Sorted(maps.Keys(runs)) {
		r := runs[id]
		fmt.Fprintf(&out, "commit run %s: %s", n.IDs[id], Status(r.Status, r.Reason, r.ExitCode))
		if c := lifecycle.StopCause(r.StopReq); c != lifecycle.StopNone {
			fmt.Fprintf(&out, " stop=%s", c)
		}
		if !r.EstimatedStart.IsZero() {
			fmt.Fprintf(&out, " estimate +%s", r.EstimatedStart.Sub(start))
		}
		out.WriteString("\n")
	}
	for _, id := range slices.Sorted(maps.Keys(arrays)) {
		a := arrays[id]
		// An array's and a schedule's record is what lists them (its head):
		// their status first, as a run's.
		fmt.Fprintf(&out, "commit array %s: %s", n.IDs[id], Status(a.Status, a.Reason, nil))
		if c := lifecycle.StopCause(a.StopReq); c != lifecycle.StopNone {
			fmt.Fprintf(&out, " stop=%s", c)
		}
		fmt.Fprintf(&out, ", %s made %d done %d failed %d", a.Indices, a.Next, a.Done, a.Failed)
		if a.Throttle > 0 {
			fmt.Fprintf(&out, " throttle %d", a.Throttle)
		}
		if len(a.Cancel) > 0 {
			fmt.Fprintf(&out, " cancel %v", a.Cancel)
		}
		if a.Stopped {
			out.WriteString(" stopped")
		}
		if !a.Active {
			out.WriteString(" ended")
		}
		out.WriteString("\n")
	}
	for _, id := range slices.Sorted(maps.Keys(schedules)) {
		c := schedules[id]
		fmt.Fprintf(&out, "commit schedule %s: %s, %q runs %d", n.IDs[id], Status(c.Status, c.Reason, nil), c.Cron, c.Runs)
		if c.LastRun != 0 {
			fmt.Fprintf(&out, " last %s", n.IDs[c.LastRun])
		}
		if !c.NextFire.IsZero() {
			fmt.Fprintf(&out, " next +%s", c.NextFire.Sub(start))
		}
		if !c.Active {
			out.WriteString(" stopped")
		}
		out.WriteString("\n")
	}
	for _, id := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[id]
		fmt.Fprintf(&out, "commit job %s: %s", n.Job(j), Status(j.Status, j.Reason, j.ExitCode))
		if j.Node != "" {
			fmt.Fprintf(&out, " on %s", j.Node)
		}
		out.WriteString("\n")
	}
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		// Only drains: a node's other changes (when it was last seen) are
		// the clock's.
		if d := nodes[name].Drain; len(d) > 0 {
			fmt.Fprintf(&out, "commit node %s: drain %s\n", name, d)
		}
	}
	for _, ev := range events {
		fmt.Fprintf(&out, "event %s %s: %s\n", n.IDs[ev.RunID], ev.Type, ev.Message)
	}
	return out.String()
}

// Message prints a message sent to node's agent; jobName names a job by
// its ID.
func (n *Names) Message(node string, m api.AgentMessage, jobName func(int64) string) string {
	switch m.Type {
	case "assign", "sync":
		var out strings.Builder
		if m.Type == "sync" {
			fmt.Fprintf(&out, "send %s: sync of %d job(s)\n", node, len(m.Jobs))
		}
		for _, a := range m.Jobs {
			fmt.Fprintf(&out, "send %s: %s %s.%d attempt %d cpus=%d", node, m.Type, n.IDs[a.RunID], a.JobNum, a.Attempt, a.Alloc.CPUs)
			if len(a.Alloc.GPUs) > 0 {
				fmt.Fprintf(&out, " gpus=%v", a.Alloc.GPUs)
			}
			if a.Stop > 0 {
				fmt.Fprintf(&out, " stop=%s", lifecycle.StopCause(a.Stop))
			}
			out.WriteString("\n")
		}
		return out.String()
	case "limit":
		return fmt.Sprintf("send %s: limit %s max_duration=%ds\n", node, jobName(m.Limit.JobID), m.Limit.MaxDuration)
	case "stop":
		s := fmt.Sprintf("send %s: stop %s", node, jobName(m.Stop.JobID))
		if m.Stop.Abort {
			s += " abort"
		}
		return s + "\n"
	}
	return fmt.Sprintf("send %s: %s\n", node, m.Type)
}

// Run prints run r and its jobs (in the order given) as `print runs`
// shows them: its status, its stop, what its stored configuration says of
// its priority and time limit, then each job.
func (n *Names) Run(r *store.Run, jobs []*store.Job) (string, error) {
	var out strings.Builder
	fmt.Fprintf(&out, "run %s: %s", n.IDs[r.ID], Status(r.Status, r.Reason, r.ExitCode))
	if c := lifecycle.StopCause(r.StopReq); c != lifecycle.StopNone {
		fmt.Fprintf(&out, " stop=%s", c)
	}
	var cfg spec.Task
	if err := json.Unmarshal(r.Spec, &cfg); err != nil {
		return "", fmt.Errorf("run %s: stored configuration: %w", n.IDs[r.ID], err)
	}
	if cfg.Priority != 0 {
		fmt.Fprintf(&out, " priority=%d", cfg.Priority)
	}
	if cfg.MaxDuration != nil {
		fmt.Fprintf(&out, " limit=%ds", *cfg.MaxDuration)
	}
	out.WriteString("\n")
	for _, j := range jobs {
		fmt.Fprintf(&out, "  job %s: %s", n.Job(j), Status(j.Status, j.Reason, j.ExitCode))
		if j.Node != "" {
			fmt.Fprintf(&out, " on %s", j.Node)
		}
		out.WriteString("\n")
	}
	return out.String(), nil
}

// Waiting prints a waiting run's line of `print waiting`: its reason,
// estimated start (from start) and the runs it waits behind.
func (n *Names) Waiting(id int64, reason string, est, start time.Time, behind []int64) string {
	s := fmt.Sprintf("waiting %s: %s", n.IDs[id], cmpOr(reason, "(no pass yet)"))
	if !est.IsZero() {
		s += fmt.Sprintf(" estimate +%s", est.Sub(start))
	}
	if len(behind) > 0 {
		var by []string
		for _, b := range behind {
			by = append(by, n.IDs[b])
		}
		s += " behind " + strings.Join(by, ",")
	}
	return s + "\n"
}
