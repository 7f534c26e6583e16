package slurmconv

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// What Slurm shows of a job but Berth's run model does not hold is the
// run's Slurm part (spec.Slurm, which sbatch writes; slurmPart reads it).
// Runs stored before it existed kept it in the run's tags under "slurm.",
// and srun still writes them: slurmFromTags reads those. Runs submitted
// with berth apply have neither, and show Berth's own values.
const (
	TagJobName       = "slurm.job_name" // the job name as Slurm knows it (run names are stricter)
	TagTool          = "slurm.tool"     // sbatch, srun or salloc
	TagUser          = "slurm.user"     // the submitting Unix user
	TagUID           = "slurm.uid"      //
	TagGID           = "slurm.gid"      //
	TagGroup         = "slurm.group"    //
	TagAccount       = "slurm.account"  // -A, recorded (Berth has one project)
	TagComment       = "slurm.comment"  //
	TagCommand       = "slurm.command"  // the script's path; empty for --wrap
	TagStdout        = "slurm.stdout"   // --output as given, absolute
	TagStderr        = "slurm.stderr"   //
	TagStdin         = "slurm.stdin"    //
	TagNTasks        = "slurm.ntasks"   // -n
	TagCPUsPerTask   = "slurm.cpus_per_task"
	TagNTasksPerNode = "slurm.ntasks_per_node"
	TagMemPerCPU     = "slurm.mem_per_cpu" // MB
	TagTresPerNode   = "slurm.tres_per_node"
	TagTresPerJob    = "slurm.tres_per_job"
	TagDependency    = "slurm.dependency" // --dependency as given
	TagSignal        = "slurm.signal"     // --signal, recorded
	TagRequeue       = "slurm.requeue"    // "1" or "0"
	TagSubmitHost    = "slurm.submit_host"
	TagConstraint    = "slurm.constraint"
	TagOpenMode      = "slurm.open_mode"
	TagPriority      = "slurm.priority" // --priority as given
)

// DefaultPartition is the partition of a run that names no fleet: Berth
// places such runs on any node, so the partition holds every node, and
// sinfo lists it first, as the default.
const DefaultPartition = "berth"

// MinJobAge is how long squeue and scontrol still show a finished job, as
// slurmctld keeps it in memory (MinJobAge, 300 s by default).
const MinJobAge = 300 * time.Second

// ClusterName is SLURM_CLUSTER_NAME and sacct's Cluster.
const ClusterName = "berth"

// DefaultAccount is the account of a job that names none: the server's one
// project.
const DefaultAccount = "main"

// View is the cluster as the Slurm commands see it: runs (with their
// jobs and configurations), nodes, and the time of the answer.
type View struct {
	Runs  []api.Run
	ByID  map[int64]*api.Run
	Nodes []api.Node
	Fleet map[string]string // node -> fleet
	Prio  map[int64]int64   // pending runs' multifactor priority
	Steps map[int64][]api.Step
	// Policy is the server's policy (the fleets' partition names, the
	// partitions set down); nil when the server did not say.
	Policy *api.PolicyInfo
	Now    time.Time
	// Earlier are the attempts of requeued runs before their current one,
	// oldest first, each as a run of its own (sacct -D).
	Earlier map[int64][]api.Run
	// Duplicates: sacct -D lists the earlier attempts.
	Duplicates bool
	// Active counts each array's tasks that have left the queue and not
	// finished (runningTasks), built once with the view: per task it
	// would cost a pass over every run.
	Active map[int64]int
}

// NewView is the view of runs and nodes at now. Runs that were requeued
// are replaced by their current attempt (their earlier ones kept aside).
func NewView(runs []api.Run, nodes []api.Node, now time.Time) *View {
	v := &View{Runs: runs, ByID: map[int64]*api.Run{}, Nodes: nodes, Fleet: map[string]string{}, Now: now}
	for i := range runs {
		if cur, earlier := SplitAttempts(&runs[i]); len(earlier) > 0 {
			if v.Earlier == nil {
				v.Earlier = map[int64][]api.Run{}
			}
			v.Earlier[runs[i].ID] = earlier
			runs[i] = cur
		}
		v.ByID[runs[i].ID] = &runs[i]
		if r := &runs[i]; r.ArrayID != 0 && !r.Status.Finished() && r.Status != api.StatusSubmitted {
			if v.Active == nil {
				v.Active = map[int64]int{}
			}
			v.Active[r.ArrayID]++
		}
	}
	for _, n := range nodes {
		v.Fleet[n.Name] = n.Fleet
	}
	return v
}

func orStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// JobName is the name squeue and sacct show: Slurm's, else the run's.
func JobName(r *api.Run) string {
	if n := Part(r).JobName; n != "" {
		return n
	}
	if r.ArrayID != 0 && r.ArrayIndex != nil {
		// A task of an array submitted with berth apply: NAME_INDEX is the
		// task's run name; Slurm shows the array's name.
		return strings.TrimSuffix(r.Name, "_"+strconv.Itoa(*r.ArrayIndex))
	}
	return r.Name
}

// JobUser is the submitting user squeue and sacct show: Slurm's, else the
// run's owner.
func JobUser(r *api.Run) string { return orStr(Part(r).User, r.User) }

// UniqueNodes are the run's nodes in order, once each.
func UniqueNodes(r *api.Run) []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, j := range r.Jobs {
		add(j.Node)
	}
	for _, n := range r.Nodes {
		add(n)
	}
	return out
}

