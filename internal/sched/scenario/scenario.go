// Package scenario reads a scheduling situation written as text — nodes,
// running and pending runs, QOS, limits, switches — and prints the plan
// sched.Schedule makes of it. The scheduler's golden tests are written in
// it, and `berth sim --scenario FILE` reads the same format, so a situation
// seen in production can be replayed and argued about as a file.
//
// One statement per line; '#' starts a comment; times are offsets from the
// pass's now (+1h, -10m); amounts take K, M, G, T suffixes (powers of 1024):
//
//	policy easy|fcfs|conservative|berth
//	weights age=1000 fairshare=10000 size=1000 qos=10000 partition=1000 priority=10000 maxage=168h
//	node NAME cpus=N mem=16G [gpus=A100:80G*4] [fleet=F] [tier=N] [blocks=N] [offline] [free-cpus=N free-mem=M free-gpus=0+1]
//	qos NAME [priority=N] [preempt=a+b] [mode=requeue|cancel]
//	limit user|project|qos|qos-user|array:NAME [jobs=N] [cpus=N] [mem=M] [gpus=N] [gpu:TYPE=N] [wall=D]
//	shares project:NAME=N | user:PROJECT/NAME=N
//	usage PROJECT/USER=CPU_SECONDS
//	switch NAME nodes=a+b | switches=x+y
//	running ID place=NODE:cpus=N:mem=M:gpus=0+1[,NODE:...] [end=+1h] [start=-5m] [user= project= qos=] [prio=N] [ending]
//	pending ID [cpus=N] [mem=M] [gpus=N] [gpu=A100+H100] [gpu-mem=40G] [nodes=N] [limit=D] [user= project= qos=]
//	        [prio=N] [nice=N] [submit=-5m] [fleets=a+b] [tier=N] [exclusive] [hold=REASON]
//	        [group=NODES:cpus=N:mem=M:gpus=G ...] (a heterogeneous run, one per group)
//
// Running runs hold what they are placed on: the nodes' free resources are
// computed from them unless a node says free-* itself.
package scenario

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/sched"
)

// Now is the time scenarios count from.
var Now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Parse reads a scenario; errors name the line.
func Parse(text string) (sched.Snapshot, error) {
	s := sched.Snapshot{Policy: sched.Berth}
	var switches []sched.Switch
	explicitFree := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		raw, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(raw)
		if len(f) == 0 {
			continue
		}
		if err := statement(&s, &switches, explicitFree, f); err != nil {
			return s, fmt.Errorf("line %d: %w", line, err)
		}
	}
	if len(switches) > 0 {
		t, err := sched.NewTopology(switches)
		if err != nil {
			return s, err
		}
		s.Topology = t
	}
	// What running runs hold is not free, unless the node said otherwise.
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if explicitFree[n.Name] {
			continue
		}
		for _, r := range s.Running {
			for _, p := range r.Placements {
				if p.Node != n.Name {
					continue
				}
				n.FreeCPUs -= p.CPUs
				n.FreeMemory -= p.Memory
				n.FreeGPUs = slices.DeleteFunc(n.FreeGPUs, func(g int) bool { return slices.Contains(p.GPUs, g) })
			}
		}
	}
	return s, nil
}

