package cli

import (
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// noSlurm is the Slurm part of a run that has none (submitted with berth
// apply): every field empty, never written.
var noSlurm = &spec.Slurm{}

// slurmPart is the run's Slurm part: the typed one sbatch stores
// (spec.Slurm), else the one read back from the "slurm.*" tags of a run
// stored before it existed (or submitted by srun, which still writes
// tags), else noSlurm.
func slurmPart(r *api.Run) *spec.Slurm {
	if r.Spec == nil {
		return noSlurm
	}
	if r.Spec.Slurm != nil {
		if c, ok := r.Spec.Tags[tagComment]; ok {
			// scontrol update Comment= sets the tag (the server updates
			// a run's tags, not its Slurm part): the later word.
			p := *r.Spec.Slurm
			p.Comment = c
			return &p
		}
		return r.Spec.Slurm
	}
	if p := slurmFromTags(r.Spec.Tags); p != nil {
		return p
	}
	return noSlurm
}

// slurmFromTags reads the Slurm part of a run stored with string tags
// (before spec.Slurm); nil when it has none.
func slurmFromTags(tags map[string]string) *spec.Slurm {
	if tags[tagTool] == "" && tags[tagJobName] == "" && tags[tagUser] == "" {
		return nil
	}
	num := func(k string) int { n, _ := strconv.Atoi(tags[k]); return n }
	p := &spec.Slurm{
		Tool: tags[tagTool], JobName: tags[tagJobName], User: tags[tagUser], Group: tags[tagGroup],
		UID: num(tagUID), GID: num(tagGID), SubmitHost: tags[tagSubmitHost], Account: tags[tagAccount],
		Comment: tags[tagComment], Command: tags[tagCommand], Output: tags[tagStdout], Error: tags[tagStderr],
		Input: tags[tagStdin], OpenMode: tags[tagOpenMode], NTasks: num(tagNTasks), NTasksPerNode: num(tagNTasksPerNode),
		CPUsPerTask: num(tagCPUsPerTask), MemPerCPUMB: uint64(num(tagMemPerCPU)), TresPerNode: tags[tagTresPerNode],
		TresPerJob: tags[tagTresPerJob], Constraint: tags[tagConstraint], Dependency: tags[tagDependency],
		Priority: tags[tagPriority],
	}
	if p.NTasks > 0 && p.NTasksPerNode == 0 {
		p.TasksPerNode = p.NTasks
	} else {
		p.TasksPerNode = p.NTasksPerNode
	}
	if s := tags[tagSignal]; s != "" {
		if sig, err := slurm.ParseSignal(s); err == nil {
			p.Signal = slurmSignalOf(&sig)
		}
	}
	switch tags[tagRequeue] {
	case "1":
		b := true
		p.Requeue = &b
	case "0":
		b := false
		p.Requeue = &b
	}
	return p
}

// slurmSignalOf is sbatch's parsed --signal as the spec keeps it.
func slurmSignalOf(s *slurm.SignalSpec) *spec.SlurmSignal {
	if s == nil {
		return nil
	}
	return &spec.SlurmSignal{Number: s.Signal, Before: spec.Duration(s.Before / time.Second), BatchOnly: s.BatchOnly, Reservation: s.Reservation}
}

// slurmSignalString writes a --signal back as sbatch takes it
// ("B:USR1@90").
func slurmSignalString(s *spec.SlurmSignal) string {
	if s == nil {
		return ""
	}
	return (slurm.SignalSpec{Signal: s.Number, Before: time.Duration(s.Before) * time.Second, BatchOnly: s.BatchOnly, Reservation: s.Reservation}).String()
}