// Partition is the partition a job shows: the fleet of the node it runs
// on, else the fleets it may use, else the default partition.
func (v *View) Partition(r *api.Run) string {
	if nodes := UniqueNodes(r); len(nodes) > 0 {
		f := v.Fleet[nodes[0]]
		if r.Spec == nil || len(r.Spec.Fleets) == 0 {
			return orStr(f, DefaultPartition)
		}
		// The partition it runs in: the first it named that the node's
		// fleet is, or is tagged with in the policy file.
		for _, p := range r.Spec.Fleets {
			if p == f || slices.Contains(v.fleetPartitions(f), p) {
				return p
			}
		}
		if f != "" {
			return f
		}
	}
	if r.Spec != nil && len(r.Spec.Fleets) > 0 {
		return strings.Join(r.Spec.Fleets, ",")
	}
	return DefaultPartition
}

// fleetPartitions are the partition names the policy file gives fleet f.
func (v *View) fleetPartitions(f string) []string {
	if v.Policy == nil || f == "" {
		return nil
	}
	for _, fi := range v.Policy.Fleets {
		if fi.Name == f {
			return fi.Partitions
		}
	}
	return nil
}

// TimeLimit is the run's --time.
func TimeLimit(t *spec.Task) time.Duration {
	if t == nil || t.MaxDuration == nil || *t.MaxDuration <= 0 {
		return slurm.Unlimited
	}
	return t.MaxDuration.Std()
}

// perNode is what one node of the run asks for (the first group's, for a
// heterogeneous run).
type perNode struct {
	cpus   int
	memMB  uint64
	gpus   int
	gpuTyp string
}

func requestOf(res spec.Resources) perNode {
	var p perNode
	if res.CPU != nil {
		p.cpus = res.CPU.Count.Min
	}
	if p.cpus == 0 {
		p.cpus = 1
	}
	if res.Memory != nil {
		p.memMB = uint64(res.Memory.Min / spec.MB)
	}
	if res.GPU != nil {
		p.gpus = res.GPU.Count.Min
		if len(res.GPU.Names) == 1 {
			p.gpuTyp = strings.ToLower(res.GPU.Names[0])
		}
	}
	return p
}

// Shape is the run's node count and its per-node request, summed over the
// groups of a heterogeneous run.
func Shape(t *spec.Task) (nodes int, cpus int, memMB uint64, gpus int) {
	if t == nil {
		return 1, 1, 0, 0
	}
	if len(t.Groups) > 0 {
		for _, g := range t.Groups {
			p := requestOf(g.Resources)
			n := max(g.Nodes, 1)
			nodes += n
			cpus += n * p.cpus
			memMB += uint64(n) * p.memMB
			gpus += n * p.gpus
		}
		return nodes, cpus, memMB, gpus
	}
	p := requestOf(t.Resources)
	n := max(t.Nodes, 1)
	return n, n * p.cpus, uint64(n) * p.memMB, n * p.gpus
}

// Alloc is what the run holds now (its jobs' allocations), or what it asks
// for when it holds nothing.
func Alloc(r *api.Run) (nodes, cpus int, memMB uint64, gpus int) {
	n, c, m, g := Shape(r.Spec)
	var an, ac, ag int
	var am uint64
	for _, j := range r.Jobs {
		if j.Node == "" {
			continue
		}
		an++
		ac += j.Alloc.CPUs
		am += uint64(j.Alloc.Memory) / slurm.MiB
		ag += len(j.Alloc.GPUs)
	}
	if an == 0 {
		return n, c, m, g
	}
	return an, ac, am, ag
}

// tresString is scontrol's TRES: "cpu=2,mem=4G,node=1,billing=2,gres/gpu=2".
func tresString(nodes, cpus int, memMB uint64, gpus int) string {
	s := fmt.Sprintf("cpu=%d", cpus)
	if memMB > 0 {
		s += ",mem=" + slurm.FormatMemoryMB(memMB)
	}
	s += fmt.Sprintf(",node=%d,billing=%d", nodes, cpus)
	if gpus > 0 {
		s += fmt.Sprintf(",gres/gpu=%d", gpus)
	}
	return s
}

// sacctTRES is the same in sacct's order: "billing=1,cpu=1,mem=1000M,node=1".
// slurm.SacctTRES takes mem= in megabytes, as Slurm's TRES records hold it.
func sacctTRES(nodes, cpus int, memMB uint64, gpus int) string {
	m := map[string]uint64{"cpu": uint64(cpus), "node": uint64(nodes), "billing": uint64(cpus)}
	if memMB > 0 {
		m["mem"] = memMB
	}
	if gpus > 0 {
		m["gres/gpu"] = uint64(gpus)
	}
	return slurm.SacctTRES(m)
}

// runBilling is the billing of a run's jobs under their fleets'
// billing_weights (the sum of each job's), once every job that ran has its
// usage recorded (at its end).
func runBilling(r *api.Run) (uint64, bool) {
	var b float64
	ran := false
	for _, j := range r.Jobs {
		if j.StartedAt == nil {
			continue
		}
		if j.Usage == nil {
			return 0, false
		}
		b += j.Usage.Billing
		ran = true
	}
	return uint64(math.Round(b)), ran
}

