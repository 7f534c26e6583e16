package api

import (
	"strings"

	"github.com/berth-hq/berth/internal/spec"
)

// Container asks an agent to run a job in a container of Image, as dstack
// does for every run with `image:`. The job's Commands run in Shell, its Env
// is the container's whole environment (none of the host's), its WorkingDir
// is a path in the container (empty: the image's), and its Alloc becomes the
// container's memory, CPU and GPU limits.
type Container struct {
	Image string `json:"image"`
	// RegistryAuth holds credentials for pulling Image, with any
	// `${{ secrets.x }}` already resolved by the server.
	RegistryAuth *spec.RegistryAuth `json:"registry_auth,omitempty"`
	// Shell runs the commands: "sh", "bash" or an absolute path; empty is
	// /bin/sh (dstack's default for a custom image).
	Shell      string `json:"shell,omitempty"`
	User       string `json:"user,omitempty"`
	Privileged bool   `json:"privileged,omitempty"`
	// Volumes are instance volumes (host directories); network volumes are
	// refused when the job starts.
	Volumes []spec.Volume      `json:"volumes,omitempty"`
	Ports   []spec.PortMapping `json:"ports,omitempty"`
	ShmSize int64              `json:"shm_size,omitempty"` // bytes of /dev/shm; 0: the engine's default
	// HostNetwork puts the container in the host's network namespace; the
	// server sets it when the job holds its whole node (dstack: no blocks, or
	// all of them), else the container gets a bridge network of its own.
	HostNetwork bool `json:"host_network,omitempty"`
	// SSHInactivity is a dev environment's inactivity_duration in
	// seconds: its shim, which serves the container's SSH endpoint, ends
	// the job once no SSH connection has been open for that long (0:
	// never).
	SSHInactivity int64 `json:"ssh_inactivity,omitempty"`
}

// ContainerFor is the container a run of t asks for, nil when t names no
// image. The caller resolves secrets in RegistryAuth and decides
// HostNetwork.
func ContainerFor(t *spec.Task) *Container {
	if t == nil || t.Image == "" {
		return nil
	}
	c := &Container{Image: t.Image, Shell: t.Shell, User: t.User, Privileged: t.Privileged,
		Volumes: t.Volumes, Ports: t.Ports}
	if t.RegistryAuth != nil {
		ra := *t.RegistryAuth
		c.RegistryAuth = &ra
	}
	if t.Resources.SHMSize != nil {
		c.ShmSize = int64(*t.Resources.SHMSize)
	}
	if d := t.InactivityDuration; t.IsDevEnvironment() && d != nil && *d != spec.DurationOff && *d > 0 {
		c.SSHInactivity = int64(*d)
	}
	return c
}

// CanRunContainers reports whether the node said it has a container engine
// (see Containers).
func (n *NodeInfo) CanRunContainers() bool {
	return n.Containers != "" && !strings.HasPrefix(n.Containers, ContainersNone)
}

// ContainersNone starts NodeInfo.Containers on a node without a usable
// engine; the reason follows in parentheses.
const ContainersNone = "none"
