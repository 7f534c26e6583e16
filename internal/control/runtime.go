package control

import (
	"slices"
	"sort"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// `python:` and `nvcc:` of a run without an image (issue 16): a node
// offers what its agent found or was given (api.NodeInfo.Runtimes: a
// python3.X of the host, or an image for it); to the scheduler each is a
// node feature RuntimeFeature+KEY, which such a run asks for, so that it
// goes only where its Python (and nvcc) will run, and the plan says why
// elsewhere not.

// RuntimeFeature starts a feature the scheduler sees for a runtime a node
// offers ("runtime:python3.12"); no administrator's feature can clash.
const RuntimeFeature = "runtime:"

// nodeFeatures are the node's features and its runtimes' (the node's own
// slice when it offers none).
func nodeFeatures(info api.NodeInfo) []string {
	if len(info.Runtimes) == 0 {
		return info.Features
	}
	keys := make([]string, 0, len(info.Runtimes))
	for k := range info.Runtimes {
		keys = append(keys, RuntimeFeature+k)
	}
	sort.Strings(keys)
	return slices.Concat(info.Features, keys)
}

// RuntimesOf are the runtime keys t needs of a node (none with an image,
// whose own Python runs).
func RuntimesOf(t *spec.Task) []string {
	if t.Image != "" {
		return nil
	}
	var out []string
	if t.Python != "" {
		out = append(out, api.RuntimePython(t.Python))
	}
	if t.Nvcc {
		out = append(out, api.RuntimeNvcc)
	}
	return out
}

// withRuntimes adds to features those of the runtimes t needs (a copy:
// features is the configuration's).
func withRuntimes(t *spec.Task, features []string) []string {
	rs := RuntimesOf(t)
	if len(rs) == 0 {
		return features
	}
	out := slices.Clone(features)
	for _, r := range rs {
		out = append(out, RuntimeFeature+r)
	}
	return out
}