// billedTRES is sacctTRES with the billing the weights gave.
func billedTRES(nodes, cpus int, memMB uint64, gpus int, billing uint64) string {
	m := map[string]uint64{"cpu": uint64(cpus), "node": uint64(nodes), "billing": billing}
	if memMB > 0 {
		m["mem"] = memMB
	}
	if gpus > 0 {
		m["gres/gpu"] = uint64(gpus)
	}
	return slurm.SacctTRES(m)
}

// stepTRES is a step's AllocTRES: sacct's, without billing, which Slurm
// gives jobs only ("2.batch ... cpu=1,mem=1000M,node=1").
func stepTRES(nodes, cpus int, memMB uint64, gpus int) string {
	m := map[string]uint64{"cpu": uint64(cpus), "node": uint64(nodes)}
	if memMB > 0 {
		m["mem"] = memMB
	}
	if gpus > 0 {
		m["gres/gpu"] = uint64(gpus)
	}
	return slurm.SacctTRES(m)
}

func u32(n int64) uint32 {
	if n < 0 || n > math.MaxUint32 {
		return 0
	}
	return uint32(n)
}

// LocalTime is *t in local time (Slurm prints local times); zero for nil.
func LocalTime(t *time.Time) time.Time {
	if t == nil || t.IsZero() {
		return time.Time{}
	}
	return t.Local()
}

// dependencyOf is the job's --dependency with each condition's state, as
// scontrol shows it; nil without one.
func (v *View) dependencyOf(r *api.Run, st slurm.JobState) *slurm.Dependency {
	t := r.Spec
	if t == nil || (len(t.DependsOn) == 0 && !t.Singleton) {
		return nil
	}
	if !st.Pending() {
		return nil // Slurm drops a job's dependency once it is satisfied
	}
	d := &slurm.Dependency{Any: t.DependencyPolicy == "any"}
	never := r.Reason == slurm.ReasonDependencyNeverSatisfied
	for _, dep := range t.DependsOn {
		for i, ref := range dep.Runs {
			idStr, task, hasTask := strings.Cut(ref, "_")
			id, _ := strconv.ParseInt(idStr, 10, 64)
			if i < len(dep.IDs) && dep.IDs[i] != 0 {
				id = dep.IDs[i]
			}
			sd := slurm.Dep{Type: slurm.DepType(dep.Type), JobID: u32(id), TaskID: slurm.DepWholeJob, State: slurm.DepUnfulfilled}
			if hasTask {
				sd.TaskID, _ = strconv.Atoi(task)
			}
			if o, ok := v.ByID[id]; ok && o.Status.Finished() {
				ok := o.Status == api.StatusDone
				switch dep.Type {
				case "afterok", "aftercorr":
					sd.State = map[bool]slurm.DepState{true: slurm.DepFulfilled, false: slurm.DepFailed}[ok]
				case "afternotok":
					sd.State = map[bool]slurm.DepState{false: slurm.DepFulfilled, true: slurm.DepFailed}[ok]
				default:
					sd.State = slurm.DepFulfilled
				}
			} else if ok && o.StartedAt != nil && dep.Type == "after" {
				sd.State = slurm.DepFulfilled
			}
			if never && sd.State == slurm.DepUnfulfilled {
				sd.State = slurm.DepFailed
			}
			if sd.State == slurm.DepFulfilled {
				continue // Slurm lists only what is left
			}
			d.Deps = append(d.Deps, sd)
		}
	}
	if t.Singleton {
		d.Deps = append(d.Deps, slurm.Dep{Type: slurm.DepSingleton, TaskID: slurm.DepWholeJob, State: slurm.DepUnfulfilled})
	}
	if len(d.Deps) == 0 {
		return nil
	}
	return d
}

// arrayOf is the array run a task belongs to, nil when unknown.
func (v *View) arrayOf(r *api.Run) *api.Run {
	if r.ArrayID == 0 {
		return nil
	}
	return v.ByID[r.ArrayID]
}

// waitingTasks are the indices of an array's tasks not created yet.
func waitingTasks(a *api.ArrayInfo) []int {
	if a == nil || a.NWaiting == 0 || a.Waiting == "" {
		return nil
	}
	as, err := slurm.ParseArray(a.Waiting, math.MaxInt32)
	if err != nil {
		return nil
	}
	return as.Indices
}

