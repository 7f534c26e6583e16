package control

import (
	"slices"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
)

// Volumes in placement (issue 17). A run's volumes become features its
// nodes must have: a native run with instance volumes or shm_size needs a
// node whose agent can make it a mount namespace (sched.MountsFeature,
// from api.NodeInfo.Mounts), and a network volume needs a node it is
// attached to at the run's path (sched.VolumeFeature, which a backend
// node created with the volume advertises; any one of a list of names).

// mountFeatures are the features t's volumes ask of a node.
func mountFeatures(t *spec.Task) []string {
	var out []string
	if t.Image == "" {
		need := t.Resources.SHMSize != nil
		for _, v := range t.Volumes {
			need = need || !v.IsNetwork() && !v.Optional
		}
		if need {
			out = append(out, sched.MountsFeature)
		}
	}
	for _, v := range t.Volumes {
		if v.IsNetwork() {
			out = append(out, VolumeFeature(t.Project, v))
		}
	}
	return out
}

// VolumeFeature is the feature of a node with network volume v of project
// attached at v.Path ("a|b" for any one of several names).
func VolumeFeature(project string, v spec.Volume) string {
	alts := make([]string, 0, len(v.NetworkNames()))
	for _, n := range v.NetworkNames() {
		alts = append(alts, VolumeFeatureOf(project, n, v.Path))
	}
	return strings.Join(alts, "|")
}

// VolumeFeatureOf is the feature of a node with volume name of project at
// path.
func VolumeFeatureOf(project, name, path string) string {
	return sched.VolumeFeature + project + "/" + name + ":" + path
}

// withEngine adds a node's container engine (sched.EngineFeature) to its
// features: a container run that mounts a Docker volume needs that engine.
func withEngine(features []string, engineID string) []string {
	if engineID == "" {
		return features
	}
	return append(slices.Clip(features), sched.EngineFeature+engineID)
}

// withMounts adds MountsFeature to a node's features where its agent can
// make mount namespaces.
func withMounts(features []string, mounts string) []string {
	if strings.HasPrefix(mounts, api.MountsNamespaces) {
		return append(slices.Clip(features), sched.MountsFeature)
	}
	return features
}
