package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/provider/docker"
)

// BenchmarkCloudScale measures a backend fleet on Docker as a cloud (issue
// 17): scale-up, from a run's submission to the fleet having no node until
// the run runs on a container node created for it; and idle scale-down,
// from the run's end until the node is terminated, less idle_duration (1 s).
//
//	go test -run '^$' -bench CloudScale -benchtime 3x ./internal/server
func BenchmarkCloudScale(b *testing.B) {
	containertest.Engine(b)
	dir := b.TempDir()
	bin := filepath.Join(dir, "berth")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/berth-hq/berth/cmd/berth")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building a static berth: %v\n%s", err, out)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	owner := "bench" + hex.EncodeToString(rb[:])
	ctx := context.Background()
	p, err := docker.New(ctx, docker.Config{Owner: owner, Image: containertest.Image, Binary: bin,
		Shapes: []docker.Shape{{Name: "small", CPUs: 1, Memory: 256 << 20, Price: 0.01}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Cleanup(cctx); err != nil {
			b.Errorf("cleanup: %v", err)
		}
		p.Close()
	})
	rules, err := policy.Parse("policy.yml", []byte(`providers:
  docker:
    image: `+containertest.Image+`
    shapes: [{name: small, cpus: 1, memory: 256MB}]
fleets:
  cloud:
    backend: {backends: [docker], nodes: 0..1, idle_duration: 1s}
`))
	if err != nil {
		b.Fatal(err)
	}
	h := newHarnessCfg(b, dir, "0.0.0.0:0", func(c *Config) {
		c.Rules, c.Providers, c.CloudEvery, c.NodeTimeout = rules, []provider.Provider{p}, 200*time.Millisecond, 5*time.Second
	})
	h.srv.SetCloudURL(h.http.URL)
	wait := func(what string, ok func() (bool, error)) {
		b.Helper()
		for end := time.Now().Add(3 * time.Minute); ; {
			done, err := ok()
			if err != nil {
				b.Fatal(err)
			}
			if done {
				return
			}
			if time.Now().After(end) {
				b.Fatalf("%s: timed out", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var up, down time.Duration
	b.ResetTimer()
	for i := range b.N {
		t := task(b, "type: task\nname: scale-"+strconv.Itoa(i)+"\nfleets: [cloud]\nshell: sh\ncommands: [\"sleep 1\"]\n")
		start := time.Now()
		run, err := h.c.Submit(ctx, api.SubmitRequest{Spec: t})
		if err != nil {
			b.Fatal(err)
		}
		ref := strconv.FormatInt(run.ID, 10)
		wait("running", func() (bool, error) {
			r, err := h.c.Run(ctx, ref)
			return err == nil && (r.Status == api.StatusRunning || r.Status.Finished()), err
		})
		up += time.Since(start)
		wait("done", func() (bool, error) {
			r, err := h.c.Run(ctx, ref)
			if err == nil && r.Status.Finished() && r.Status != api.StatusDone {
				return false, fmt.Errorf("run %s: %s (%s)", ref, r.Status, r.Reason)
			}
			return err == nil && r.Status == api.StatusDone, err
		})
		end := time.Now()
		wait("terminated", func() (bool, error) {
			ins, err := p.List(ctx)
			return len(ins) == 0, err
		})
		down += time.Since(end) - time.Second
	}
	b.StopTimer()
	b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "ms-scale-up")
	b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "ms-scale-down-past-idle")
}