// Job is one run as squeue and scontrol show it. An array's own run is
// the folded record of its tasks not created yet.
func (v *View) Job(r *api.Run) slurm.Job {
	t := r.Spec
	st, why := JobState(r.Status, lifecycle.Reason(r.Reason))
	held := r.Reason == slurm.ReasonJobHeldUser
	nodes, cpus, memMB, gpus := Alloc(r)
	hosts := UniqueNodes(r)
	j := slurm.Job{
		JobID: u32(r.ID), Name: JobName(r), User: JobUser(r), Group: orStr(Part(r).Group, JobUser(r)),
		UID: uint32(int(Part(r).UID)), GID: uint32(int(Part(r).GID)),
		Account: orStr(Part(r).Account, r.Project), Partition: v.Partition(r), QOS: "normal",
		Priority: uint32(max(r.Priority, 0)), Comment: Part(r).Comment,
		State: st, Reason: why, Dependency: v.dependencyOf(r, st),
		Submit: r.SubmittedAt.Local(), TimeLimit: TimeLimit(t),
		NumNodes: nodes, NumCPUs: cpus, NumTasks: max(int(Part(r).NTasks), nodes), CPUsPerTask: max(int(Part(r).CPUsPerTask), 1),
		NTasksPerNode: int(Part(r).NTasksPerNode),
		NodeList:      slurm.CompressHostlist(hosts), TRES: tresString(nodes, cpus, memMB, gpus),
		TresPerNode: Part(r).TresPerNode, TresPerJob: Part(r).TresPerJob, Features: Part(r).Constraint,
		Command: Part(r).Command, StdIn: orStr(Part(r).Input, "/dev/null"), StdOut: Part(r).Output, StdErr: Part(r).Error,
		BatchFlag: Part(r).Tool == "sbatch", Requeue: Part(r).Requeue == nil || *Part(r).Requeue, OverSubscribe: "OK",
		AllocNode: orStr(Part(r).SubmitHost, "localhost"),
	}
	// Priority: a waiting run's multifactor priority (berth sprio), else
	// its own; 0 only when held, as Slurm shows a held job.
	if p, ok := v.Prio[r.ID]; ok && st.Pending() {
		j.Priority = uint32(min(max(p, 1), math.MaxUint32-1))
	} else {
		j.Priority = uint32(max(r.Priority, 1))
	}
	if held {
		j.Priority = 0
	}
	if t != nil {
		j.QOS = orStr(t.QOS, "normal")
		j.Nice = int(t.Nice)
		j.WorkDir = t.WorkingDir
		if t.Exclusive {
			j.OverSubscribe = "NO"
		}
		if t.KillInvalidDepend {
			b := true
			j.KillOnInvalidDep = &b
		}
	}
	if nodes > 0 {
		j.MinCPUsNode = max(cpus/nodes, 1)
		if mpc := int(Part(r).MemPerCPUMB); mpc > 0 {
			j.MinMemoryMB, j.MemPerCPU = uint64(mpc), true
		} else {
			j.MinMemoryMB = memMB / uint64(nodes)
		}
	}
	if len(hosts) > 0 {
		j.BatchHost = hosts[0]
	}
	for _, jb := range r.Jobs {
		j.Restarts = max(j.Restarts, jb.Attempt)
	}
	j.ExitCode, j.ExitSignal = ExitCode(r, st)
	// Times: a waiting job shows its expected start; a running one the end
	// its time limit gives (a year on when unlimited, as slurmctld does).
	j.Eligible = j.Submit
	switch {
	case st.Pending():
		if r.EstimatedStart != nil {
			j.Start = r.EstimatedStart.Local()
			j.End = j.Start.Add(min(j.TimeLimit, 365*24*time.Hour))
		}
		if held || j.Dependency != nil {
			j.Eligible = time.Time{}
		}
	default:
		j.Start = LocalTime(r.StartedAt)
		j.Accrue = j.Submit
		if r.FinishedAt != nil {
			j.End = r.FinishedAt.Local()
		} else if !j.Start.IsZero() {
			j.End = j.Start.Add(min(j.TimeLimit, 365*24*time.Hour))
		}
		j.LastSchedEval = j.Start
	}
	switch {
	case r.Array != nil:
		// The array's own run: its tasks not created yet, folded.
		j.ArrayJobID = u32(r.ID)
		j.ArrayTasks = waitingTasks(r.Array)
		j.ArrayThrottle = r.Array.Throttle
		if j.ArrayTasks == nil {
			j.ArrayTasks = []int{}
		}
		// The folded record is pending, whatever its tasks do; while as
		// many tasks run as the throttle allows, it waits for that alone.
		if !st.Finished() {
			j.State, j.Start, j.End, j.NodeList, j.BatchHost = slurm.JobPending, time.Time{}, time.Time{}, "", ""
			switch {
			case held:
			case r.Array.Throttle > 0 && v.runningTasks(r.ID) >= r.Array.Throttle:
				j.Reason = slurm.ReasonJobArrayTaskLimit
			case j.Reason == slurm.ReasonNone || !st.Pending():
				j.Reason = slurm.ReasonPriority
			}
		}
	case r.ArrayID != 0 && r.ArrayIndex != nil:
		j.ArrayJobID = u32(r.ArrayID)
		j.ArrayTaskID = *r.ArrayIndex
		if a := v.arrayOf(r); a != nil && a.Array != nil {
			j.ArrayThrottle = a.Array.Throttle
		}
		if st.Pending() && j.ArrayThrottle > 0 && v.runningTasks(r.ArrayID) >= j.ArrayThrottle && !held {
			j.Reason = slurm.ReasonJobArrayTaskLimit
		}
	}
	return j
}

// runningTasks is how many of an array's tasks have left the queue and
// not finished: what its throttle (%N) counts.
func (v *View) runningTasks(array int64) int { return v.Active[array] }

// InMemory reports whether squeue and scontrol still show a run: active,
// or finished less than MinJobAge ago. An array's own run is shown while it
// has tasks to create.
func (v *View) InMemory(r *api.Run) bool {
	if r.Status == api.StatusScheduled {
		return false
	}
	if r.Array != nil {
		return r.Array.NWaiting > 0 && !r.Status.Finished()
	}
	if !r.Status.Finished() {
		return true
	}
	return r.FinishedAt != nil && v.Now.Sub(*r.FinishedAt) < MinJobAge
}

