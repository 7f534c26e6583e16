// Package docker is a provider.Provider that lends containers of the local
// Docker engine as machines ("Docker as a cloud"): each instance is a
// container that runs `berth agent` (the server's own static binary,
// bind-mounted read-only) with the offer's CPU and memory limits, on a
// Docker network of its own; offers are shapes from the configuration;
// network volumes are Docker volumes. It exercises the whole life of a
// backend fleet (offer, create, join, run, idle, terminate, reconcile after
// a crash) on one host, with the same client library as the agent's
// container runtime (internal/agent/container).
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/berth-hq/berth/internal/provider"
)

// Labels on everything this provider creates. LabelOwner is the server's
// instance id: a server (or a test) lists and cleans only its own.
const (
	LabelOwner = "berth.cloud.owner"
	LabelKey   = "berth.cloud.key"
	LabelOffer = "berth.cloud.offer" // the offer as JSON
)

// Backend is the provider's name in offers and fleet specs.
const Backend = "docker"

// AgentDataDir is where the agent in an instance keeps its jobs' files.
const AgentDataDir = "/var/lib/berth"

// Shape is one offer: a container with these limits.
type Shape struct {
	Name   string
	CPUs   int
	Memory provider.Bytes
	Price  float64
	Spot   bool
	// Zone is an availability-zone label for the shape's offers (""
	// none): Docker has no zones, a fleet's availability_zones selects
	// shapes by it.
	Zone string
}

// Config says how instances are made.
type Config struct {
	// Owner is the server's instance id: the value of LabelOwner on every
	// container, network and volume, and part of their names.
	Owner string
	// Image runs the agent; it needs nothing but a shell-less root file
	// system that can run a static binary (local/busybox:ci will do).
	Image string
	// Binary is the host path of a static berth binary, bind-mounted at
	// /berth in every instance.
	Binary string
	// Network is the Docker network the instances share (created if
	// missing; default berth-cloud-OWNER).
	Network string
	Shapes  []Shape
	Region  string // default "local"
}

// Provider is Docker as a cloud.
type Provider struct {
	c   *client.Client
	cfg Config
	// netMu makes concurrent creations make one network, not one each
	// (Docker allows two networks of one name).
	netMu sync.Mutex
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// New connects to the engine named by the environment (DOCKER_HOST, by
// default the local socket).
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Owner == "" || unsafeName.MatchString(cfg.Owner) {
		return nil, fmt.Errorf("docker provider: owner %q: letters, digits, '_', '.', '-' only", cfg.Owner)
	}
	if cfg.Image == "" {
		return nil, errors.New("docker provider: no image")
	}
	if cfg.Network == "" {
		cfg.Network = "berth-cloud-" + cfg.Owner
	}
	if cfg.Region == "" {
		cfg.Region = "local"
	}
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		c.Close()
		return nil, fmt.Errorf("docker provider: no engine: %w", err)
	}
	return &Provider{c: c, cfg: cfg}, nil
}

// Close releases the connection (instances go on).
func (p *Provider) Close() error { return p.c.Close() }

// Name is "docker".
func (p *Provider) Name() string { return Backend }

// Network is the instances' network's name.
func (p *Provider) Network() string { return p.cfg.Network }

// Offers are the configured shapes.
func (p *Provider) Offers(context.Context) ([]provider.Offer, error) {
	out := make([]provider.Offer, 0, len(p.cfg.Shapes))
	for _, s := range p.cfg.Shapes {
		out = append(out, provider.Offer{Backend: Backend, Region: p.cfg.Region, Instance: s.Name, CPUs: s.CPUs, Memory: s.Memory, Price: s.Price, Spot: s.Spot, Zone: s.Zone})
	}
	return out, nil
}

func (p *Provider) name(key string) string {
	return "berth-cloud-" + p.cfg.Owner + "-" + strings.Trim(unsafeName.ReplaceAllString(key, "-"), "-")
}

