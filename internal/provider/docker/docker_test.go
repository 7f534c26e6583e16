package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/provider/docker"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// staticBerth builds the berth binary without cgo (the instances' image
// has no C library), once per test process; Go's build cache makes it
// quick after the first time.
func staticBerth(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berth-cloud-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "berth")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(goTool, "build", "-o", binPath, "github.com/berth-hq/berth/cmd/berth")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("building a static berth: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// newProvider is a provider whose owner is unique to the test, and whose
// every container, volume and network the test removes.
func newProvider(t *testing.T) *docker.Provider {
	t.Helper()
	containertest.Engine(t) // skips or fails with the reason there is no engine
	var b [4]byte
	_, _ = rand.Read(b[:])
	ctx := context.Background()
	p, err := docker.New(ctx, docker.Config{
		Owner: "t" + hex.EncodeToString(b[:]), Image: containertest.Image, Binary: staticBerth(t),
		Shapes: []docker.Shape{{Name: "small", CPUs: 1, Memory: 256 << 20, Price: 0.01}, {Name: "spot", CPUs: 1, Memory: 128 << 20, Price: 0.004, Spot: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Cleanup(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		p.Close()
	})
	return p
}

func TestCreateIsIdempotentAndTerminateRemoves(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	offers, err := p.Offers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	small := provider.Filter(offers, provider.Query{Spot: new(bool)})[0]
	if small.Instance != "small" || small.CPUs != 1 || small.Backend != "docker" {
		t.Fatalf("offer: %+v", small)
	}
	// The agent cannot reach this server: it keeps trying, the container runs.
	b := provider.Bootstrap{ServerURL: "http://127.0.0.1:9", Token: "x", NodeName: "cloud-a"}
	in, err := p.Create(ctx, "k1", small, b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Create(ctx, "k1", small, b)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != in.ID {
		t.Fatalf("a second Create of one key made another container: %s, then %s", in.ID, again.ID)
	}
	list, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Key != "k1" || list[0].Offer.Instance != "small" {
		t.Fatalf("List = %+v, want the one instance k1 of shape small", list)
	}
	got, err := p.Get(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != provider.StateRunning {
		t.Fatalf("instance state %s (%s), want running", got.State, got.Detail)
	}
	// Its limits are the offer's.
	e := containertest.Engine(t)
	out, err := exec.Command("docker", "inspect", "--format", "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}", in.ID).CombinedOutput()
	if want := fmt.Sprintf("%d %d", int64(1e9), 256<<20); err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("limits %q (%v), want %q", out, err, want)
	}
	// A container killed from outside is stopped: the server treats it as
	// an interruption.
	if err := p.Kill(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for got.State != provider.StateStopped && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if got, err = p.Get(ctx, "k1"); err != nil {
			t.Fatal(err)
		}
	}
	if got.State != provider.StateStopped {
		t.Fatalf("killed instance is %s", got.State)
	}
	if err := p.Terminate(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, "k1"); err != nil {
		t.Fatalf("terminating twice: %v", err)
	}
	if _, err := p.Get(ctx, "k1"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("Get after Terminate: %v, want ErrNotFound", err)
	}
	if _, err := e.Get(ctx, in.ID); !errors.Is(err, container.ErrNotFound) {
		t.Fatalf("the container outlived Terminate: %v", err)
	}
}

func TestVolumePersistsAcrossInstances(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	vol := "berth-test-vol-" + strings.TrimPrefix(t.Name(), "Test")
	vol = strings.ToLower(vol) + "-" + fmt.Sprint(time.Now().UnixNano())
	if _, err := p.CreateVolume(ctx, vol, 0); err != nil {
		t.Fatal(err)
	}
	vols, err := p.Volumes(ctx)
	if err != nil || len(vols) != 1 || vols[0].Name != vol {
		t.Fatalf("Volumes = %+v, %v", vols, err)
	}
	// Two instances in turn mount it, as two runs on two nodes would.
	ins := provider.Bootstrap{ServerURL: "http://127.0.0.1:9", Token: "x", NodeName: "vol-a", Volumes: []provider.VolumeMount{{Volume: vol, Path: "/data"}}}
	offer := provider.Offer{Backend: "docker", Instance: "small", CPUs: 1, Memory: 256 << 20}
	if _, err := p.Create(ctx, "v1", offer, ins); err != nil {
		t.Fatal(err)
	}
	exec1 := exec.Command("docker", "exec", "berth-cloud-"+ownerOf(t, p)+"-v1", "sh", "-c", "echo kept >/data/f")
	if out, err := exec1.CombinedOutput(); err != nil {
		t.Fatalf("write on the first instance: %v %s", err, out)
	}
	if err := p.Terminate(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	ins.NodeName = "vol-b"
	if _, err := p.Create(ctx, "v2", offer, ins); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "exec", "berth-cloud-"+ownerOf(t, p)+"-v2", "cat", "/data/f").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "kept" {
		t.Fatalf("read on the second instance: %q, %v", out, err)
	}
	if err := p.Terminate(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if vols, _ := p.Volumes(ctx); len(vols) != 0 {
		t.Fatalf("volume outlived DeleteVolume: %+v", vols)
	}
}

func ownerOf(t *testing.T, p *docker.Provider) string {
	t.Helper()
	return strings.TrimPrefix(p.Network(), "berth-cloud-")
}
