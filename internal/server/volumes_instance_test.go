package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// An instance volume (`node` + `path`): applying it records it at once
// (an unknown node is refused), the list shows where it is, a run that
// mounts it by name goes to that node only and writes into the host
// directory, a run that cannot be placed there is refused with why, and
// delete is refused while a run uses it, then forgets it and leaves the
// directory.
func TestInstanceVolume(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	startAgent(t, h, agentOpts{name: "iv-a", cpus: 2})
	stopB := startAgent(t, h, agentOpts{name: "iv-b", cpus: 2})
	dir := t.TempDir()

	_, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: volumeConfig(t, "type: volume\nname: cache\nnode: nowhere\npath: "+dir+"\n")})
	if err == nil || !strings.Contains(err.Error(), `node: "nowhere" is not a node of this cluster`) {
		t.Fatalf("apply on an unknown node: %v", err)
	}
	cfg := volumeConfig(t, "type: volume\nname: cache\nnode: iv-b\npath: "+dir+"\n")
	v, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != api.VolumeActive || v.Backend != "instance" || v.Node != "iv-b" || v.Path != dir || !slices.Equal(v.Attached, []string{"iv-b"}) {
		t.Fatalf("applied %+v, want an active instance volume on iv-b", v)
	}
	if again, err := h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: cfg}); err != nil || again.Path != dir {
		t.Fatalf("second apply: %+v, %v; want the same volume", again, err)
	}
	_, err = h.c.ApplyVolume(ctx, api.VolumeApplyRequest{Spec: volumeConfig(t, "type: volume\nname: cache\nnode: iv-a\npath: "+dir+"\n")})
	if apiErr := (*client.APIError)(nil); !errors.As(err, &apiErr) || apiErr.Status != 409 || !strings.Contains(err.Error(), "exists (iv-b:"+dir+")") {
		t.Fatalf("apply of a moved volume: %v, want a conflict", err)
	}

	const yaml = "type: task\nname: %s\ncommands: [\"echo hi > /data/out; hostname\"]\nvolumes: [{name: cache, path: /data}]\n"
	plan, err := h.c.Plan(ctx, api.SubmitRequest{Spec: task(t, strings.Replace(yaml, "%s", "wp", 1))})
	if err != nil || !slices.Contains(plan.Notes, "volume cache is an instance volume, directory "+dir+" on node iv-b: the run goes to that node only") {
		t.Fatalf("plan notes %q (%v): want where the volume pins the run", plan.Notes, err)
	}
	for _, row := range plan.Rows {
		if (row.Node == "iv-b") != (row.Fits == "now") {
			t.Errorf("plan row %+v: only iv-b fits", row)
		}
	}
	for i := 0; i < 3; i++ { // each on iv-b, though iv-a is as free
		r := submit(t, h, strings.Replace(yaml, "%s", "writer", 1))
		_, end := follow(t, h, r.ID)
		if end.Status != "done" || !slices.Equal(end.Nodes, []string{"iv-b"}) {
			t.Fatalf("run %d ended %s on %v, want done on iv-b", i, end.Status, end.Nodes)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(b) != "hi\n" {
		t.Fatalf("the host directory has out = %q (%v), want the run's line", b, err)
	}

	for what, y := range map[string]string{
		"is an instance volume, a directory on node iv-b only: a run of 2 nodes cannot mount it": "type: task\nnodes: 2\ncommands: [\"true\"]\nvolumes: [cache:/data]\n",
		"which the run's nodelist (iv-a) does not name alone":                                    "type: task\nnodelist: [iv-a]\ncommands: [\"true\"]\nvolumes: [cache:/data]\n",
	} {
		if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, y)}); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("submit of %q: %v, want %q", y, err, what)
		}
	}

	long := submit(t, h, "type: task\nname: holder\ncommands: [\"sleep 600\"]\nvolumes: [cache:/data]\n")
	list, err := h.c.Volumes(ctx, "")
	if err != nil || len(list) != 1 || !slices.Equal(list[0].UsedBy, []string{"holder"}) {
		t.Fatalf("list: %+v, %v; want cache used by holder", list, err)
	}
	if err := h.c.DeleteVolume(ctx, "cache", ""); err == nil || !strings.Contains(err.Error(), "volume cache is used by run holder") {
		t.Fatalf("delete while used: %v", err)
	}
	if err := h.srv.stop(long.ID, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "holder to end", func() bool {
		r, err := h.c.Run(ctx, "holder")
		return err == nil && r.Status != "running" && r.Status != "pending" && r.Status != "provisioning" && r.Status != "terminating"
	})

	// The node leaves the cluster: the volume stays (it holds data), the
	// list says why its runs cannot start, and a run that mounts it waits.
	stopB()
	waitFor(t, "iv-b offline", func() bool {
		ns, err := h.c.Nodes(ctx)
		return err == nil && slices.ContainsFunc(ns, func(n api.Node) bool { return n.Name == "iv-b" && n.Status == "offline" })
	})
	if err := h.c.DeleteNode(ctx, "iv-b"); err != nil {
		t.Fatal(err)
	}
	list, err = h.c.Volumes(ctx, "")
	if err != nil || len(list) != 1 || !strings.Contains(list[0].Message, "node iv-b is not in the cluster") {
		t.Fatalf("list after the node left: %+v, %v", list, err)
	}
	orphan := submit(t, h, "type: task\nname: orphan\ncommands: [\"true\"]\nvolumes: [cache:/data]\n")
	waitFor(t, "orphan to wait for its node (ReqNodeNotAvail)", func() bool {
		r, err := h.c.Run(ctx, "orphan")
		return err == nil && r.Status == "submitted" && r.Reason == "ReqNodeNotAvail"
	})
	if err := h.srv.stop(orphan.ID, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "orphan to end", func() bool {
		r, err := h.c.Run(ctx, "orphan")
		return err == nil && r.Status != "submitted"
	})

	// A delete waits for a submission being admitted (which may mount it).
	h.srv.vols.admit.RLock()
	deleted := make(chan error, 1)
	go func() { deleted <- h.c.DeleteVolume(ctx, "cache", "") }()
	time.Sleep(300 * time.Millisecond)
	if vs, err := h.st.ListVolumes(ctx, h.srv.projectID); err != nil || len(vs) != 1 {
		t.Errorf("the delete went ahead during a submission: %+v, %v", vs, err)
	}
	h.srv.vols.admit.RUnlock()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if list, err := h.c.Volumes(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("list after delete: %+v, %v", list, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err != nil {
		t.Fatalf("delete removed the host directory's data: %v", err)
	}
}
