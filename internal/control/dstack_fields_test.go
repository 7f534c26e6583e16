package control

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// dstack's groups[].ports: a group's container jobs publish the group's
// ports, the others the run's.
func TestGroupPorts(t *testing.T) {
	c := New(Config{})
	tk, err := spec.Parse("g.yml", []byte(`type: task
image: busybox
ports: [9000]
groups:
  - name: server
    ports: [8000, "8443:443"]
    commands: [serve]
  - name: workers
    nodes: 2
    commands: [work]
`))
	if err != nil {
		t.Fatal(err)
	}
	rs := c.newRunState(store.Run{ID: 1}, tk, "u", "p")
	for k := range 3 {
		rs.jobs = append(rs.jobs, &jobState{run: rs, rec: store.Job{Num: k}})
	}
	want := []string{"[{8000 8000} {8443 443}]", "[{9000 9000}]", "[{9000 9000}]"}
	for k, js := range rs.jobs {
		a := c.assignment(js, []string{"n0", "n1", "n2"}, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
		if a.Container == nil {
			t.Fatalf("job %d: no container", k)
		}
		if got := fmt.Sprint(a.Container.Ports); got != want[k] {
			t.Errorf("job %d publishes %s, want %s", k, got, want[k])
		}
	}
}

// Valid dstack fields are read: `dstack: true`, groups[].ports (checked as
// the run's ports are); a preset is refused saying what it is.
func TestDstackFields(t *testing.T) {
	tk, err := spec.Parse("d.yml", []byte("type: task\ndstack: true\ncommands: [x]\n"))
	if err != nil || !tk.Dstack {
		t.Errorf("dstack: true: %v, %+v", err, tk)
	}
	if _, err := spec.Parse("d.yml", []byte("type: task\ngroups:\n  - commands: [x]\n    ports: [70000]\n")); err == nil || !strings.Contains(err.Error(), "groups[0].ports[0]") {
		t.Errorf("a group's port out of range: %v", err)
	}
	if _, err := spec.Parse("p.yml", []byte("type: preset\nname: qwen\n")); err == nil || !strings.Contains(err.Error(), "search for a model deployment") {
		t.Errorf("type: preset: %v", err)
	}
}