func statement(s *sched.Snapshot, switches *[]sched.Switch, explicitFree map[string]bool, f []string) error {
	kw, args := f[0], f[1:]
	switch kw {
	case "policy":
		if len(args) != 1 {
			return fmt.Errorf("policy: want one name")
		}
		p, err := sched.ParsePolicy(args[0])
		s.Policy = p
		return err
	case "weights":
		w := sched.DefaultWeights
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			if k == "maxage" {
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("weights: maxage: %w", err)
				}
				w.MaxAge = d
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("weights: %s: %w", k, err)
			}
			ptr := map[string]*int64{"age": &w.Age, "fairshare": &w.Fairshare, "size": &w.Size, "qos": &w.QOS, "partition": &w.Partition, "priority": &w.Priority}[k]
			if ptr == nil {
				return fmt.Errorf("weights: unknown factor %q", k)
			}
			*ptr = n
		}
		s.Weights = &w
	case "depth":
		n, err := strconv.Atoi(strings.Join(args, ""))
		s.Depth = n
		return err
	case "node":
		return node(s, explicitFree, args)
	case "qos":
		return qos(s, args)
	case "limit":
		return limit(s, args)
	case "shares":
		return shares(s, args)
	case "usage":
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			proj, user, ok := strings.Cut(k, "/")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return fmt.Errorf("usage: want PROJECT/USER=CPU_SECONDS, got %q", a)
			}
			if s.Usage == nil {
				s.Usage = sched.Usage{}
			}
			s.Usage[sched.Account{Project: proj, User: user}] = x
		}
	case "switch":
		if len(args) < 2 {
			return fmt.Errorf("switch: want a name and nodes= or switches=")
		}
		sw := sched.Switch{Name: args[0]}
		for _, a := range args[1:] {
			k, v, _ := strings.Cut(a, "=")
			switch k {
			case "nodes":
				sw.Nodes = strings.Split(v, "+")
			case "switches":
				sw.Switches = strings.Split(v, "+")
			default:
				return fmt.Errorf("switch: unknown field %q", k)
			}
		}
		*switches = append(*switches, sw)
	case "running":
		return running(s, args)
	case "pending":
		return pending(s, args)
	default:
		return fmt.Errorf("unknown statement %q", kw)
	}
	return nil
}

func node(s *sched.Snapshot, explicitFree map[string]bool, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("node: want a name")
	}
	n := sched.Node{Name: args[0], Online: true}
	freeCPUs, freeMem, freeGPUs := -1, sched.Bytes(-1), []int(nil)
	hasFreeGPUs := false
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch k {
		case "cpus":
			n.CPUs, err = strconv.Atoi(v)
		case "mem":
			n.Memory, err = bytes(v)
		case "gpus":
			n.GPUs, err = gpus(v)
		case "fleet":
			n.Fleet = v
		case "blocks":
			n.Blocks, err = strconv.Atoi(v)
		case "offline":
			n.Online = false
		case "free-cpus":
			freeCPUs, err = strconv.Atoi(v)
		case "free-mem":
			freeMem, err = bytes(v)
		case "free-gpus":
			freeGPUs, err = ints(v)
			hasFreeGPUs = true
		default:
			return fmt.Errorf("node %s: unknown field %q", n.Name, k)
		}
		if err != nil {
			return fmt.Errorf("node %s: %s: %w", n.Name, k, err)
		}
	}
	n.FreeCPUs, n.FreeMemory = n.CPUs, n.Memory
	for _, g := range n.GPUs {
		n.FreeGPUs = append(n.FreeGPUs, g.Index)
	}
	if freeCPUs >= 0 || freeMem >= 0 || hasFreeGPUs {
		explicitFree[n.Name] = true
		if freeCPUs >= 0 {
			n.FreeCPUs = freeCPUs
		}
		if freeMem >= 0 {
			n.FreeMemory = freeMem
		}
		if hasFreeGPUs {
			n.FreeGPUs = freeGPUs
		}
	}
	s.Nodes = append(s.Nodes, n)
	return nil
}

func qos(s *sched.Snapshot, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("qos: want a name")
	}
	q := sched.QOS{}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch k {
		case "priority":
			q.Priority, err = strconv.Atoi(v)
		case "preempt":
			q.Preempt = strings.Split(v, "+")
		case "mode":
			switch v {
			case "requeue":
				q.Mode = sched.Requeue
			case "cancel":
				q.Mode = sched.Cancel
			default:
				err = fmt.Errorf("want requeue or cancel")
			}
		default:
			return fmt.Errorf("qos %s: unknown field %q", args[0], k)
		}
		if err != nil {
			return fmt.Errorf("qos %s: %s: %w", args[0], k, err)
		}
	}
	if s.QOS == nil {
		s.QOS = map[string]sched.QOS{}
	}
	s.QOS[args[0]] = q
	return nil
}

