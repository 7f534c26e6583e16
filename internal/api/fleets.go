package api

import (
	"time"

	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/spec"
)

// FleetApplyRequest creates or updates a fleet (POST /api/v1/fleets).
type FleetApplyRequest struct {
	Spec   *spec.Fleet `json:"spec"`
	Source string      `json:"source,omitempty"` // the file, for messages
	// Keys are the private keys the fleet's identity_file entries name,
	// read by the client, by the path as written: the server keeps them
	// sealed under its secrets key, never in plain text.
	Keys map[string]string `json:"keys,omitempty"`
	// ServerURL is where the fleet's agents reach the server (the client
	// sends the URL it uses itself unless told another).
	ServerURL string `json:"server_url,omitempty"`
	// Plan only answers what applying would do, changing nothing.
	Plan bool `json:"plan,omitempty"`
	// AllOrNothing undoes every host's installation when any host fails.
	AllOrNothing bool `json:"all_or_nothing,omitempty"`
}

// Fleet is a fleet as the server holds it.
type Fleet struct {
	Name    string      `json:"name"`
	Project string      `json:"project"`
	Status  string      `json:"status"` // provisioning, active, failed, deleting
	Message string      `json:"message,omitempty"`
	Spec    *spec.Fleet `json:"spec"`
	Hosts   []FleetHost `json:"hosts"`
	// Instances are a backend fleet's machines (creating, active,
	// terminating), with their nodes' status.
	Instances []Instance `json:"instances,omitempty"`
	// LastError is a backend fleet's last failed creation since its last
	// success (nil: none).
	LastError *CreateError `json:"last_error,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// CreateError is a backend fleet's last failed instance creation: the
// provider's words, when, and when the server tries again (it waits 1 s,
// 2 s, 4 s… up to 5 minutes between failures).
type CreateError struct {
	Message string    `json:"message"`
	At      time.Time `json:"at"`
	RetryAt time.Time `json:"retry_at"`
}

// Fleet statuses.
const (
	FleetProvisioning = "provisioning"
	FleetActive       = "active"
	FleetFailed       = "failed"
	FleetDeleting     = "deleting"
)

// FleetHost is one host of an SSH fleet: where it is, what the server
// found there, and the step its installation reached.
type FleetHost struct {
	Host       string `json:"host"` // user@hostname:port
	Node       string `json:"node"` // the node its agent registers as
	InstallDir string `json:"install_dir"`
	// State: pending, connecting, checked, uploaded, installed, ready,
	// failed, removing (being drained and uninstalled), removed.
	State   string `json:"state"`
	Message string `json:"message,omitempty"`

	OS       string   `json:"os,omitempty"`
	Arch     string   `json:"arch,omitempty"`
	CPUs     int      `json:"cpus,omitempty"`
	Memory   int64    `json:"memory,omitempty"` // bytes
	GPUs     []string `json:"gpus,omitempty"`   // "NAME MEMORY_MiB", from nvidia-smi
	Docker   bool     `json:"docker,omitempty"`
	FreeDisk int64    `json:"free_disk,omitempty"` // bytes free where the agent goes
	// Service is how the agent runs there: "systemd" or "nohup".
	Service string `json:"service,omitempty"`
}

// Host states.
const (
	HostPending    = "pending"
	HostConnecting = "connecting"
	HostChecked    = "checked"
	HostUploaded   = "uploaded"
	HostInstalled  = "installed"
	HostReady      = "ready"
	HostFailed     = "failed"
	HostRemoving   = "removing"
	HostRemoved    = "removed"
)

// FleetPlan is what applying a fleet would do: each host and its action
// (install, reinstall, keep, uninstall) with what will be installed.
type FleetPlan struct {
	Fleet   string            `json:"fleet"`
	Project string            `json:"project"`
	Exists  bool              `json:"exists"`
	Actions []FleetHostAction `json:"actions"`
	// Backend is a backend fleet's plan (it has no hosts).
	Backend *BackendFleetPlan `json:"backend,omitempty"`
}

// BackendFleetPlan is what applying a backend fleet would do: its size,
// the offers its nodes come from (cheapest first), how many nodes it holds
// and how many it creates now (to reach min, or target).
type BackendFleetPlan struct {
	Min          int              `json:"min"`
	Target       int              `json:"target"`
	Max          int              `json:"max"`
	IdleDuration string           `json:"idle_duration"`
	SpotPolicy   string           `json:"spot_policy"`
	Offers       []provider.Offer `json:"offers"`
	Holds        int              `json:"holds"`
	CreateNow    int              `json:"create_now"`
	Notes        []string         `json:"notes,omitempty"`
}

// FleetHostAction is one host's part of a plan.
type FleetHostAction struct {
	Host   string `json:"host"`
	Node   string `json:"node"`
	Action string `json:"action"`
	Detail string `json:"detail"`
}

// FleetDeleteRequest deletes a fleet: drain its nodes, wait for their
// jobs (Force: stop them instead), uninstall its agents.
type FleetDeleteRequest struct {
	Force bool `json:"force,omitempty"`
}
