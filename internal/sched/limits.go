package sched

import (
	"strings"
	"time"
)

// Scope is what a limit applies to, as Slurm's associations and QOS do.
type Scope int

const (
	// ScopeUser: one user, all projects (Slurm: the user's association).
	ScopeUser Scope = iota
	// ScopeProject: all users of one project together (an account's Grp*).
	ScopeProject
	// ScopeQOS: all runs of one QOS together (the QOS's Grp*).
	ScopeQOS
	// ScopeQOSUser: each user's runs of one QOS (the QOS's Max*PerUser).
	ScopeQOSUser
	// ScopeArray: the tasks of one array (its throttle, Slurm's %N).
	ScopeArray
	// ScopeProjectUser: one user's runs in one project (Slurm: the user's
	// association with the account). Its name is ProjectUserKey's; a
	// project's name alone holds the limits each of its users gets
	// unless their own association sets some (the account's Max*).
	ScopeProjectUser
)

// ProjectUserKey names user's limits within project.
func ProjectUserKey(project, user string) LimitKey {
	return LimitKey{Scope: ScopeProjectUser, Name: project + "\x00" + user}
}

// LimitKey names one limit: its scope and the user, project or QOS.
type LimitKey struct {
	Scope Scope
	Name  string
}

// TRES is an amount of trackable resources, Slurm's word: what a run holds
// over all its nodes.
type TRES struct {
	CPUs   int
	Memory Bytes
	GPUs   int
	// GPUTypes counts GPUs by model name, lower case ("a100").
	GPUTypes map[string]int
}

// Limits bound what runs under one key may hold at once. Zero fields are no
// limit. The number of runs a key may have submitted (Slurm's MaxSubmitJobs)
// is the server's business: it refuses the submission.
type Limits struct {
	// Jobs is how many runs may run at once.
	Jobs int
	// TRES is how much they may hold together.
	TRES TRES
	// Wall is the longest time limit a run may ask for; a run without a
	// time limit asks for for ever and is held too.
	Wall time.Duration
}

// QOS is a quality of service: a priority factor, limits (in
// Snapshot.Limits under ScopeQOS and ScopeQOSUser) and whom it may preempt.
type QOS struct {
	Priority int
	// Preempt are the QOS whose running runs this one may preempt.
	Preempt []string
	// Mode is what happens to a preempted run.
	Mode PreemptMode
}

// PreemptMode is what happens to a run preempted by a higher QOS.
type PreemptMode int

const (
	// Requeue stops the run (its signal, then its grace period) and puts it
	// back in the queue, where it keeps its submit time.
	Requeue PreemptMode = iota
	// Cancel stops the run for good: it ends preempted.
	Cancel
)

func (m PreemptMode) String() string {
	if m == Cancel {
		return "cancel"
	}
	return "requeue"
}

// Reasons a run waits behind a limit, as Slurm names them.
const (
	ReasonAssocMaxJobs   = "AssocMaxJobsLimit"
	ReasonAssocGrpJobs   = "AssocGrpJobsLimit"
	ReasonAssocGrpCPU    = "AssocGrpCpuLimit"
	ReasonAssocGrpMem    = "AssocGrpMemLimit"
	ReasonAssocGrpGRES   = "AssocGrpGRES"
	ReasonAssocMaxWall   = "AssocMaxWallDurationPerJobLimit"
	ReasonAssocMaxCPU    = "AssocMaxCpuPerJobLimit"
	ReasonAssocMaxMem    = "AssocMaxMemPerJobLimit"
	ReasonAssocMaxGRES   = "AssocMaxGRESPerJob"
	ReasonQOSGrpJobs     = "QOSGrpJobsLimit"
	ReasonQOSGrpCPU      = "QOSGrpCpuLimit"
	ReasonQOSGrpMem      = "QOSGrpMemLimit"
	ReasonQOSGrpGRES     = "QOSGrpGRES"
	ReasonQOSMaxJobsUser = "QOSMaxJobsPerUserLimit"
	ReasonQOSMaxCPUUser  = "QOSMaxCpuPerUserLimit"
	ReasonQOSMaxMemUser  = "QOSMaxMemoryPerUser"
	ReasonQOSMaxGRESUser = "QOSMaxGRESPerUser"
	ReasonQOSMaxWall     = "QOSMaxWallDurationPerJobLimit"
	ReasonArrayTaskLimit = "JobArrayTaskLimit"
)

