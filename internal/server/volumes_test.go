package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/provider/docker"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
	dockerclient "github.com/moby/moby/client"
)

// volumeProvider is a Docker provider of an owner of its own, whose
// volumes (and anything else) are removed when the test ends.
func volumeProvider(t *testing.T) *docker.Provider {
	t.Helper()
	containertest.Engine(t)
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	p, err := docker.New(context.Background(), docker.Config{Owner: "voltest" + hex.EncodeToString(rb[:]), Image: containertest.Image})
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

func providerVolumes(t *testing.T, p provider.Provider) []string {
	t.Helper()
	vs, err := p.Volumes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func volumeConfig(t *testing.T, yaml string) *spec.VolumeConfig {
	t.Helper()
	v, err := spec.ParseVolume("vol.yml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A volume's life on Docker as a cloud: a run that mounts it waits for it
// (WaitingForVolume); apply creates one Docker volume, once however often
// it is applied; a changed configuration is refused; delete is refused
// while the run is active, then removes the Docker volume and the row.
func TestVolumeCreateListDelete(t *testing.T) {
	p := volumeProvider(t)
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.Providers = []provider.Provider{p} })
	ctx := context.Background()

	run, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nname: uses-data\ncommands: [\"true\"]\nvolumes: [data:/data]\n")})
	if err != nil {
		t.Fatal(err)
	}
	ref := strconv.FormatInt(run.ID, 10)
	waitReason := func(want func(string) bool, what string) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r, err := h.c.Run(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if want(r.Reason) {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("run's reason %q, waited for %s", r.Reason, what)
			}
		}
	}
	waitReason(func(r string) bool { return r == ReasonWaitingForVolume }, ReasonWaitingForVolume)
	plan, err := h.c.Plan(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nvolumes: [data:/data]\n")})
	if err != nil || !slices.ContainsFunc(plan.Notes, func(n string) bool {
		return strings.HasPrefix(n, "volume data of project main is not active (no such volume): the run waits for it (WaitingForVolume)")
	}) {
		t.Fatalf("the plan's notes %q (%v) do not say the run waits for its volume", plan.Notes, err)
	}

	cfg := volumeConfig(t, "type: volume\nname: data\nbackend: docker\nsize: 1GB\n")
	vplan, err := h.c.PlanVolume(ctx, api.VolumeApplyRequest{Spec: cfg})
	if err != nil || vplan.Exists || vplan.Project != DefaultProject {
		t.Fatalf("plan of a new volume: %+v, %v", vplan, err)
	}
	v, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != api.VolumeActive || v.Size != 1<<30 || !strings.HasPrefix(v.VolumeID, "berth-data-") || v.Backend != "docker" {
		t.Fatalf("applied volume %+v, want active, 1GB, a provider name of its own", v)
	}
	again, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: cfg})
	if err != nil || again.VolumeID != v.VolumeID {
		t.Fatalf("second apply: %+v, %v; want the same volume", again, err)
	}
	if got := providerVolumes(t, p); len(got) != 1 || got[0] != v.VolumeID {
		t.Fatalf("the provider has %v, want exactly %s", got, v.VolumeID)
	}
	_, err = h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: volumeConfig(t, "type: volume\nname: data\nbackend: docker\nsize: 2GB\n")})
	if apiErr := (*client.APIError)(nil); !errors.As(err, &apiErr) || apiErr.Status != 409 || !strings.Contains(err.Error(), "not changed in place") {
		t.Fatalf("apply of a changed volume: %v, want a conflict", err)
	}
	_, err = h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: volumeConfig(t, "type: volume\nname: other\nbackend: aws\nsize: 2GB\n")})
	if err == nil || !strings.Contains(err.Error(), `backend: "aws" is not configured on this server (configured: docker`) {
		t.Fatalf("apply on an unknown backend: %v", err)
	}
	// Active now: the run waits for a node (none has the volume), not for it.
	waitReason(func(r string) bool { return r != ReasonWaitingForVolume }, "another reason")

	list, err := h.c.Volumes(ctx, "")
	if err != nil || len(list) != 1 || list[0].Name != "data" || len(list[0].UsedBy) != 1 || list[0].UsedBy[0] != "uses-data" {
		t.Fatalf("list: %+v, %v; want data, used by uses-data", list, err)
	}
	err = h.c.DeleteVolume(ctx, "data", "")
	if err == nil || !strings.Contains(err.Error(), "volume data is used by run uses-data") {
		t.Fatalf("delete while used: %v", err)
	}
	if _, err := h.c.Stop(ctx, ref, true); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := h.c.Run(ctx, ref)
		if err == nil && r.Status.Finished() {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the run did not stop: %+v, %v", r, err)
		}
	}
	if err := h.c.DeleteVolume(ctx, "data", ""); err != nil {
		t.Fatal(err)
	}
	if got := providerVolumes(t, p); len(got) != 0 {
		t.Fatalf("the provider still has %v", got)
	}
	if list, err := h.c.Volumes(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("list after delete: %+v, %v", list, err)
	}

	// A run in a container mounts only an active volume: refused.
	_, err = h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\nimage: busybox\ncommands: [\"true\"]\nvolumes: [data:/data]\n")})
	if err == nil || !strings.Contains(err.Error(), "a run with `image:` mounts a network volume only when the volume is active") {
		t.Fatalf("a container run with a network volume: %v", err)
	}
}

