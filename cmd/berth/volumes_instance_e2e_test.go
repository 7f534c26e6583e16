//go:build linux

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container/containertest"
)

// A named instance volume (issue 17): berth apply of a `type: volume` with
// node and path records a directory of the node; a run without an image
// that mounts it by name writes into it, a container run reads it back
// (a bind mount), both on that node; berth volume list shows where it is;
// berth volume delete forgets it and leaves the directory.
func TestInstanceVolumeE2E(t *testing.T) {
	t.Parallel()
	containertest.Engine(t)
	if os.Geteuid() != 0 {
		t.Skip("a run without an image mounts volumes only under an agent running as root")
	}
	c := newCluster(t)
	node := fmt.Sprintf("iv-node-%d", time.Now().UnixNano()%1e9)
	c.startServer("--agent-name", node, "--cpus", "2")
	c.waitNodes(30*time.Second, node)
	dir := filepath.Join(t.TempDir(), "cache")

	vol := c.writeConfig("vol.yml", "type: volume\nname: cache\nnode: "+node+"\npath: "+dir+"\n")
	if r := c.berth("", "apply", "-y", "-f", vol); r.code != 0 || !strings.Contains(r.stdout, "active") {
		t.Fatalf("apply of the instance volume: %s", r)
	}
	list := c.mustBerth("volume", "list")
	if want := "instance (" + node + ":" + dir + ")"; !strings.Contains(list, want) {
		t.Errorf("berth volume list lacks %q:\n%s", want, list)
	}

	writer := c.writeConfig("writer.yml", "type: task\nname: iv-writer\nvolumes: [cache:/data]\ncommands:\n  - echo from the host run > /data/f\n  - echo wrote\n")
	if r := c.berth("", "apply", "-y", "-f", writer); r.code != 0 || r.stdout != "wrote\n" {
		t.Fatalf("the native writer: %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "from the host run\n" {
		t.Fatalf("the node's directory has %q (%v)", b, err)
	}
	reader := c.writeConfig("reader.yml", "type: task\nname: iv-reader\nimage: "+containertest.Image+"\nvolumes:\n  - name: cache\n    path: /data\n    read_only: true\ncommands:\n  - cat /data/f\n")
	r := c.berth("", "apply", "-y", "-f", reader)
	if r.code != 0 || r.stdout != "from the host run\n" {
		t.Fatalf("the container reader: %s", r)
	}
	if !strings.Contains(r.stderr, "volume cache is an instance volume, directory "+dir+" on node "+node) {
		t.Errorf("the plan does not say where the volume pins the run: %s", r)
	}

	if out := c.mustBerth("volume", "delete", "-y", "cache"); !strings.Contains(out, "Volume cache deleted") {
		t.Errorf("berth volume delete: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
		t.Errorf("the directory's data went with the volume: %v", err)
	}
}