var scopes = map[string]sched.Scope{"user": sched.ScopeUser, "project": sched.ScopeProject, "qos": sched.ScopeQOS, "qos-user": sched.ScopeQOSUser, "array": sched.ScopeArray}

func limit(s *sched.Snapshot, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("limit: want SCOPE:NAME")
	}
	sc, name, ok := strings.Cut(args[0], ":")
	scope, known := scopes[sc]
	if !ok || !known {
		return fmt.Errorf("limit: want user|project|qos|qos-user:NAME, got %q", args[0])
	}
	var l sched.Limits
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch {
		case k == "jobs":
			l.Jobs, err = strconv.Atoi(v)
		case k == "cpus":
			l.TRES.CPUs, err = strconv.Atoi(v)
		case k == "mem":
			l.TRES.Memory, err = bytes(v)
		case k == "gpus":
			l.TRES.GPUs, err = strconv.Atoi(v)
		case strings.HasPrefix(k, "gpu:"):
			if l.TRES.GPUTypes == nil {
				l.TRES.GPUTypes = map[string]int{}
			}
			l.TRES.GPUTypes[strings.ToLower(k[4:])], err = strconv.Atoi(v)
		case k == "wall":
			l.Wall, err = time.ParseDuration(v)
		default:
			return fmt.Errorf("limit %s: unknown field %q", args[0], k)
		}
		if err != nil {
			return fmt.Errorf("limit %s: %s: %w", args[0], k, err)
		}
	}
	if s.Limits == nil {
		s.Limits = map[sched.LimitKey]sched.Limits{}
	}
	s.Limits[sched.LimitKey{Scope: scope, Name: name}] = l
	return nil
}

func shares(s *sched.Snapshot, args []string) error {
	if s.Shares == nil {
		s.Shares = &sched.Shares{Projects: map[string]int{}, Users: map[string]map[string]int{}}
	}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("shares: %q: %w", a, err)
		}
		kind, name, _ := strings.Cut(k, ":")
		switch kind {
		case "project":
			s.Shares.Projects[name] = n
		case "user":
			proj, user, ok := strings.Cut(name, "/")
			if !ok {
				return fmt.Errorf("shares: want user:PROJECT/NAME, got %q", k)
			}
			if s.Shares.Users[proj] == nil {
				s.Shares.Users[proj] = map[string]int{}
			}
			s.Shares.Users[proj][user] = n
		default:
			return fmt.Errorf("shares: want project: or user:, got %q", k)
		}
	}
	return nil
}

func running(s *sched.Snapshot, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("running: want an ID")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return fmt.Errorf("running: ID: %w", err)
	}
	r := sched.Running{RunID: id}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "place":
			for k, one := range strings.Split(v, ",") {
				parts := strings.Split(one, ":")
				p := sched.Placement{JobID: id*100 + int64(k), Node: parts[0]}
				for _, kv := range parts[1:] {
					pk, pv, _ := strings.Cut(kv, "=")
					switch pk {
					case "cpus":
						p.CPUs, err = strconv.Atoi(pv)
					case "mem":
						p.Memory, err = bytes(pv)
					case "gpus":
						p.GPUs, err = ints(pv)
					default:
						err = fmt.Errorf("unknown %q", pk)
					}
					if err != nil {
						return fmt.Errorf("running %d: place: %w", id, err)
					}
				}
				r.Placements = append(r.Placements, p)
			}
		case "end":
			r.End, err = offset(v)
		case "start":
			r.Start, err = offset(v)
		case "user":
			r.User = v
		case "project":
			r.Project = v
		case "qos":
			r.QOS = v
		case "array":
			r.Array = v
		case "prio":
			r.Priority, err = strconv.ParseInt(v, 10, 64)
		case "ending":
			r.Ending = true
		default:
			return fmt.Errorf("running %d: unknown field %q", id, k)
		}
		if err != nil {
			return fmt.Errorf("running %d: %s: %w", id, k, err)
		}
	}
	s.Running = append(s.Running, r)
	return nil
}