// A server killed between recording a volume and the provider's answer,
// or half-way through a delete, finishes the step at its next reconcile:
// nothing doubled (the create is by the recorded name), nothing leaked.
func TestVolumeReconcileAfterCrash(t *testing.T) {
	p := volumeProvider(t)
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.Providers = []provider.Provider{p} })
	ctx := context.Background()
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	name := "berth-crash-" + hex.EncodeToString(rb[:])
	pid := h.srv.projectID
	// As a server killed after the record: the provider was never asked.
	if err := h.st.PutVolume(ctx, &store.Volume{ProjectID: pid, Name: "crash", Backend: "docker", ProviderName: name, Size: 1 << 30, State: api.VolumeSubmitted}); err != nil {
		t.Fatal(err)
	}
	// As one killed during a delete: the provider still has it.
	if _, err := p.CreateVolume(ctx, name+"-gone", 0); err != nil {
		t.Fatal(err)
	}
	if err := h.st.PutVolume(ctx, &store.Volume{ProjectID: pid, Name: "gone", Backend: "docker", ProviderName: name + "-gone", State: api.VolumeDeleting}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second finds nothing to do
		if err := h.srv.reconcileVolumes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := h.st.ListVolumes(ctx, pid)
	if err != nil || len(vs) != 1 || vs[0].Name != "crash" || vs[0].State != api.VolumeActive {
		t.Fatalf("volumes after reconcile: %+v, %v; want crash active and gone gone", vs, err)
	}
	if got := providerVolumes(t, p); len(got) != 1 || got[0] != name {
		t.Fatalf("the provider has %v, want exactly %s", got, name)
	}
}

// auto_cleanup_duration: a volume no run mounts is deleted once that long
// has passed since a reconcile first saw it unused; one a run mounts is
// kept.
func TestVolumeAutoCleanup(t *testing.T) {
	p := volumeProvider(t)
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.Providers = []provider.Provider{p} })
	ctx := context.Background()
	for _, name := range []string{"temp", "kept"} {
		if _, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: volumeConfig(t, "type: volume\nname: "+name+"\nbackend: docker\nsize: 1GB\nauto_cleanup_duration: 1s\n")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nvolumes: [kept:/data]\n")}); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.reconcileVolumes(ctx); err != nil { // first seen unused
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := h.srv.reconcileVolumes(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err := h.c.Volumes(ctx, "")
	if err != nil || len(vs) != 1 || vs[0].Name != "kept" {
		t.Fatalf("volumes: %+v, %v; want only kept (a run mounts it)", vs, err)
	}
	if got := providerVolumes(t, p); len(got) != 1 || got[0] != vs[0].VolumeID {
		t.Fatalf("the provider has %v, want only %s", got, vs[0].VolumeID)
	}
}

// volume_id registers a volume the provider has, and only one: a name the
// engine does not know is refused at apply (and in the plan), changing
// nothing; a registered volume's delete forgets it and keeps the volume.
func TestVolumeRegisterChecksProvider(t *testing.T) {
	p := volumeProvider(t)
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.Providers = []provider.Provider{p} })
	ctx := context.Background()
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	name := "berth-reg-" + hex.EncodeToString(rb[:])
	missing := volumeConfig(t, "type: volume\nname: reg\nbackend: docker\nvolume_id: "+name+"\n")
	for _, plan := range []bool{true, false} {
		var err error
		if plan {
			_, err = h.c.PlanVolume(ctx, api.VolumeApplyRequest{Spec: missing})
		} else {
			_, err = h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: missing})
		}
		if apiErr := (*client.APIError)(nil); !errors.As(err, &apiErr) || apiErr.Status != 400 ||
			!strings.Contains(err.Error(), `volume_id: "`+name+`": backend docker has no volume of that name`) {
			t.Fatalf("plan %v of a missing volume_id: %v", plan, err)
		}
	}
	if vs, err := h.c.Volumes(ctx, ""); err != nil || len(vs) != 0 {
		t.Fatalf("a refused registration left %+v (%v)", vs, err)
	}
	if _, err := p.CreateVolume(ctx, name, 0); err != nil { // as made outside Berth (same owner, so the test's cleanup takes it)
		t.Fatal(err)
	}
	v, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: missing})
	if err != nil || v.Status != api.VolumeActive || !v.External || v.VolumeID != name {
		t.Fatalf("registration of an existing volume: %+v, %v", v, err)
	}
	if err := h.c.DeleteVolume(ctx, "reg", ""); err != nil {
		t.Fatal(err)
	}
	if got := providerVolumes(t, p); !slices.Equal(got, []string{name}) {
		t.Fatalf("the provider has %v after forgetting a registered volume, want %s kept", got, name)
	}
}

