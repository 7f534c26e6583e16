package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// The fleets page shows a node split in blocks as `berth fleet` does
// (Jobs 1 (blocks 1/2 busy)), and the backend fleets in a table of their
// own: name, project, nodes min/target/max, instances, status, last error.
func TestFleetsPageBlocksAndBackendFleets(t *testing.T) {
	c := newCluster(t)
	hc := browserless(t)
	ctx := context.Background()
	a, err := agent.New(agent.Config{Server: c.url, Token: adminToken, Name: "blk", Fleet: "blk", DataDir: filepath.Join(t.TempDir(), "agent"), CPUs: 2, Blocks: 2,
		ShimCommand: []string{os.Args[0], "berth-shim"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LogTick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan struct{})
	go func() { a.Run(actx); close(adone) }()
	t.Cleanup(func() { acancel(); <-adone })
	run := c.submit(t, "type: task\nfleets: [blk]\nresources: {cpu: 1}\ncommands:\n  - sleep 60\n")
	t.Cleanup(func() { _, _ = c.admin.Stop(context.Background(), fmt.Sprint(run.ID), true) })
	waitFor(t, "one block of blk busy", func() bool {
		ns, err := c.admin.Nodes(ctx)
		if err != nil {
			return false
		}
		for _, n := range ns {
			if n.Name == "blk" && n.BusyBlocks == 1 && n.Jobs == 1 {
				return true
			}
		}
		return false
	})
	_, _, body := get(t, hc, c.url+"/ui/fleets", adminToken)
	if !strings.Contains(body, "Jobs 1 (blocks 1/2 busy)") {
		t.Errorf("the fleets page does not show blk's blocks:\n%s", body)
	}
	if strings.Contains(body, `id="backend-fleets"`) {
		t.Error("a backend-fleet table with no backend fleet")
	}

	f, err := spec.ParseFleet("dyn.yml", []byte("type: fleet\nname: dyn\nnodes: {min: 0, target: 1, max: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.ApplyFleet(ctx, api.FleetApplyRequest{Spec: f}); err != nil {
		t.Fatal(err)
	}
	_, _, body = get(t, hc, c.url+"/ui/fleets", adminToken)
	i := strings.Index(body, `<tr id="backend-dyn">`)
	if i < 0 {
		t.Fatalf("no row for the backend fleet dyn:\n%s", body)
	}
	row := body[i : i+strings.Index(body[i:], "</tr>")]
	for _, want := range []string{"<td>dyn</td>", "<td>main</td>", "<td>0/1/3</td>", "<td>0</td>", "<td>active</td>", ">none<"} {
		if !strings.Contains(row, want) {
			t.Errorf("dyn's row lacks %q: %s", want, row)
		}
	}
	for _, want := range []string{"Nodes min/target/max", "Instances", "Last error"} {
		if !strings.Contains(body, `<th scope="col">`+want+`</th>`) {
			t.Errorf("the backend-fleet table lacks the column %q", want)
		}
	}
}