// Create starts a container for key, or finds the one it started before.
// In b.ServerURL a loopback or unspecified host is replaced by the
// network's gateway (the host as seen from the network): the server must
// listen there too (e.g. --listen 0.0.0.0:PORT).
func (p *Provider) Create(ctx context.Context, key string, offer provider.Offer, b provider.Bootstrap) (provider.Instance, error) {
	if in, err := p.Get(ctx, key); err == nil {
		if in.State == provider.StateProvisioning {
			_, _ = p.c.ContainerStart(ctx, p.name(key), client.ContainerStartOptions{})
			return p.Get(ctx, key)
		}
		return in, nil
	} else if !errors.Is(err, provider.ErrNotFound) {
		return provider.Instance{}, err
	}
	if p.cfg.Binary == "" {
		return provider.Instance{}, errors.New("docker provider: no berth binary to mount")
	}
	gw, err := p.ensureNetwork(ctx)
	if err != nil {
		return provider.Instance{}, err
	}
	server, err := agentURL(b.ServerURL, gw)
	if err != nil {
		return provider.Instance{}, err
	}
	offerJSON, _ := json.Marshal(offer)
	args := []string{"agent", "--server", server, "--name", b.NodeName, "--data-dir", AgentDataDir,
		"--cpus", strconv.Itoa(offer.CPUs), "--memory", strconv.FormatInt(int64(offer.Memory)>>20, 10) + "MB",
		"--no-cgroups", "--run-as-agent", "--socket", "none"}
	if b.Fleet != "" {
		args = append(args, "--fleet", b.Fleet)
	}
	if b.Blocks != "" {
		args = append(args, "--blocks", b.Blocks)
	}
	if len(b.Features) > 0 {
		args = append(args, "--features", strings.Join(b.Features, ","))
	}
	cfg := &ctypes.Config{
		Image: p.cfg.Image, Entrypoint: []string{"/berth"}, Cmd: args,
		Env:      append(slices.Clip(b.Env), "BERTH_TOKEN="+b.Token, "BERTH_HOME=/tmp/berth-home", "PATH=/bin:/usr/bin"),
		Labels:   map[string]string{LabelOwner: p.cfg.Owner, LabelKey: key, LabelOffer: string(offerJSON)},
		Hostname: b.NodeName,
	}
	init := true
	host := &ctypes.HostConfig{
		Init: &init, NetworkMode: ctypes.NetworkMode(p.cfg.Network),
		LogConfig: ctypes.LogConfig{Type: "json-file"},
		Resources: ctypes.Resources{Memory: int64(offer.Memory), NanoCPUs: int64(offer.CPUs) * 1e9},
		Mounts:    []mount.Mount{{Type: mount.TypeBind, Source: p.cfg.Binary, Target: "/berth", ReadOnly: true}},
	}
	if host.Memory > 0 {
		host.MemorySwap = host.Memory
	}
	// The engine refuses more CPUs than the host has; a shape may say more.
	if limit := int64(runtime.NumCPU()) * 1e9; host.NanoCPUs > limit {
		host.NanoCPUs = limit
	}
	for _, v := range b.Volumes {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: v.Volume, Target: v.Path})
	}
	name := p.name(key)
	if _, err := p.c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host}); err != nil {
		// Two creates of one key raced: the other one's container is ours.
		if !cerrdefs.IsConflict(err) {
			return provider.Instance{}, fmt.Errorf("docker provider: create %s: %w", name, err)
		}
	}
	if _, err := p.c.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		return provider.Instance{}, fmt.Errorf("docker provider: start %s: %w", name, err)
	}
	return p.Get(ctx, key)
}

// agentURL is the server's URL as seen from the network: a loopback or
// unspecified host becomes the gateway.
func agentURL(server, gateway string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("docker provider: server URL %q: %v", server, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("docker provider: server URL %q: %w", server, err)
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		if gateway == "" {
			return "", fmt.Errorf("docker provider: network has no gateway to reach %s at", server)
		}
		u.Host = net.JoinHostPort(gateway, port)
	}
	return u.String(), nil
}

// ensureNetwork creates the instances' network if it is missing and
// returns its IPv4 gateway.
func (p *Provider) ensureNetwork(ctx context.Context) (string, error) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	res, err := p.c.NetworkInspect(ctx, p.cfg.Network, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		_, err = p.c.NetworkCreate(ctx, p.cfg.Network, client.NetworkCreateOptions{Driver: "bridge", Labels: map[string]string{LabelOwner: p.cfg.Owner}})
		if err != nil && !cerrdefs.IsConflict(err) {
			return "", fmt.Errorf("docker provider: network %s: %w", p.cfg.Network, err)
		}
		res, err = p.c.NetworkInspect(ctx, p.cfg.Network, client.NetworkInspectOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("docker provider: network %s: %w", p.cfg.Network, err)
	}
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.IsValid() && c.Gateway.Is4() {
			return c.Gateway.String(), nil
		}
	}
	return "", nil
}

func (p *Provider) instance(key string, labels map[string]string, id string, state ctypes.ContainerState, status string) provider.Instance {
	in := provider.Instance{Key: key, ID: id, Detail: status}
	_ = json.Unmarshal([]byte(labels[LabelOffer]), &in.Offer)
	switch state {
	case ctypes.StateRunning:
		in.State = provider.StateRunning
	case ctypes.StateCreated, ctypes.StateRestarting:
		in.State = provider.StateProvisioning
	default: // exited, dead, paused, removing: not serving
		in.State = provider.StateStopped
	}
	return in
}