// auto_cleanup_duration counts from the volume's stored last use: a
// restarted server deletes a volume unused for longer than its duration
// before the restart, and keeps one used since.
func TestVolumeAutoCleanupAcrossRestart(t *testing.T) {
	p := volumeProvider(t)
	dir := t.TempDir()
	cfg := func(c *Config) { c.Providers = []provider.Provider{p} }
	h := newHarnessCfg(t, dir, "127.0.0.1:0", cfg)
	ctx := context.Background()
	for _, name := range []string{"stale", "fresh"} {
		if _, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: volumeConfig(t, "type: volume\nname: "+name+"\nbackend: docker\nsize: 1GB\nauto_cleanup_duration: 1h\n")}); err != nil {
			t.Fatal(err)
		}
	}
	run, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nvolumes: [fresh:/data]\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.reconcileVolumes(ctx); err != nil { // fresh is used now
		t.Fatal(err)
	}
	vs, err := h.st.ListVolumes(ctx, h.srv.projectID)
	if err != nil || len(vs) != 2 || vs[0].Name != "fresh" || time.Since(vs[0].LastUsed) > time.Minute || !vs[1].LastUsed.IsZero() {
		t.Fatalf("volumes after a reconcile: %+v, %v; want fresh's last use now, stale's none", vs, err)
	}
	if err := h.srv.stop(run.ID, true); err != nil {
		t.Fatal(err)
	}
	// stale was last used two hours ago, under a server since gone.
	stale := vs[1]
	stale.LastUsed = time.Now().Add(-2 * time.Hour)
	if err := h.st.PutVolume(ctx, stale); err != nil {
		t.Fatal(err)
	}
	h.close()
	h = newHarnessCfg(t, dir, "127.0.0.1:0", cfg)
	if err := h.srv.reconcileVolumes(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err = h.st.ListVolumes(ctx, h.srv.projectID)
	if err != nil || len(vs) != 1 || vs[0].Name != "fresh" {
		t.Fatalf("volumes after the restart: %+v, %v; want only fresh (stale unused for 2h, over its 1h)", vs, err)
	}
	if got := providerVolumes(t, p); !slices.Equal(got, []string{vs[0].ProviderName}) {
		t.Fatalf("the provider has %v, want only fresh's %s", got, vs[0].ProviderName)
	}
}

// A network volume of the Docker backend on a node the backend did not
// create: a container run on a node whose agent uses the provider's
// engine gets the Docker volume mounted by that engine; what one run
// writes the next reads. The run asks for that engine (a feature), and
// a configuration may not name an engine volume itself.
func TestContainerRunMountsEngineVolume(t *testing.T) {
	p := volumeProvider(t)
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.Providers = []provider.Provider{p} })
	ctx := context.Background()
	startAgent(t, h, agentOpts{name: "engine-node", cpus: 2})
	ns, err := h.c.Nodes(ctx)
	if err != nil || len(ns) != 1 || ns[0].EngineID == "" {
		t.Fatalf("nodes %+v (%v): want one with its engine's ID", ns, err)
	}
	if _, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: volumeConfig(t, "type: volume\nname: shared\nbackend: docker\nsize: 1GB\n")}); err != nil {
		t.Fatal(err)
	}
	const yaml = "type: task\nname: %s\nimage: " + containertest.Image + "\nvolumes: [shared:/data]\ncommands: [\"%s\"]\n"
	w := submit(t, h, fmt.Sprintf(yaml, "eng-writer", "echo kept > /data/f"))
	if out, end := follow(t, h, w.ID); end.Status != "done" {
		t.Fatalf("writer ended %s: %s", end.Status, out)
	}
	r := submit(t, h, fmt.Sprintf(yaml, "eng-reader", "cat /data/f"))
	if out, end := follow(t, h, r.ID); end.Status != "done" || out != "kept\n" {
		t.Fatalf("reader ended %s with %q, want kept", end.Status, out)
	}
	got, err := h.c.Run(ctx, "eng-reader")
	if err != nil || !slices.Equal(got.Nodes, []string{"engine-node"}) {
		t.Fatalf("reader %+v, %v", got, err)
	}
	// The file is in the provider's volume (not one the engine made up
	// for a name it did not know).
	vs, err := h.c.Volumes(ctx, "")
	if err != nil || len(vs) != 1 {
		t.Fatalf("volumes %+v, %v", vs, err)
	}
	dc, err := dockerclient.New(dockerclient.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	in, err := dc.VolumeInspect(ctx, vs[0].VolumeID, dockerclient.VolumeInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(in.Volume.Mountpoint, "f")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the provider's volume %s holds %q (%v), want the writer's line", vs[0].VolumeID, b, err)
	}

	forged := task(t, "type: task\nimage: "+containertest.Image+"\ncommands: [\"true\"]\nvolumes: [shared:/data]\n")
	forged.Volumes[0].EngineVolume = "someone-elses"
	if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: forged}); err == nil || !strings.Contains(err.Error(), "engine_volume: set by the server") {
		t.Fatalf("a configuration naming an engine volume: %v", err)
	}
}
