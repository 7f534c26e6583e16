package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
)

// Each job runs in a control group of its own (package cgroup): the kernel
// holds it to the memory and CPUs the scheduler allocated, tells when it
// killed the job for memory, and lets the shim kill whatever the job left
// behind. The agent finds out once, at start, whether this host allows it,
// and reports what it enforces in its node info (berth fleet shows it).

// groupPrefix names this agent's groups: its name and data directory, so
// that agents sharing a host (tests, several sessions) never collide.
func groupPrefix(name, dataDir string) string {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	sum := sha256.Sum256([]byte(name + "\x00" + dataDir))
	return "berth-" + hex.EncodeToString(sum[:6])
}

// detectCgroups decides whether jobs get groups, says so once, and returns
// what the node info reports.
func (a *Agent) detectCgroups() (version, limits string) {
	if a.cfg.NoCgroups {
		a.log.Warn("job limits are not enforced: cgroups disabled by configuration")
		return "none", "none (disabled: --no-cgroups)"
	}
	h, err := cgroup.Detect()
	if err == nil {
		// Detect reads; only making a group shows that this process may.
		err = h.Probe(a.prefix + "-probe")
	}
	if err != nil {
		why := strings.TrimPrefix(err.Error(), cgroup.ErrUnavailable.Error()+": ")
		a.log.Warn("job limits are not enforced: no usable cgroups", "why", why)
		return "none", "none (" + why + ")"
	}
	a.cg = h
	if limits = h.Limits(); !strings.HasPrefix(limits, "memory, cpu ") {
		a.log.Warn("some job limits are not enforced", "limits", limits)
	}
	return "v" + strconv.Itoa(h.Version()), limits
}

// jobGroup is the group of a job on this host, limited to what the job
// was allocated; nil without cgroups.
func (a *Agent) jobGroup(id int64, alloc api.Alloc) *cgroup.Spec {
	if a.cg == nil {
		return nil
	}
	s := a.cg.Spec(a.prefix+"-"+strconv.FormatInt(id, 10), alloc.Memory, alloc.CPUs)
	return &s
}

// removeGroup kills what is left in a job's group and removes it: the
// shim does so when the job ends; this is for a shim that could not.
func (a *Agent) removeGroup(j *localJob) {
	if j.cg == nil {
		return
	}
	if err := cgroup.Remove(*j.cg); err != nil {
		a.log.Warn("remove job's cgroup", "job_id", j.id, "err", err)
	}
}

// sweepGroups removes the groups of this agent that belong to no job it
// knows: left by an earlier agent whose data directory was cleared.
func (a *Agent) sweepGroups() {
	if a.cg == nil {
		return
	}
	names, err := a.cg.Groups(a.prefix + "-")
	if err != nil {
		a.log.Warn("list leftover cgroups", "err", err)
		return
	}
	for _, name := range names {
		id, err := strconv.ParseInt(strings.TrimPrefix(name, a.prefix+"-"), 10, 64)
		if _, known := a.jobs[id]; err == nil && known {
			continue
		}
		a.log.Warn("removing a leftover job cgroup", "group", name)
		if err := cgroup.Remove(a.cg.Spec(name, 0, 0)); err != nil {
			a.log.Warn("remove leftover cgroup", "group", name, "err", err)
		}
	}
}
