package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/spec"
)

// unsupportedFields lists the fields set in t that this version does not
// act on, for the plan's "Not supported yet" line: those it never acts on
// (not in supported), and those it acts on only in some runs. A native run
// (no image) gets its instance volumes and /dev/shm in a mount namespace
// of its own (internal/agent/mountns.go; its ports are forwarded by berth
// attach: the job listens on its node's network), and its network volumes
// on a node created with them (volumes.go); a container run gets no
// network volume. Repos (local or by URL), files and resources.disk hold
// for both (internal/agent/carry_container.go for containers).
func unsupportedFields(t *spec.Task) []string {
	var out []string
	native := t.Image == ""
	for _, f := range t.SetFields() {
		ok := supported[f]
		switch f {
		case "volumes":
			ok = ok && (native || !slices.ContainsFunc(t.Volumes, spec.Volume.IsNetwork))
		case "resources.disk":
			ok = true // the plan's rows say where it is not enforced (diskNote)
		case "python", "nvcc":
			ok = native // the node's runtime (control/runtime.go); an image brings its own
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
	if t.Resources.Disk == nil {
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

// runtimeWhy says why a node cannot run t's `python:`/`nvcc:` ("" when it
// can, or t needs neither): the node's agent found no such binary and
// was given no image for it (control/runtime.go).
func runtimeWhy(t *spec.Task, n api.Node) string {
	var missing []string
	for _, r := range control.RuntimesOf(t) {
		if _, ok := n.Runtimes[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "no " + strings.Join(missing, ", ") + " here (none on the agent's PATH, no image given: berth agent --python-image/--nvcc-image)"
}

// runtimeNotes say which Python (and nvcc) runs t on each node that has
// them, for the plan.
func runtimeNotes(t *spec.Task, nodes []api.Node) []string {
	rs := control.RuntimesOf(t)
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(nodes, func(a, b api.Node) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	for _, n := range nodes {
		var have []string
		for _, r := range rs {
			if v, ok := n.Runtimes[r]; ok {
				if m := n.Runtimes[api.RuntimeVenv]; m != "" && r != api.RuntimeNvcc && api.RuntimeImageOf(v) == "" {
					v += " in a fresh venv of the run (" + strings.Replace(m, "3.X", strings.TrimPrefix(r, "python"), 1) + ")"
				}
				have = append(have, r+": "+v)
			}
		}
		if len(have) == len(rs) {
			out = append(out, fmt.Sprintf("on %s: %s", n.Name, strings.Join(have, "; ")))
		}
	}
	return out
}