// Jobs are the records squeue and scontrol show.
func (v *View) Jobs() []slurm.Job {
	var out []slurm.Job
	for i := range v.Runs {
		if r := &v.Runs[i]; v.InMemory(r) {
			out = append(out, v.Job(r))
		}
	}
	return out
}

// Known reports whether a job id names a run at all (finished long ago
// or not): squeue and scontrol tell an unknown id from a purged one only
// by MinJobAge, sacct knows every one.
func (v *View) Known(sel slurm.JobSelector) bool {
	for i := range v.Runs {
		r := &v.Runs[i]
		if !v.InMemory(r) {
			continue
		}
		if sel.Task == slurm.NoArrayTask && (u32(r.ID) == sel.JobID || u32(r.ArrayID) == sel.JobID) {
			return true
		}
		if sel.Task != slurm.NoArrayTask && u32(r.ArrayID) == sel.JobID && r.ArrayIndex != nil && *r.ArrayIndex == sel.Task {
			return true
		}
		if sel.Task != slurm.NoArrayTask && r.Array != nil && u32(r.ID) == sel.JobID {
			for _, t := range waitingTasks(r.Array) {
				if t == sel.Task {
					return true
				}
			}
		}
	}
	return false
}

// SplitAttempts splits a requeued run (its jobs have several attempts) into
// its current attempt, the run the Slurm views show (its nodes, CPUs and
// start only; none while it waits again), and the earlier attempts, each a
// run that ran and ended then, oldest first. Slurm keeps one record per
// attempt too: the job's is the latest, sacct -D lists the others.
func SplitAttempts(r *api.Run) (cur api.Run, earlier []api.Run) {
	last := 0
	for _, j := range r.Jobs {
		last = max(last, j.Attempt)
	}
	waiting := r.Status == api.StatusSubmitted || r.Status == api.StatusScheduled
	byAttempt := map[int][]api.Job{}
	for _, j := range r.Jobs {
		byAttempt[j.Attempt] = append(byAttempt[j.Attempt], j)
	}
	lastEnded := waiting && !slices.ContainsFunc(byAttempt[last], func(j api.Job) bool { return !j.Status.Finished() })
	if last == 0 && !lastEnded {
		return *r, nil
	}
	cur = *r
	cur.Jobs, cur.Nodes, cur.StartedAt = nil, nil, nil
	for a := 0; a <= last; a++ {
		js := byAttempt[a]
		if a == last && !lastEnded {
			cur.Jobs = js
			for _, j := range js {
				if j.Node != "" {
					cur.Nodes = append(cur.Nodes, j.Node)
				}
				if j.StartedAt != nil && (cur.StartedAt == nil || j.StartedAt.Before(*cur.StartedAt)) {
					cur.StartedAt = j.StartedAt
				}
			}
			continue
		}
		if len(js) == 0 || !slices.ContainsFunc(js, func(j api.Job) bool { return j.StartedAt != nil }) {
			continue // never ran: nothing to account
		}
		e := *r
		e.Jobs, e.Nodes, e.StartedAt, e.FinishedAt = js, nil, nil, nil
		e.Status, e.Reason, e.ExitCode = api.StatusTerminated, "requeued", nil
		for _, j := range js {
			if j.Node != "" {
				e.Nodes = append(e.Nodes, j.Node)
			}
			if j.StartedAt != nil && (e.StartedAt == nil || j.StartedAt.Before(*e.StartedAt)) {
				e.StartedAt = j.StartedAt
			}
			if j.FinishedAt != nil && (e.FinishedAt == nil || j.FinishedAt.After(*e.FinishedAt)) {
				e.FinishedAt = j.FinishedAt
			}
		}
		if e.FinishedAt == nil {
			e.FinishedAt = e.StartedAt
		}
		earlier = append(earlier, e)
	}
	if !r.Status.Finished() {
		cur.FinishedAt = nil
	}
	return cur, earlier
}

// Acct is every run as sacct lists it: jobs (array tasks as ID_INDEX) in
// submission order, each followed by its steps (a batch script's "batch"
// step, an srun's step 0), for runs that started.
func (v *View) Acct() []slurm.AcctRecord {
	runs := make([]*api.Run, 0, len(v.Runs))
	for i := range v.Runs {
		r := &v.Runs[i]
		if r.Status == api.StatusScheduled {
			continue // a schedule is listed by its runs
		}
		if r.Array != nil && (r.Array.NWaiting == 0 || r.Status.Finished()) {
			continue // an array is listed by its tasks, and its waiting ones
		}
		runs = append(runs, r)
	}
	// sacct lists an array's tasks together, by index, where the array
	// was submitted; the record of its waiting tasks last (sacct sorts by
	// array_task_id, NO_VAL on that record).
	key := func(r *api.Run) (int64, int) {
		switch {
		case r.Array != nil:
			return r.ID, math.MaxInt
		case r.ArrayID != 0 && r.ArrayIndex != nil:
			return r.ArrayID, *r.ArrayIndex
		}
		return r.ID, -1
	}
	sort.SliceStable(runs, func(a, b int) bool {
		ia, ta := key(runs[a])
		ib, tb := key(runs[b])
		if ia != ib {
			return ia < ib
		}
		return ta < tb
	})
	var out []slurm.AcctRecord
	for _, r := range runs {
		if r.Array != nil {
			out = append(out, v.waitingTasksRecord(r))
			continue
		}
		if v.Duplicates {
			for i := range v.Earlier[r.ID] {
				out = v.acctRun(out, &v.Earlier[r.ID][i], true)
			}
		}
		out = v.acctRun(out, r, false)
	}
	return out
}

