package slurmconv

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

// Part is the run's Slurm part: the typed one sbatch stores
// (spec.Slurm), else the one read back from the "slurm.*" tags of a run
// stored before it existed (or submitted by srun, which still writes
// tags), else noSlurm.
func Part(r *api.Run) *spec.Slurm {
	if r.Spec == nil {
		return noSlurm
	}
	if r.Spec.Slurm != nil {
		if c, ok := r.Spec.Tags[TagComment]; ok {
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
	if tags[TagTool] == "" && tags[TagJobName] == "" && tags[TagUser] == "" {
		return nil
	}
	num := func(k string) int { n, _ := strconv.Atoi(tags[k]); return n }
	p := &spec.Slurm{
		Tool: tags[TagTool], JobName: tags[TagJobName], User: tags[TagUser], Group: tags[TagGroup],
		UID: num(TagUID), GID: num(TagGID), SubmitHost: tags[TagSubmitHost], Account: tags[TagAccount],
		Comment: tags[TagComment], Command: tags[TagCommand], Output: tags[TagStdout], Error: tags[TagStderr],
		Input: tags[TagStdin], OpenMode: tags[TagOpenMode], NTasks: num(TagNTasks), NTasksPerNode: num(TagNTasksPerNode),
		CPUsPerTask: num(TagCPUsPerTask), MemPerCPUMB: uint64(num(TagMemPerCPU)), TresPerNode: tags[TagTresPerNode],
		TresPerJob: tags[TagTresPerJob], Constraint: tags[TagConstraint], Dependency: tags[TagDependency],
		Priority: tags[TagPriority],
	}
	if p.NTasks > 0 && p.NTasksPerNode == 0 {
		p.TasksPerNode = p.NTasks
	} else {
		p.TasksPerNode = p.NTasksPerNode
	}
	if s := tags[TagSignal]; s != "" {
		if sig, err := slurm.ParseSignal(s); err == nil {
			p.Signal = slurmSignalOf(&sig)
		}
	}
	switch tags[TagRequeue] {
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