// reasonFor names what limit a scope hit: what is one of "jobs", "cpu",
// "mem", "gres", "wall".
func reasonFor(s Scope, what string) string {
	table := map[Scope]map[string]string{
		ScopeUser:    {"jobs": ReasonAssocMaxJobs, "cpu": ReasonAssocGrpCPU, "mem": ReasonAssocGrpMem, "gres": ReasonAssocGrpGRES, "wall": ReasonAssocMaxWall},
		ScopeProject: {"jobs": ReasonAssocGrpJobs, "cpu": ReasonAssocGrpCPU, "mem": ReasonAssocGrpMem, "gres": ReasonAssocGrpGRES, "wall": ReasonAssocMaxWall},
		ScopeQOS:     {"jobs": ReasonQOSGrpJobs, "cpu": ReasonQOSGrpCPU, "mem": ReasonQOSGrpMem, "gres": ReasonQOSGrpGRES, "wall": ReasonQOSMaxWall},
		ScopeQOSUser: {"jobs": ReasonQOSMaxJobsUser, "cpu": ReasonQOSMaxCPUUser, "mem": ReasonQOSMaxMemUser, "gres": ReasonQOSMaxGRESUser, "wall": ReasonQOSMaxWall},
		// A user's association within an account: its MaxJobs, and its
		// GrpTRES (what the user's runs in the project hold together).
		ScopeProjectUser: {"jobs": ReasonAssocMaxJobs, "cpu": ReasonAssocGrpCPU, "mem": ReasonAssocGrpMem, "gres": ReasonAssocGrpGRES, "wall": ReasonAssocMaxWall},
		ScopeArray:       {"jobs": ReasonArrayTaskLimit, "cpu": ReasonArrayTaskLimit, "mem": ReasonArrayTaskLimit, "gres": ReasonArrayTaskLimit, "wall": ReasonArrayTaskLimit},
	}
	return table[s][what]
}

// held is what runs under one key hold now (and what the pass starts).
type held struct {
	jobs int
	TRES
}

func (h *held) add(t TRES, sign int) {
	h.jobs += sign
	h.CPUs += sign * t.CPUs
	h.Memory += Bytes(sign) * t.Memory
	h.GPUs += sign * t.GPUs
	for k, v := range t.GPUTypes {
		if h.GPUTypes == nil {
			h.GPUTypes = map[string]int{}
		}
		h.GPUTypes[k] += sign * v
	}
}

// accounts tracks, for every key that has a limit, what is held under it.
type accounts struct {
	limits map[LimitKey]Limits
	held   map[LimitKey]*held
}

func newAccounts(s *Snapshot, nodes map[string]*Node) *accounts {
	if len(s.Limits) == 0 {
		return nil
	}
	a := &accounts{limits: s.Limits, held: map[LimitKey]*held{}}
	for i := range s.Running {
		r := &s.Running[i]
		a.charge(keysOf(r.User, r.Project, r.QOS, r.Array), runningTRES(r, nodes), 1)
	}
	return a
}

// keysOf lists the limit keys a run of this user, project, QOS and array
// counts under.
func keysOf(user, project, qos, array string) [6]LimitKey {
	return [6]LimitKey{{ScopeUser, user}, {ScopeProject, project}, {ScopeQOS, qos}, {ScopeQOSUser, qos + "\x00" + user}, {ScopeArray, array},
		ProjectUserKey(project, user)}
}

// limitOf is the limit of a key; per-user QOS limits are configured once per QOS.
func (a *accounts) limitOf(k LimitKey) (Limits, bool) { return LimitOf(a.limits, k) }

// LimitOf is the limit of key k in m: a QOS's per-user limits are set once
// per QOS, a user's in a project by their association or, without one, by
// the project's user_limits.
func LimitOf[V any](m map[LimitKey]V, k LimitKey) (V, bool) {
	switch k.Scope {
	case ScopeQOSUser:
		qos, _, _ := strings.Cut(k.Name, "\x00")
		k.Name = qos
	case ScopeProjectUser:
		if l, ok := m[k]; ok {
			return l, true
		}
		project, _, _ := strings.Cut(k.Name, "\x00")
		k.Name = project
	}
	l, ok := m[k]
	return l, ok
}