// waitingTasksRecord is the line sacct shows for an array's tasks not
// created yet: slurmdbd keeps the array's job record PENDING, with the
// waiting tasks as its array_task_str (63_[2-3%1]), until its last task
// starts.
func (v *View) waitingTasksRecord(r *api.Run) slurm.AcctRecord {
	j := v.Job(r)
	rec := v.acctRecord(r)
	rec.ArrayJobID, rec.ArrayTaskID = u32(r.ID), slurm.NoArrayTask
	rec.ArrayTasks = slurm.FormatArrayTasks(j.ArrayTasks, j.ArrayThrottle)
	rec.State, rec.Reason, rec.ExitCode, rec.ExitSignal, rec.CancelledBy = slurm.JobPending, j.Reason, 0, 0, nil
	rec.Start, rec.End, rec.Elapsed, rec.CPUTime, rec.AllocTRES, rec.NodeList = time.Time{}, time.Time{}, 0, 0, "", "None assigned"
	return rec
}

// acctRun appends the run's record and its steps'. An earlier attempt of a
// requeued run is REQUEUED (as_mysql_job.c records JOB_REQUEUE), its batch
// step ended by the signal that stopped it, and without the srun steps
// (those are the current attempt's).
func (v *View) acctRun(out []slurm.AcctRecord, r *api.Run, requeued bool) []slurm.AcctRecord {
	rec := v.acctRecord(r)
	if requeued {
		rec.State, rec.ExitCode, rec.ExitSignal, rec.CancelledBy = slurm.JobRequeueFlag, 0, 0, nil
	}
	out = append(out, rec)
	if r.StartedAt == nil {
		return out
	}
	step := rec
	step.Partition, step.Reason = "", ""
	step.TimeLimit = 0
	recorded := v.Steps[r.ID]
	switch Part(r).Tool {
	case "sbatch", "":
		step.Step, step.JobName = "batch", "batch"
		nodes := UniqueNodes(r)
		if len(nodes) > 0 {
			step.NodeList = nodes[0]
		}
		step.NNodes, step.NTasks = 1, 1
		step.MaxRSS = maxRSS(r, 0)
		_, c, m, g := Alloc(r)
		n := max(rec.NNodes, 1)
		step.AllocTRES = stepTRES(1, c/n, m/uint64(n), g/n)
	case "srun":
		if len(recorded) > 0 {
			step.Step = "" // srun --pty: its step is recorded
			break
		}
		step.Step = "0"
		step.NTasks = max(int(Part(r).NTasks), rec.NNodes)
		step.MaxRSS = maxRSS(r, -1)
	default:
		step.Step = ""
	}
	if requeued {
		recorded = nil
	}
	if step.Step != "" {
		// The batch step of a job that timed out or was cancelled ends
		// by the signal; the job itself keeps 0:0 (TIMEOUT) in sacct.
		switch {
		case requeued, rec.State.Base() == slurm.JobTimeout, rec.State.Base() == slurm.JobCancelled, rec.State.Base() == slurm.JobPreempted:
			step.State, step.CancelledBy = slurm.JobCancelled, nil
			step.ExitCode, step.ExitSignal = 0, 15
			if r.Status == api.StatusAborted {
				step.ExitSignal = 9
			}
		}
		out = append(out, step)
	}
	for _, p := range recorded {
		if r.StartedAt != nil && p.StartedAt.Before(*r.StartedAt) {
			continue // a step of an earlier attempt
		}
		out = append(out, v.stepRecord(r, rec, p))
	}
	return out
}

// maxRSS is the most memory the last attempt of node rank num held (num
// -1: any node's), 0 when unknown.
func maxRSS(r *api.Run, num int) int64 {
	last := 0
	for _, j := range r.Jobs {
		last = max(last, j.Attempt)
	}
	var m int64
	for _, j := range r.Jobs {
		if j.Attempt == last && (num < 0 || j.Num == num) {
			m = max(m, j.MaxRSS)
		}
	}
	return m
}

// stepRecord is a recorded step (srun in an allocation) as sacct shows
// it: JOBID.STEPID, named after its command, on its own nodes.
func (v *View) stepRecord(r *api.Run, job slurm.AcctRecord, p api.Step) slurm.AcctRecord {
	rec := job
	rec.Step, rec.JobName, rec.Partition, rec.Reason, rec.TimeLimit = strconv.Itoa(p.ID), p.Name, "", "", 0
	rec.NNodes, rec.NTasks, rec.NodeList = p.Nodes, p.NTasks, p.NodeList
	rec.Start, rec.End = p.StartedAt.Local(), time.Time{}
	end := v.Now
	if !p.FinishedAt.IsZero() {
		rec.End, end = p.FinishedAt.Local(), p.FinishedAt
	}
	rec.Elapsed = max(end.Sub(p.StartedAt).Truncate(time.Second), 0)
	nodes, cpus, memMB, gpus := Alloc(r)
	n := max(nodes, 1)
	rec.AllocTRES = stepTRES(p.Nodes, cpus/n*p.Nodes, memMB/uint64(n)*uint64(p.Nodes), gpus/n*p.Nodes)
	rec.CPUTime = rec.Elapsed * time.Duration(cpus/n*p.Nodes)
	rec.CancelledBy, rec.ExitCode, rec.ExitSignal = nil, 0, 0
	if p.ExitCode != nil {
		rec.ExitCode = *p.ExitCode
		if rec.ExitCode > 128 && rec.ExitCode < 160 {
			rec.ExitCode, rec.ExitSignal = 0, rec.ExitCode-128
		}
	}
	switch p.Status {
	case "running":
		rec.State = slurm.JobRunning
	case "done":
		rec.State = slurm.JobCompleted
	case "failed":
		rec.State = slurm.JobFailed
		if rec.ExitSignal != 0 {
			rec.State = slurm.JobCancelled
		}
	default:
		rec.State, rec.ExitSignal = slurm.JobCancelled, 9
	}
	return rec
}

