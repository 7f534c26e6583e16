package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/pkg/authconfig"
	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
)

// Labels on every container Berth creates.
const (
	LabelManaged = "berth.managed" // "1"
	LabelNode    = "berth.node"    // the agent's node name
	LabelJob     = "berth.job_id"
	LabelRun     = "berth.run_id"
	LabelAttempt = "berth.attempt"
	LabelDir     = "berth.dir" // the job's directory on the host: unique per agent
)

// Errors callers check with errors.Is.
var (
	ErrNoEngine = errors.New("container: no engine")
	ErrNotFound = errors.New("container: not found")
)

// Engine is a connection to a Docker engine, at the API version both sides
// speak.
type Engine struct {
	c *client.Client
}

// Open connects to the engine named by the environment (DOCKER_HOST, by
// default the local socket) and negotiates the API version. An unreachable
// engine is ErrNoEngine.
func Open(ctx context.Context) (*Engine, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		host := c.DaemonHost()
		c.Close()
		return nil, fmt.Errorf("%w at %s: %v", ErrNoEngine, host, err)
	}
	return &Engine{c: c}, nil
}

// Close releases the connection.
func (e *Engine) Close() error { return e.c.Close() }

// APIVersion is the negotiated API version, e.g. "1.41".
func (e *Engine) APIVersion() string { return e.c.ClientVersion() }

// ID is the engine's own ID (Docker's `docker info` ID): two nodes with
// the same one share an engine, and its volumes.
func (e *Engine) ID(ctx context.Context) (string, error) {
	res, err := e.c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", fmt.Errorf("container: engine info: %w", err)
	}
	return res.Info.ID, nil
}

// EngineID is the ID of the engine named by the environment ("" when
// there is none).
func EngineID(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	e, err := Open(ctx)
	if err != nil {
		return ""
	}
	defer e.Close()
	id, _ := e.ID(ctx)
	return id
}

// Describe says in a few words whether containers can run here: "docker
// 1.41", or "none (why)" (api.NodeInfo.Containers).
func Describe(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	e, err := Open(ctx)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), ErrNoEngine.Error()+" ")
		if len(why) > 160 {
			why = why[:160] + "…"
		}
		return "none (no Docker engine " + why + ")"
	}
	defer e.Close()
	return "docker " + e.APIVersion()
}

// Spec is one container to create.
type Spec struct {
	Name   string // unique on the engine; see NewName
	Labels map[string]string
	Image  string
	Auth   *Auth // for pulling Image; nil: anonymous
	// Entrypoint and Cmd replace the image's; both nil run the image's own.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string // in the container; empty: the image's
	User       string
	// GroupAdd are supplementary groups of User (GIDs, as `--group-add`).
	GroupAdd   []string
	Privileged bool
	Mounts     []Mount
	ShmSize    int64 // bytes; 0: the engine's default
	Memory     int64 // bytes; 0: no limit. Swap is not allowed beyond it.
	NanoCPUs   int64 // CPUs × 1e9; 0: no limit
	// GPUs are the host's device indices (or UUIDs) the job holds; they are
	// requested from the nvidia driver and, inside the container, numbered
	// from 0.
	GPUs  []string
	Ports []Port
	// HostNetwork shares the host's network namespace; otherwise the
	// container is on the default bridge and Ports are published.
	HostNetwork bool
}

// Auth is a registry's user name and password.
type Auth struct {
	Username string
	Password string
}

// Mount binds a host directory into the container.
type Mount struct {
	// Volume, when set, mounts the engine's volume of that name (a network
	// volume of the Docker provider on this engine) instead of Source.
	Volume   string
	Source   string // host path; "~" is the agent's home
	Target   string
	ReadOnly bool
	// Optional skips a Source that does not exist; a required one is created.
	Optional bool
}

// Port publishes a container port on the host.
type Port struct {
	Container int
	Host      int    // 0: any free port
	HostIP    string // empty: every address
}

