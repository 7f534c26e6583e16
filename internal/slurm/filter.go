package slurm

import (
	"strconv"
	"strings"
)

// JobSelector is one id of squeue -j, scancel and scontrol: a job ("10"),
// or one task of an array ("10_3").
type JobSelector struct {
	JobID uint32
	Task  int // NoArrayTask for the whole job or array
}

// String prints the selector as Slurm writes it: "10" or "10_3".
func (s JobSelector) String() string {
	if s.Task == NoArrayTask {
		return u32(s.JobID)
	}
	return u32(s.JobID) + "_" + itoa(s.Task)
}

// ParseJobSelectors parses a comma-separated list of job ids, each
// optionally with an array task ("10,10_3,12"). A bad item is reported by
// the CLI as Slurm does ("Invalid job id: 1x").
func ParseJobSelectors(s string) ([]JobSelector, error) {
	var out []JobSelector
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue
		}
		sel := JobSelector{Task: NoArrayTask}
		id, task, hasTask := strings.Cut(item, "_")
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil || n == 0 {
			return nil, &CommandError{Stderr: []string{"squeue: error: Invalid job id: " + item}, ExitCode: 1}
		}
		sel.JobID = uint32(n)
		if hasTask {
			t, err := strconv.ParseUint(task, 10, 31)
			if err != nil {
				return nil, &CommandError{Stderr: []string{"squeue: error: Invalid job id: " + item}, ExitCode: 1}
			}
			sel.Task = int(t)
		}
		out = append(out, sel)
	}
	return out, nil
}

// ParseStateList parses squeue -t / sacct -s: comma-separated states in
// long or compact form, or "all". An unknown name gives squeue's error.
func ParseStateList(s string) (states []JobState, all bool, err error) {
	for _, name := range strings.Split(s, ",") {
		if name == "" {
			continue
		}
		if strings.EqualFold(name, "all") {
			all = true
			continue
		}
		st, ok := ParseJobState(name)
		if !ok {
			valid := make([]string, 0, len(baseNames)+5)
			for _, n := range baseNames {
				valid = append(valid, n.long)
			}
			valid = append(valid, "COMPLETING", "CONFIGURING", "RESIZING", "REVOKED", "SPECIAL_EXIT")
			return nil, false, &CommandError{Stderr: []string{
				"squeue: error: Invalid job state specified: " + name,
				"squeue: error: Valid job states include: " + strings.Join(valid, ",") + "\n",
			}, ExitCode: 1}
		}
		states = append(states, st)
	}
	return states, all, nil
}

// JobFilter is what squeue's options select (_filter_job). Empty lists
// select everything.
type JobFilter struct {
	Jobs       []JobSelector // -j
	States     []JobState    // -t; nil: pending, running, suspended, completing
	AllStates  bool          // -t all
	Users      []string      // -u (and --me, resolved by the caller)
	Partitions []string      // -p
	Accounts   []string      // -A
	QOS        []string      // -q
	Names      []string      // -n
}

// FilterJobs keeps the jobs squeue would print. A job that may run in
// several partitions and matches several of -p is listed once per matching
// partition, as squeue does. A selector naming pending tasks of a folded
// array record keeps only those tasks.
func FilterJobs(jobs []Job, f JobFilter) []Job {
	var out []Job
	for _, j := range jobs {
		if len(f.Jobs) > 0 {
			var ok bool
			if j, ok = selectJob(j, f.Jobs); !ok {
				continue
			}
		}
		if len(f.Accounts) > 0 && !containsFold(f.Accounts, j.Account) {
			continue
		}
		if len(f.QOS) > 0 && !containsFold(f.QOS, j.QOS) {
			continue
		}
		if !f.AllStates {
			if f.States != nil {
				match := false
				for _, s := range f.States {
					if s.matches(j.State) {
						match = true
						break
					}
				}
				if !match {
					continue
				}
			} else if !(j.State.Pending() || j.State.Running() || j.State.Suspended() || j.State.Completing() || j.State&JobStageOut != 0) {
				continue
			}
		}
		if len(f.Users) > 0 && !contains(f.Users, j.User) && !contains(f.Users, u32(j.UID)) {
			continue
		}
		if len(f.Names) > 0 && !containsFold(f.Names, j.Name) {
			continue
		}
		if len(f.Partitions) > 0 {
			for _, p := range strings.Split(j.Partition, ",") {
				if contains(f.Partitions, p) {
					c := j
					c.Partition = p
					out = append(out, c)
				}
			}
			continue
		}
		out = append(out, j)
	}
	return out
}

func selectJob(j Job, sels []JobSelector) (Job, bool) {
	var tasks []int
	for _, s := range sels {
		switch {
		case s.Task == NoArrayTask && (s.JobID == j.JobID || (j.ArrayJobID != 0 && s.JobID == j.ArrayJobID)):
			return j, true
		case s.Task != NoArrayTask && j.isArrayTask() && s.JobID == j.ArrayJobID && s.Task == j.ArrayTaskID:
			return j, true
		case s.Task != NoArrayTask && j.ArrayTasks != nil && s.JobID == j.ArrayJobID:
			for _, t := range j.ArrayTasks {
				if t == s.Task {
					tasks = append(tasks, t)
				}
			}
		case s.JobID == j.HetJobID && j.HetJobID != 0:
			return j, true
		}
	}
	if len(tasks) == 0 {
		return j, false
	}
	if len(tasks) == 1 {
		j.ArrayTasks, j.ArrayTaskID = nil, tasks[0]
		return j, true
	}
	j.ArrayTasks = tasks
	return j, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// InvalidJobIDError is what squeue and scontrol print, and how they exit,
// when the one job asked for does not exist.
func InvalidJobIDError() *CommandError {
	return &CommandError{Stderr: []string{"slurm_load_jobs error: Invalid job id specified"}, ExitCode: 1}
}