func (v *View) acctRecord(r *api.Run) slurm.AcctRecord {
	// slurmdbd records the base state only (as_mysql_job.c: job_state &
	// JOB_STATE_BASE): a job being set up or stopped is RUNNING in sacct,
	// never CONFIGURING or COMPLETING.
	st := State(r).Base()
	nodes, cpus, memMB, gpus := Alloc(r)
	rec := slurm.AcctRecord{
		JobID: u32(r.ID), JobName: JobName(r), Partition: v.Partition(r),
		Account: orStr(Part(r).Account, r.Project), User: JobUser(r), Group: orStr(Part(r).Group, JobUser(r)),
		UID: uint32(int(Part(r).UID)), GID: uint32(int(Part(r).GID)), Cluster: ClusterName, QOS: "normal",
		Priority: uint32(max(r.Priority, 0)), State: st, Reason: slurm.ReasonNone,
		Submit: r.SubmittedAt.Local(), Eligible: r.SubmittedAt.Local(), Start: LocalTime(r.StartedAt), End: LocalTime(r.FinishedAt),
		TimeLimit: TimeLimit(r.Spec), NNodes: nodes, ReqTRES: sacctTRES(nodes, cpus, memMB, gpus),
	}
	if r.Spec != nil {
		rec.QOS = orStr(r.Spec.QOS, "normal")
		rec.WorkDir = r.Spec.WorkingDir
	}
	if r.ArrayID != 0 && r.ArrayIndex != nil {
		rec.ArrayJobID, rec.ArrayTaskID = u32(r.ArrayID), *r.ArrayIndex
	}
	rec.ExitCode, rec.ExitSignal = ExitCode(r, st)
	if st.Base() == slurm.JobTimeout {
		rec.ExitCode, rec.ExitSignal = 0, 0
	}
	if st.Base() == slurm.JobCancelled && r.Status != api.StatusAborted {
		uid := uint32(int(Part(r).UID))
		rec.CancelledBy = &uid
	}
	if st.Pending() {
		rec.Reason = orStr(r.Reason, slurm.ReasonNone)
		rec.Start, rec.End = time.Time{}, time.Time{}
	}
	if r.StartedAt != nil {
		rec.AllocTRES = rec.ReqTRES
		if b, ok := runBilling(r); ok {
			rec.AllocTRES = billedTRES(nodes, cpus, memMB, gpus, b)
		}
		rec.NodeList = slurm.CompressHostlist(UniqueNodes(r))
		end := v.Now
		if r.FinishedAt != nil {
			end = *r.FinishedAt
		}
		rec.Elapsed = end.Sub(*r.StartedAt).Truncate(time.Second)
		rec.CPUTime = rec.Elapsed * time.Duration(cpus)
	} else {
		rec.NodeList = "None assigned"
		if r.Status.Finished() {
			rec.Start = rec.End // never ran: Slurm's Start is its End
			if st.Base() == slurm.JobCancelled {
				rec.Start = slurm.TimeNone
			}
		}
	}
	if !r.Status.Finished() {
		rec.End = time.Time{}
	}
	return rec
}

// nodeState sets the node's Slurm state and reason from what the server
// says of it: DOWN* (not responding) while its agent is away, DOWN when an
// administrator set it down, the DRAIN flag for an administrator's drain
// or a failed health check (DRAINED when idle, DRAINING with jobs), and
// ALLOCATED with jobs (MIXED is derived from the CPUs in use). The
// administrator's reason comes first, with who gave it and when.
func nodeState(sn *slurm.Node, n *api.Node) {
	away := n.Status == "offline" || n.Status == "unreachable"
	busy := n.Jobs > 0 || strings.HasPrefix(n.Status, "busy") || strings.HasPrefix(n.Status, "draining")
	healthFail := n.Health != nil && n.Health.Status == api.HealthFailure
	switch {
	case away:
		sn.State = slurm.NodeDown | slurm.NodeNoRespond
	case busy:
		sn.State = slurm.NodeAllocated
		if n.AllocCPUs == 0 {
			sn.CPUsAlloc = n.CPUs
		}
	default:
		sn.State = slurm.NodeIdle
	}
	switch d := n.Drain; {
	case d != nil:
		if d.Down {
			sn.State = sn.State&^0xf | slurm.NodeDown
		} else {
			sn.State |= slurm.NodeDrain
		}
		sn.Reason, sn.ReasonUser, sn.ReasonTime = orStr(d.Reason, "none"), orStr(d.By, "root"), d.Since.Local()
	case healthFail:
		sn.State |= slurm.NodeDrain
		sn.Reason, sn.ReasonUser, sn.ReasonTime = orStr(n.Health.Reason, "health check failed"), "berth", n.Health.CheckedAt.Local()
	case away:
		sn.Reason, sn.ReasonUser, sn.ReasonTime = "Not responding", "berth", n.LastSeen.Local()
	}
}