// Container is one container on an engine.
type Container struct {
	e    *Engine
	ID   string
	Name string
}

var nameUnsafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_.-]+`) })

// NewName makes a container name that no other agent or job on the host
// uses: berth-NODE-JOB-RANDOM.
func NewName(node string, jobID int64) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	node = strings.Trim(nameUnsafe().ReplaceAllString(node, "-"), "-._")
	if node == "" {
		node = "node"
	}
	return fmt.Sprintf("berth-%s-%d-%s", node, jobID, hex.EncodeToString(b[:]))
}

// Create pulls the image if the engine lacks it (telling progress), then
// creates the container; it does not start it.
func (e *Engine) Create(ctx context.Context, s Spec, progress io.Writer) (*Container, error) {
	if err := e.ensureImage(ctx, s.Image, s.Auth, progress); err != nil {
		return nil, err
	}
	cfg, host, err := s.config()
	if err != nil {
		return nil, err
	}
	res, err := e.c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: s.Name, Config: cfg, HostConfig: host})
	if err != nil {
		return nil, fmt.Errorf("container: create %s: %w", s.Name, err)
	}
	return &Container{e: e, ID: res.ID, Name: s.Name}, nil
}

// HasImage reports whether the engine holds image.
func (e *Engine) HasImage(ctx context.Context, image string) (bool, error) {
	_, err := e.c.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("container: image %s: %w", image, err)
	}
	return true, nil
}

func (e *Engine) ensureImage(ctx context.Context, image string, auth *Auth, progress io.Writer) error {
	if ok, err := e.HasImage(ctx, image); ok || err != nil {
		return err
	}
	opts := client.ImagePullOptions{}
	if auth != nil {
		ac := registry.AuthConfig{Username: auth.Username, Password: auth.Password}
		if ref, err := reference.ParseNormalizedNamed(image); err == nil {
			ac.ServerAddress = reference.Domain(ref)
		}
		enc, err := authconfig.Encode(ac)
		if err != nil {
			return fmt.Errorf("container: registry_auth: %w", err)
		}
		opts.RegistryAuth = enc
	}
	if progress != nil {
		fmt.Fprintf(progress, "berth: pulling image %s\n", image)
	}
	resp, err := e.c.ImagePull(ctx, image, opts)
	if err != nil {
		return fmt.Errorf("container: pull %s: %w", image, err)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		return fmt.Errorf("container: pull %s: %w", image, err)
	}
	return nil
}

// config turns s into the engine's create request.
func (s *Spec) config() (*ctypes.Config, *ctypes.HostConfig, error) {
	env := append([]string(nil), s.Env...)
	var devices []ctypes.DeviceRequest
	if len(s.GPUs) > 0 {
		devices = []ctypes.DeviceRequest{{Driver: "nvidia", DeviceIDs: s.GPUs, Capabilities: [][]string{{"gpu"}}}}
		local := make([]string, len(s.GPUs))
		for i := range local {
			local[i] = strconv.Itoa(i)
		}
		// Inside, the job's devices are 0..n-1 whatever their host indices.
		env = setEnv(env, "NVIDIA_VISIBLE_DEVICES", strings.Join(s.GPUs, ","))
		env = setEnv(env, "CUDA_VISIBLE_DEVICES", strings.Join(local, ","))
		env = setEnv(env, "GPU_DEVICE_ORDINAL", strings.Join(local, ","))
	} else {
		// CUDA images say NVIDIA_VISIBLE_DEVICES=all; where the nvidia
		// runtime is the default, that would hand every GPU to a job that
		// holds none.
		env = setEnv(env, "NVIDIA_VISIBLE_DEVICES", "void")
	}
	initProc := true
	cfg := &ctypes.Config{
		Image: s.Image, Env: env, WorkingDir: s.WorkingDir, User: s.User, Labels: s.Labels,
		Entrypoint: s.Entrypoint, Cmd: s.Cmd,
	}
	host := &ctypes.HostConfig{
		// An init as PID 1 passes SIGTERM on to the job, which a shell as
		// PID 1 would not get unless it traps it.
		Init:       &initProc,
		Privileged: s.Privileged,
		GroupAdd:   s.GroupAdd,
		ShmSize:    s.ShmSize,
		// json-file without rotation: the whole output stays readable from
		// the start while the container exists, so a new supervisor can
		// resume from any offset.
		LogConfig: ctypes.LogConfig{Type: "json-file"},
		Resources: ctypes.Resources{Memory: s.Memory, NanoCPUs: s.NanoCPUs, DeviceRequests: devices},
	}
	if s.Memory > 0 {
		host.MemorySwap = s.Memory
	}
	// The engine refuses more CPUs than the host has; a node may declare more.
	if limit := int64(runtime.NumCPU()) * 1e9; host.NanoCPUs > limit {
		host.NanoCPUs = limit
	}
	for _, m := range s.Mounts {
		if m.Volume != "" {
			host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: m.Volume, Target: m.Target, ReadOnly: m.ReadOnly})
			continue
		}
		src := m.Source
		if src == "~" || strings.HasPrefix(src, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, nil, fmt.Errorf("container: volume %s: %w", m.Source, err)
			}
			src = filepath.Join(home, strings.TrimPrefix(src, "~"))
		}
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			if m.Optional {
				continue
			}
			if err := os.MkdirAll(src, 0o755); err != nil {
				return nil, nil, fmt.Errorf("container: volume %s: %w", m.Source, err)
			}
		}
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: src, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	if s.HostNetwork {
		host.NetworkMode = "host"
		return cfg, host, nil
	}
	host.NetworkMode = "bridge"
	for _, p := range s.Ports {
		port, err := network.ParsePort(strconv.Itoa(p.Container) + "/tcp")
		if err != nil {
			return nil, nil, fmt.Errorf("container: port %d: %w", p.Container, err)
		}
		b := network.PortBinding{}
		if p.Host > 0 {
			b.HostPort = strconv.Itoa(p.Host)
		}
		if p.HostIP != "" {
			if b.HostIP, err = netip.ParseAddr(p.HostIP); err != nil {
				return nil, nil, fmt.Errorf("container: port %d: %w", p.Container, err)
			}
		}
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts, host.PortBindings = network.PortSet{}, network.PortMap{}
		}
		cfg.ExposedPorts[port] = struct{}{}
		host.PortBindings[port] = append(host.PortBindings[port], b)
	}
	return cfg, host, nil
}

// Get finds a container by name or ID; ErrNotFound when there is none.
func (e *Engine) Get(ctx context.Context, nameOrID string) (*Container, error) {
	res, err := e.c.ContainerInspect(ctx, nameOrID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, nameOrID)
	}
	if err != nil {
		return nil, fmt.Errorf("container: inspect %s: %w", nameOrID, err)
	}
	return &Container{e: e, ID: res.Container.ID, Name: strings.TrimPrefix(res.Container.Name, "/")}, nil
}

// Find lists the containers, running or not, that carry all the labels.
func (e *Engine) Find(ctx context.Context, labels map[string]string) ([]*Container, error) {
	f := client.Filters{}
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	res, err := e.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("container: list: %w", err)
	}
	var out []*Container
	for _, s := range res.Items {
		name := ""
		if len(s.Names) > 0 {
			name = strings.TrimPrefix(s.Names[0], "/")
		}
		out = append(out, &Container{e: e, ID: s.ID, Name: name})
	}
	return out, nil
}

// Start starts a created container.
func (c *Container) Start(ctx context.Context) error {
	if _, err := c.e.c.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("container: start %s: %w", c.Name, err)
	}
	return nil
}

// State is what the engine says of a container.
type State struct {
	Status     string // created, running, exited, …
	Running    bool
	ExitCode   int
	OOMKilled  bool // the kernel killed a process of it for memory
	Error      string
	StartedAt  time.Time // zero until it started
	FinishedAt time.Time // zero until it ended
	// Ports are the published ports: container port → "host-ip:host-port".
	Ports map[int][]string
	// Addr is the container's address on its network (empty on the
	// host's network): where a tunnel to one of its ports goes.
	Addr string
	// Pid is its main process's ID on the host (0 when it does not run):
	// its namespaces are that process's.
	Pid int
}

// Started reports whether the container has been started at least once.
func (s State) Started() bool { return s.Status != string(ctypes.StateCreated) }

// Inspect reads the container's state.
func (c *Container) Inspect(ctx context.Context) (State, error) {
	res, err := c.e.c.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return State{}, fmt.Errorf("%w: %s", ErrNotFound, c.Name)
	}
	if err != nil {
		return State{}, fmt.Errorf("container: inspect %s: %w", c.Name, err)
	}
	var st State
	if s := res.Container.State; s != nil {
		st = State{Status: string(s.Status), Running: s.Running, ExitCode: s.ExitCode, OOMKilled: s.OOMKilled, Error: s.Error,
			StartedAt: engineTime(s.StartedAt), FinishedAt: engineTime(s.FinishedAt), Pid: s.Pid}
	}
	if ns := res.Container.NetworkSettings; ns != nil {
		for _, ep := range ns.Networks {
			if ep != nil && ep.IPAddress.IsValid() && !ep.IPAddress.IsUnspecified() {
				st.Addr = ep.IPAddress.String()
				break
			}
		}
		for p, bs := range ns.Ports {
			for _, b := range bs {
				if st.Ports == nil {
					st.Ports = map[int][]string{}
				}
				ip := "0.0.0.0"
				if b.HostIP.IsValid() {
					ip = b.HostIP.String()
				}
				st.Ports[int(p.Num())] = append(st.Ports[int(p.Num())], ip+":"+b.HostPort)
			}
		}
	}
	return st, nil
}

// engineTime reads the engine's RFC 3339 times; "0001-01-01T00:00:00Z"
// (never) is the zero time.
func engineTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t.UTC()
}

// Wait blocks until the container is not running and returns its state.
func (c *Container) Wait(ctx context.Context) (State, error) {
	w := c.e.c.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: ctypes.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		if err != nil && !cerrdefs.IsNotFound(err) {
			return State{}, fmt.Errorf("container: wait %s: %w", c.Name, err)
		}
	}
	return c.Inspect(ctx)
}

// Stop sends SIGTERM and, if the container still runs after grace, SIGKILL;
// it returns once the container has stopped.
func (c *Container) Stop(ctx context.Context, grace time.Duration) error {
	secs := max(int((grace+time.Second-1)/time.Second), 0)
	if _, err := c.e.c.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("container: stop %s: %w", c.Name, err)
	}
	return nil
}

// Kill sends SIGKILL at once.
func (c *Container) Kill(ctx context.Context) error {
	_, err := c.e.c.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("container: kill %s: %w", c.Name, err)
	}
	return nil
}

// Signal sends sig (a number, or a name such as "USR1") to the container's
// main process, which its init passes on to the job's shell.
func (c *Container) Signal(ctx context.Context, sig string) error {
	_, err := c.e.c.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: sig})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("container: signal %s to %s: %w", sig, c.Name, err)
	}
	return nil
}

// Remove deletes the container, running or not, with its anonymous volumes.
func (c *Container) Remove(ctx context.Context) error {
	_, err := c.e.c.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("container: remove %s: %w", c.Name, err)
	}
	return nil
}

// setEnv sets name in env, in place of any value it had: a variable given
// twice reaches some programs with its first value.
func setEnv(env []string, name, value string) []string {
	for i, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			env[i] = name + "=" + value
			return env
		}
	}
	return append(env, name+"="+value)
}
