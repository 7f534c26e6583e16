package cli

import (
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/spec"
)

// The names srun, salloc and the step host (slurm_srun.go,
// slurm_salloc.go, slurm_stephost.go, slurm_steps.go, slurm_sstat.go) use
// from the Slurm translation, which is internal/slurmconv now. They stay
// here, unexported, while those files are being rewritten (issue 14: steps
// through the agent's shim); the rewrite calls slurmconv directly and
// deletes this file.

const (
	clusterName      = slurmconv.ClusterName
	defaultAccount   = slurmconv.DefaultAccount
	defaultPartition = slurmconv.DefaultPartition

	tagJobName       = slurmconv.TagJobName
	tagTool          = slurmconv.TagTool
	tagUser          = slurmconv.TagUser
	tagUID           = slurmconv.TagUID
	tagGID           = slurmconv.TagGID
	tagGroup         = slurmconv.TagGroup
	tagAccount       = slurmconv.TagAccount
	tagComment       = slurmconv.TagComment
	tagNTasks        = slurmconv.TagNTasks
	tagCPUsPerTask   = slurmconv.TagCPUsPerTask
	tagNTasksPerNode = slurmconv.TagNTasksPerNode
	tagSubmitHost    = slurmconv.TagSubmitHost
)

func slurmState(r *api.Run) slurm.JobState                { return slurmconv.State(r) }
func slurmPart(r *api.Run) *spec.Slurm                    { return slurmconv.Part(r) }
func uniqueNodes(r *api.Run) []string                     { return slurmconv.UniqueNodes(r) }
func localTime(t *time.Time) time.Time                    { return slurmconv.LocalTime(t) }
func runNameFor(jobName string) string                    { return slurmconv.RunName(jobName) }
func exportEnv(ex slurm.Export, env []string, l *envList) { slurmconv.ExportEnv(ex, env, &l.EnvList) }

func dependsOn(t *spec.Task, d *slurm.Dependency, known func(uint32) bool) error {
	return slurmconv.DependsOn(t, d, known)
}

// envList is slurmconv.EnvList under srun's names for its methods.
type envList struct{ slurmconv.EnvList }

func (l *envList) set(k, v string) { l.Set(k, v) }
func (l *envList) spec() spec.Env  { return l.Spec() }

// resources is slurmconv.Resources under srun's and salloc's field names.
type resources struct {
	nodes, tasksPerNode, cpus int
	memMB                     uint64
	ntasksGiven               bool
	r                         slurmconv.Resources
}

func componentResources(o *slurm.BatchOptions) (resources, error) {
	r, err := slurmconv.ComponentResources(o)
	return resources{nodes: r.Nodes, tasksPerNode: r.TasksPerNode, cpus: r.CPUs, memMB: r.MemMB, ntasksGiven: r.NTasksGiven, r: r}, err
}

func (r resources) spec() spec.Resources { return r.r.Spec() }

// submitter is slurmconv.Submitter under srun's and salloc's field names.
type submitter struct {
	user, group string
	uid, gid    int
	host        string
	cwd         string
	env         []string
	now         time.Time
	exe         string
	links       string
	limits      spec.Limits
}

func (s submitter) conv() slurmconv.Submitter {
	return slurmconv.Submitter{User: s.user, Group: s.group, UID: s.uid, GID: s.gid, Host: s.host, Cwd: s.cwd,
		Env: s.env, Now: s.now, Exe: s.exe, Links: s.links, Limits: s.limits}
}

func orStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func u32(n int64) uint32 {
	if n < 0 || n > 0xffffffff {
		return 0
	}
	return uint32(n)
}

func repeat(n, times int) []int {
	out := make([]int, max(times, 1))
	for i := range out {
		out[i] = n
	}
	return out
}
