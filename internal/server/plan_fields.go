package server

import (
	"slices"
	"strings"

	"github.com/berth-hq/berth/internal/spec"
)

// unsupportedFields lists the fields set in t that this version does not
// act on, for the plan's "Not supported yet" line: those it never acts on
// (not in supported), and those it acts on only in some runs. A native run
// (no image) gets its instance volumes and /dev/shm in a mount namespace
// of its own (internal/agent/mountns.go; its ports are forwarded by berth
// attach: the job listens on its node's network), and its network volumes
// on a node created with them (volumes.go); a container run gets no
// network volume, repo or files (they are unpacked on the host); a repo
// given by URL is not cloned.
func unsupportedFields(t *spec.Task) []string {
	var out []string
	native := t.Image == ""
	for _, f := range t.SetFields() {
		ok := supported[f]
		switch f {
		case "volumes":
			ok = ok && (native || !slices.ContainsFunc(t.Volumes, spec.Volume.IsNetwork))
		case "repos":
			for _, r := range t.Repos {
				ok = ok && r.URL == ""
			}
			ok = ok && native
		case "files", "resources.disk":
			ok = native
		}
		if !ok {
			out = append(out, f)
		}
	}
	return out
}

// diskNote says, for a node, when a run's resources.disk will not hold
// there: the node enforces it only where its agent says so
// (api.NodeInfo.Disk, internal/agent/jobdisk.go), and only in the job's
// default working directory.
func diskNote(t *spec.Task, limits string) string {
	if t.Resources.Disk == nil || t.Image != "" {
		return ""
	}
	if t.WorkingDir != "" {
		return "disk: not enforced (working_dir is set)"
	}
	if !strings.HasPrefix(limits, "enforced") {
		return "disk: " + strings.TrimSpace(cmpOr(limits, "not enforced: an older agent"))
	}
	return ""
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
