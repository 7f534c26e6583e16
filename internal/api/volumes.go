package api

import (
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// MountsNamespaces starts NodeInfo.Mounts on a node whose agent gives a
// job without a container a mount namespace of its own (its volumes and
// /dev/shm).
const MountsNamespaces = "namespaces"

// Volume is a network volume of a project (`type: volume`), as `berth
// volume list` shows it. Status is dstack's: submitted (recorded, the
// provider not yet done), active, failed; or deleting.
type Volume struct {
	Name     string `json:"name"`
	Project  string `json:"project"`
	Backend  string `json:"backend"`
	Region   string `json:"region,omitempty"`
	Status   string `json:"status"`
	Size     int64  `json:"size,omitempty"` // bytes asked for; 0: registered, its own
	External bool   `json:"external,omitempty"`
	// VolumeID is the provider's name of the volume.
	VolumeID string `json:"volume_id"`
	// Attached are the nodes it is attached to (backend instances created
	// with it); UsedBy the active runs that mount it.
	Attached  []string  `json:"attached,omitempty"`
	UsedBy    []string  `json:"used_by,omitempty"`
	Message   string    `json:"message,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Node and Path are an instance volume's (backend "instance"): the
	// directory Path on node Node.
	Node string `json:"node,omitempty"`
	Path string `json:"path,omitempty"`
}

// VolumeApplyRequest creates (or registers) a volume; Plan only says what
// would be done.
type VolumeApplyRequest struct {
	Spec *spec.VolumeConfig `json:"spec"`
	Plan bool               `json:"plan,omitempty"`
}

// VolumePlan is what applying a volume configuration would do.
type VolumePlan struct {
	Name    string  `json:"name"`
	Project string  `json:"project"`
	Exists  bool    `json:"exists"`
	Volume  *Volume `json:"volume,omitempty"` // the volume that exists
}

// Volume statuses.
const (
	VolumeSubmitted = "submitted"
	VolumeActive    = "active"
	VolumeFailed    = "failed"
	VolumeDeleting  = "deleting"
)