func (a *accounts) charge(keys [6]LimitKey, t TRES, sign int) {
	for _, k := range keys {
		if _, ok := a.limitOf(k); !ok {
			continue
		}
		h := a.held[k]
		if h == nil {
			h = &held{}
			a.held[k] = h
		}
		h.add(t, sign)
	}
}

// blocked returns the reason pd may not start now because of a limit, or "".
func (a *accounts) blocked(pd *Pending) string {
	if a == nil {
		return ""
	}
	want := pendingTRES(pd)
	for _, k := range keysOf(pd.User, pd.Project, pd.QOS, pd.Array) {
		l, ok := a.limitOf(k)
		if !ok {
			continue
		}
		if l.Wall > 0 && (pd.Limit == 0 || pd.Limit > l.Wall) {
			return reasonFor(k.Scope, "wall")
		}
		h := a.held[k]
		if h == nil {
			h = &held{}
		}
		switch {
		case l.Jobs > 0 && h.jobs+1 > l.Jobs:
			return reasonFor(k.Scope, "jobs")
		case l.TRES.CPUs > 0 && h.CPUs+want.CPUs > l.TRES.CPUs:
			return reasonFor(k.Scope, "cpu")
		case l.TRES.Memory > 0 && h.Memory+want.Memory > l.TRES.Memory:
			return reasonFor(k.Scope, "mem")
		case l.TRES.GPUs > 0 && h.GPUs+want.GPUs > l.TRES.GPUs:
			return reasonFor(k.Scope, "gres")
		}
		for typ, max := range l.TRES.GPUTypes {
			if n := want.GPUTypes[typ]; n > 0 && h.GPUTypes[typ]+n > max {
				return reasonFor(k.Scope, "gres")
			}
		}
	}
	return ""
}

// pendingTRES is what a pending run asks for over all its nodes. GPUs count
// under a model only when the run names exactly that one model.
func pendingTRES(pd *Pending) TRES {
	if len(pd.Groups) > 0 {
		var t TRES
		for _, g := range pd.Groups {
			one := pendingTRES(&Pending{Nodes: g.Nodes, Request: &g.Request})
			t.CPUs, t.Memory, t.GPUs = t.CPUs+one.CPUs, t.Memory+one.Memory, t.GPUs+one.GPUs
			for k, v := range one.GPUTypes {
				if t.GPUTypes == nil {
					t.GPUTypes = map[string]int{}
				}
				t.GPUTypes[k] += v
			}
		}
		return t
	}
	n := max(pd.Nodes, 1)
	t := TRES{CPUs: n * pd.Request.CPUs, Memory: Bytes(n) * pd.Request.Memory, GPUs: n * pd.Request.GPU.Count}
	if g := pd.Request.GPU; g.Count > 0 && len(g.Names) == 1 {
		t.GPUTypes = map[string]int{strings.ToLower(g.Names[0]): t.GPUs}
	}
	return t
}

// runningTRES is what a running run holds; its GPUs count under every model
// word of the devices it holds ("NVIDIA A100-SXM4-80GB" counts as a100 too),
// so that a limit on "a100" sees them.
func runningTRES(r *Running, nodes map[string]*Node) TRES {
	var t TRES
	for _, pl := range r.Placements {
		t.CPUs += pl.CPUs
		t.Memory += pl.Memory
		t.GPUs += len(pl.GPUs)
		n := nodes[pl.Node]
		if n == nil {
			continue
		}
		for _, idx := range pl.GPUs {
			g, ok := gpuByIndex(n.GPUs, idx)
			if !ok {
				continue
			}
			if t.GPUTypes == nil {
				t.GPUTypes = map[string]int{}
			}
			for _, w := range modelWords(g.Name) {
				t.GPUTypes[w]++
			}
		}
	}
	return t
}

// startTRES is what a start takes, counted like runningTRES.
func startTRES(st Start, nodes map[string]*Node) TRES {
	return runningTRES(&Running{Placements: st.Placements}, nodes)
}

// modelWords are the lower-case words of a device name, each once.
func modelWords(name string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == ' ' || r == '-' || r == '_' }) {
		dup := false
		for _, o := range out {
			dup = dup || o == w
		}
		if !dup {
			out = append(out, w)
		}
	}
	return out
}