// Get inspects key's container.
func (p *Provider) Get(ctx context.Context, key string) (provider.Instance, error) {
	res, err := p.c.ContainerInspect(ctx, p.name(key), client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return provider.Instance{}, fmt.Errorf("%w: instance %s", provider.ErrNotFound, key)
	}
	if err != nil {
		return provider.Instance{}, fmt.Errorf("docker provider: inspect %s: %w", key, err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[LabelOwner] != p.cfg.Owner || c.State == nil {
		return provider.Instance{}, fmt.Errorf("%w: instance %s", provider.ErrNotFound, key)
	}
	detail := string(c.State.Status)
	if c.State.Status == ctypes.StateExited {
		detail = fmt.Sprintf("exited with code %d", c.State.ExitCode)
		if c.State.OOMKilled {
			detail += " (out of memory)"
		}
	}
	return p.instance(key, c.Config.Labels, c.ID, c.State.Status, detail), nil
}

// List returns this owner's instances, running or not.
func (p *Provider) List(ctx context.Context) ([]provider.Instance, error) {
	f := client.Filters{}
	f.Add("label", LabelOwner+"="+p.cfg.Owner)
	res, err := p.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker provider: list: %w", err)
	}
	out := make([]provider.Instance, 0, len(res.Items))
	for _, c := range res.Items {
		out = append(out, p.instance(c.Labels[LabelKey], c.Labels, c.ID, c.State, c.Status))
	}
	return out, nil
}

// Terminate removes key's container, killing the agent and its jobs.
func (p *Provider) Terminate(ctx context.Context, key string) error {
	_, err := p.c.ContainerRemove(ctx, p.name(key), client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker provider: terminate %s: %w", key, err)
	}
	return nil
}

// Kill stops key's container from outside, as a cloud takes a spot
// instance back (for tests and `berth bench scale`).
func (p *Provider) Kill(ctx context.Context, key string) error {
	_, err := p.c.ContainerKill(ctx, p.name(key), client.ContainerKillOptions{Signal: "KILL"})
	return err
}

// CreateVolume makes the Docker volume name (or finds it).
func (p *Provider) CreateVolume(ctx context.Context, name string, _ provider.Bytes) (provider.Volume, error) {
	_, err := p.c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: map[string]string{LabelOwner: p.cfg.Owner}})
	if err != nil {
		return provider.Volume{}, fmt.Errorf("docker provider: volume %s: %w", name, err)
	}
	return provider.Volume{Name: name, Backend: Backend, Region: p.cfg.Region}, nil
}

// DeleteVolume removes the Docker volume; the engine refuses while a
// container uses it.
func (p *Provider) DeleteVolume(ctx context.Context, name string) error {
	_, err := p.c.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker provider: delete volume %s: %w", name, err)
	}
	return nil
}

// GetVolume is the Docker volume of that name, whoever made it (a
// registered volume, `volume_id`, need not be this owner's);
// provider.ErrNotFound when the engine has none.
func (p *Provider) GetVolume(ctx context.Context, name string) (provider.Volume, error) {
	if _, err := p.c.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err != nil {
		if cerrdefs.IsNotFound(err) {
			return provider.Volume{}, fmt.Errorf("docker provider: volume %s: %w", name, provider.ErrNotFound)
		}
		return provider.Volume{}, fmt.Errorf("docker provider: volume %s: %w", name, err)
	}
	return provider.Volume{Name: name, Backend: Backend, Region: p.cfg.Region}, nil
}

// EngineID is the ID of the engine that holds this provider's volumes: a
// node whose agent uses the same engine can mount them into containers.
func (p *Provider) EngineID(ctx context.Context) (string, error) {
	res, err := p.c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", fmt.Errorf("docker provider: engine info: %w", err)
	}
	return res.Info.ID, nil
}

// Volumes lists this owner's volumes.
func (p *Provider) Volumes(ctx context.Context) ([]provider.Volume, error) {
	f := client.Filters{}
	f.Add("label", LabelOwner+"="+p.cfg.Owner)
	res, err := p.c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker provider: volumes: %w", err)
	}
	out := make([]provider.Volume, 0, len(res.Items))
	for _, v := range res.Items {
		out = append(out, provider.Volume{Name: v.Name, Backend: Backend, Region: p.cfg.Region})
	}
	return out, nil
}

// Cleanup removes everything of this owner: containers, volumes, the
// network (tests call it in t.Cleanup; a server never does).
func (p *Provider) Cleanup(ctx context.Context) error {
	var errs []error
	ins, err := p.List(ctx)
	errs = append(errs, err)
	for _, in := range ins {
		errs = append(errs, p.Terminate(ctx, in.Key))
	}
	vols, err := p.Volumes(ctx)
	errs = append(errs, err)
	for _, v := range vols {
		errs = append(errs, p.DeleteVolume(ctx, v.Name))
	}
	if _, err := p.c.NetworkRemove(ctx, p.cfg.Network, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
