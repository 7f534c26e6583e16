package container

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	ctypes "github.com/moby/moby/api/types/container"
)

// The create request, without an engine: what a job's allocation becomes.
func TestConfigFromSpec(t *testing.T) {
	s := Spec{Image: "img", Env: []string{"A=1", "CUDA_VISIBLE_DEVICES=2,5"}, Memory: 1 << 30, NanoCPUs: int64(runtime.NumCPU()+8) * 1e9,
		GPUs: []string{"2", "5"}, Ports: []Port{{Container: 80, Host: 8080}}, ShmSize: 1 << 28}
	cfg, host, err := s.config()
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := []string{"A=1", "CUDA_VISIBLE_DEVICES=0,1", "NVIDIA_VISIBLE_DEVICES=2,5", "GPU_DEVICE_ORDINAL=0,1"}
	if diff := cmp.Diff(wantEnv, cfg.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	wantDev := []ctypes.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"2", "5"}, Capabilities: [][]string{{"gpu"}}}}
	if diff := cmp.Diff(wantDev, host.DeviceRequests); diff != "" {
		t.Errorf("device requests (-want +got):\n%s", diff)
	}
	if host.Memory != 1<<30 || host.MemorySwap != 1<<30 || host.ShmSize != 1<<28 {
		t.Errorf("memory %d swap %d shm %d", host.Memory, host.MemorySwap, host.ShmSize)
	}
	if host.NanoCPUs != int64(runtime.NumCPU())*1e9 {
		t.Errorf("NanoCPUs = %d: more CPUs than the host has must be capped", host.NanoCPUs)
	}
	if host.NetworkMode != "bridge" || len(host.PortBindings) != 1 || len(cfg.ExposedPorts) != 1 {
		t.Errorf("network %q, bindings %v, exposed %v", host.NetworkMode, host.PortBindings, cfg.ExposedPorts)
	}
	for p, b := range host.PortBindings {
		if p.Num() != 80 || b[0].HostPort != "8080" {
			t.Errorf("binding %v → %v, want 80 → 8080", p, b)
		}
	}
	if host.Init == nil || !*host.Init || host.LogConfig.Type != "json-file" {
		t.Errorf("init %v, log driver %q", host.Init, host.LogConfig.Type)
	}

	s = Spec{Image: "img", HostNetwork: true, Ports: []Port{{Container: 80}}}
	cfg, host, _ = s.config()
	if host.NetworkMode != "host" || len(host.PortBindings) != 0 || host.Memory != 0 || host.MemorySwap != 0 {
		t.Errorf("host network: mode %q, bindings %v, memory %d/%d", host.NetworkMode, host.PortBindings, host.Memory, host.MemorySwap)
	}
	if diff := cmp.Diff([]string{"NVIDIA_VISIBLE_DEVICES=void"}, cfg.Env); diff != "" {
		t.Errorf("a job without GPUs must see none (-want +got):\n%s", diff)
	}
}

func TestNewNameUnique(t *testing.T) {
	a, b := NewName("node/1 x", 7), NewName("node/1 x", 7)
	if a == b || !nameOK(a) {
		t.Errorf("names %q, %q: want two different valid names", a, b)
	}
}

func nameOK(s string) bool { return !nameUnsafe().MatchString(s) && len(s) > len("berth-") }
