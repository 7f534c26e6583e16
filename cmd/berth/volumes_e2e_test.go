//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// Network volumes on Docker as a cloud (issue 17): berth apply of a
// `type: volume` makes a Docker volume; a run that mounts it gets a node
// created with it, writes a file; a second run, on another node (the
// first went idle and was terminated), reads the file; berth volume
// delete removes the Docker volume.
func TestVolumeApplyRunsShareDataDelete(t *testing.T) {
	start := time.Now()
	c, _, p := cloudCluster(t, "1s")
	ctx := context.Background()
	t.Logf("%v: cluster up", time.Since(start))

	vol := c.writeConfig("vol.dstack.yml", "type: volume\nname: data\nbackend: docker\nsize: 1GB\n")
	out := c.berth("", "apply", "-y", "-f", vol)
	if out.code != 0 || !strings.Contains(out.stdout, "data") || !strings.Contains(out.stdout, "active") {
		t.Fatalf("apply of the volume: %s", out)
	}
	pv, err := p.Volumes(ctx)
	if err != nil || len(pv) != 1 {
		t.Fatalf("Docker volumes of the provider: %+v, %v; want one", pv, err)
	}
	list := c.mustBerth("volume", "list")
	for _, want := range []string{"NAME", "BACKEND", "STATUS", "data", "docker (local)", "1GB", "active"} {
		if !strings.Contains(list, want) {
			t.Errorf("berth volume list lacks %q:\n%s", want, list)
		}
	}

	run := func(name, cmd string) {
		t.Helper()
		file := c.writeConfig(name+".berth.yml", "type: task\nname: "+name+"\nfleets: [cloud]\nshell: sh\nresources: {cpu: 1, memory: 128MB}\nvolumes:\n  - name: data\n    path: /data\ncommands:\n  - "+cmd+"\n")
		if r := c.berth("", "apply", "-y", "--detach", "-f", file); r.code != 0 {
			t.Fatalf("apply %s: %s", name, r)
		}
		t.Logf("%v: %s applied", time.Since(start), name)
		if r := c.waitFinished(name, 3*time.Minute); r.Status != api.StatusDone {
			c.dumpLogs()
			t.Fatalf("run %s: %s (%s)", name, r.Status, r.Reason)
		}
	}
	run("writer", `echo "written by $(hostname)" > /data/f`)
	ins, err := p.List(ctx)
	if err != nil || len(ins) != 1 {
		t.Fatalf("instances after the writer: %+v, %v", ins, err)
	}
	writerNode := ins[0].Key
	// The writer's node goes idle and is terminated (idle_duration 1s):
	// the reader gets a node of its own, created with the volume.
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if ins, err := p.List(ctx); err == nil && len(ins) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the writer's node was not terminated")
		}
	}
	t.Logf("%v: writer's node gone", time.Since(start))
	run("reader", `cat /data/f`)
	t.Logf("%v: reader done", time.Since(start))
	c.waitLog("reader", "written by "+writerNode, 30*time.Second)

	var vs []api.Volume
	if err := json.Unmarshal([]byte(c.mustBerth("volume", "list", "--json")), &vs); err != nil || len(vs) != 1 || vs[0].Status != api.VolumeActive {
		t.Fatalf("berth volume list --json: %+v, %v", vs, err)
	}
	if out := c.mustBerth("volume", "delete", "-y", "data"); !strings.Contains(out, "Volume data deleted") {
		t.Errorf("berth volume delete: %s", out)
	}
	if pv, err := p.Volumes(ctx); err != nil || len(pv) != 0 {
		t.Fatalf("Docker volumes after delete: %+v, %v; want none", pv, err)
	}
	if ins, err := p.List(ctx); err != nil || len(ins) != 0 {
		t.Fatalf("instances after delete: %+v, %v; want none (a node with the volume is terminated with it)", ins, err)
	}
}