func pending(s *sched.Snapshot, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("pending: want an ID")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return fmt.Errorf("pending: ID: %w", err)
	}
	p := sched.Pending{RunID: id, Nodes: 1, SubmittedAt: Now.Add(-time.Duration(1000-id) * time.Second), Request: &sched.Request{CPUs: 1}}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "cpus":
			p.Request.CPUs, err = strconv.Atoi(v)
		case "mem":
			p.Request.Memory, err = bytes(v)
		case "gpus":
			p.Request.GPU.Count, err = strconv.Atoi(v)
		case "gpu":
			p.Request.GPU.Names = strings.Split(v, "+")
		case "gpu-mem":
			p.Request.GPU.MinMemory, err = bytes(v)
		case "nodes":
			p.Nodes, err = strconv.Atoi(v)
		case "limit":
			p.Limit, err = time.ParseDuration(v)
		case "user":
			p.User = v
		case "project":
			p.Project = v
		case "qos":
			p.QOS = v
		case "array":
			p.Array = v
		case "prio":
			p.Priority, err = strconv.Atoi(v)
		case "nice":
			p.Nice, err = strconv.ParseInt(v, 10, 64)
		case "submit":
			p.SubmittedAt, err = offset(v)
		case "fleets":
			p.Request.Fleets = strings.Split(v, "+")
		case "tier":
			p.Tier, err = strconv.Atoi(v)
		case "exclusive":
			p.Request.Exclusive = true
		case "hold":
			p.Hold = v
		case "group":
			g := sched.Group{Nodes: 1, Request: sched.Request{CPUs: 1}}
			parts := strings.Split(v, ":")
			if g.Nodes, err = strconv.Atoi(parts[0]); err == nil {
				for _, kv := range parts[1:] {
					gk, gv, _ := strings.Cut(kv, "=")
					switch gk {
					case "cpus":
						g.Request.CPUs, err = strconv.Atoi(gv)
					case "mem":
						g.Request.Memory, err = bytes(gv)
					case "gpus":
						g.Request.GPU.Count, err = strconv.Atoi(gv)
					default:
						err = fmt.Errorf("unknown %q", gk)
					}
					if err != nil {
						break
					}
				}
			}
			p.Groups = append(p.Groups, g)
		default:
			return fmt.Errorf("pending %d: unknown field %q", id, k)
		}
		if err != nil {
			return fmt.Errorf("pending %d: %s: %w", id, k, err)
		}
	}
	if len(p.Groups) > 0 {
		p.Nodes, p.Request = 0, &p.Groups[0].Request
		for _, g := range p.Groups {
			p.Nodes += g.Nodes
		}
	}
	for k := range p.Nodes {
		p.JobIDs = append(p.JobIDs, id*100+int64(k))
	}
	s.Pending = append(s.Pending, p)
	return nil
}

func offset(v string) (time.Time, error) {
	d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
	return Now.Add(d), err
}

func bytes(v string) (sched.Bytes, error) {
	mult := sched.Bytes(1)
	if v != "" {
		switch strings.ToUpper(v[len(v)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		}
		if mult > 1 {
			v = v[:len(v)-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return sched.Bytes(n) * mult, err
}

// gpus reads MODEL:MEM*COUNT, several joined by +: A100:80G*4+T4:16G*2.
func gpus(v string) ([]sched.GPU, error) {
	var out []sched.GPU
	for _, part := range strings.Split(v, "+") {
		spec, count, ok := strings.Cut(part, "*")
		n := 1
		if ok {
			var err error
			if n, err = strconv.Atoi(count); err != nil {
				return nil, err
			}
		}
		model, mem, _ := strings.Cut(spec, ":")
		m, err := bytes(mem)
		if mem != "" && err != nil {
			return nil, err
		}
		for range n {
			out = append(out, sched.GPU{Index: len(out), Vendor: "nvidia", Name: model, Memory: m})
		}
	}
	return out, nil
}

func ints(v string) ([]int, error) {
	if v == "" {
		return []int{}, nil
	}
	var out []int
	for _, p := range strings.Split(v, "+") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