// Nodes are the nodes and partitions of the cluster as sinfo and
// scontrol show them: the default partition holds every node (a run that
// names no fleet may use any), each fleet is a partition of its own, and
// so is each partition name the policy file gives fleets (holding their
// nodes); a partition set down is DOWN.
func Nodes(nodes []api.Node, now time.Time, pol *api.PolicyInfo) ([]slurm.Partition, []slurm.Node) {
	var out []slurm.Node
	fleets := map[string][]string{}
	tagged := map[string][]string{} // fleet -> the policy's partition names
	if pol != nil {
		for _, f := range pol.Fleets {
			if f.Name != DefaultPartition {
				fleets[f.Name] = fleets[f.Name][:0:0]
			}
			for _, p := range f.Partitions {
				if p != DefaultPartition {
					fleets[p] = fleets[p][:0:0]
					tagged[f.Name] = append(tagged[f.Name], p)
				}
			}
		}
	}
	var all []string
	for _, n := range nodes {
		sn := slurm.Node{
			Name: n.Name, Arch: "x86_64", Sockets: 1, CoresPerSocket: max(n.CPUs, 1), ThreadsPerCore: 1, Boards: 1,
			CPUs: n.CPUs, CPUsAlloc: n.AllocCPUs, Addr: n.Addr, Hostname: n.Name, Version: n.Version, OS: "Linux",
			RealMemoryMB: uint64(n.Memory) / slurm.MiB, AllocMemMB: uint64(n.AllocMemory) / slurm.MiB,
			Weight: 1, Partitions: []string{DefaultPartition}, LastBusy: n.LastSeen.Local(),
			// A node's features are all active: Berth has no node
			// features plugin to change them.
			Features: strings.Join(n.Features, ","), ActiveFeatures: strings.Join(n.Features, ","),
		}
		if len(n.GPUs) > 0 {
			sn.Gres = fmt.Sprintf("gpu:%d", len(n.GPUs))
			sn.GresUsed = fmt.Sprintf("gpu:%d", n.AllocGPUs)
		}
		nodeState(&sn, &n)
		if n.RunAs != "" {
			sn.Comment = "jobs run as: " + n.RunAs // no Slurm field says it
		}
		memMB := uint64(n.Memory) / slurm.MiB
		sn.CfgTRES = fmt.Sprintf("cpu=%d,mem=%s,billing=%d", n.CPUs, slurm.FormatMemoryMB(memMB), n.CPUs)
		if len(n.GPUs) > 0 {
			sn.CfgTRES += fmt.Sprintf(",gres/gpu=%d", len(n.GPUs))
		}
		if n.AllocCPUs > 0 {
			sn.AllocTRES = fmt.Sprintf("cpu=%d", n.AllocCPUs)
			if n.AllocMemory > 0 {
				sn.AllocTRES += ",mem=" + slurm.FormatMemoryMB(uint64(n.AllocMemory)/slurm.MiB)
			}
			if n.AllocGPUs > 0 {
				sn.AllocTRES += fmt.Sprintf(",gres/gpu=%d", n.AllocGPUs)
			}
		}
		if n.Fleet != "" && n.Fleet != DefaultPartition {
			sn.Partitions = append(sn.Partitions, n.Fleet)
			fleets[n.Fleet] = append(fleets[n.Fleet], n.Name)
		}
		for _, p := range tagged[n.Fleet] {
			if p != n.Fleet {
				sn.Partitions = append(sn.Partitions, p)
				fleets[p] = append(fleets[p], n.Name)
			}
		}
		all = append(all, n.Name)
		out = append(out, sn)
	}
	part := func(name string, members []string, def bool) slurm.Partition {
		p := slurm.Partition{Name: name, Default: def, State: slurm.PartitionUp, Nodes: slurm.CompressHostlist(members),
			MaxTime: slurm.Unlimited, TotalNodes: len(members), OverSubscribe: "NO", PreemptMode: "OFF"}
		var mem uint64
		gpus := 0
		for _, n := range nodes {
			for _, m := range members {
				if m == n.Name {
					p.TotalCPUs += n.CPUs
					mem += uint64(n.Memory) / slurm.MiB
					gpus += len(n.GPUs)
				}
			}
		}
		if pol != nil && slices.Contains(pol.DownPartitions, name) {
			p.State = slurm.PartitionDown
		}
		p.TRES = fmt.Sprintf("cpu=%d,mem=%s,node=%d,billing=%d", p.TotalCPUs, slurm.FormatMemoryMB(mem), len(members), p.TotalCPUs)
		if gpus > 0 {
			p.TRES += fmt.Sprintf(",gres/gpu=%d", gpus)
		}
		return p
	}
	parts := []slurm.Partition{part(DefaultPartition, all, true)}
	names := make([]string, 0, len(fleets))
	for f := range fleets {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		parts = append(parts, part(f, fleets[f], false))
	}
	_ = now
	return parts, out
}
