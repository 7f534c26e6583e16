package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/spec"
)

func TestContainerFor(t *testing.T) {
	if c := ContainerFor(&spec.Task{Commands: []string{"x"}}); c != nil {
		t.Errorf("a task without image: %+v, want nil", c)
	}
	shm := spec.Bytes(1 << 30)
	task := &spec.Task{Image: "img:1", Shell: "bash", User: "1000", Privileged: true,
		RegistryAuth: &spec.RegistryAuth{Username: "u", Password: "${{ secrets.p }}"},
		Volumes:      []spec.Volume{{InstancePath: "/mnt", Path: "/data", ReadOnly: true}},
		Ports:        []spec.PortMapping{{LocalPort: 8080, ContainerPort: 80}},
		Resources:    spec.Resources{SHMSize: &shm}}
	want := &Container{Image: "img:1", Shell: "bash", User: "1000", Privileged: true,
		RegistryAuth: &spec.RegistryAuth{Username: "u", Password: "${{ secrets.p }}"},
		Volumes:      []spec.Volume{{InstancePath: "/mnt", Path: "/data", ReadOnly: true}},
		Ports:        []spec.PortMapping{{LocalPort: 8080, ContainerPort: 80}}, ShmSize: 1 << 30}
	got := ContainerFor(task)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ContainerFor (-want +got):\n%s", diff)
	}
	// The server resolves secrets in its copy, not in the run's spec.
	got.RegistryAuth.Password = "resolved"
	if task.RegistryAuth.Password != "${{ secrets.p }}" {
		t.Error("ContainerFor shares RegistryAuth with the task")
	}
}

// A dev environment's inactivity_duration goes to its shim, which serves
// its SSH endpoint; a task's is not there.
func TestContainerForDevEnvironment(t *testing.T) {
	hour, off := spec.Duration(3600), spec.DurationOff
	for name, tc := range map[string]struct {
		task *spec.Task
		want int64
	}{
		"dev environment": {&spec.Task{Type: "dev-environment", Image: "img", InactivityDuration: &hour}, 3600},
		"off":             {&spec.Task{Type: "dev-environment", Image: "img", InactivityDuration: &off}, 0},
		"unset":           {&spec.Task{Type: "dev-environment", Image: "img"}, 0},
	} {
		if got := ContainerFor(tc.task).SSHInactivity; got != tc.want {
			t.Errorf("%s: SSHInactivity %d, want %d", name, got, tc.want)
		}
	}
}

func TestCanRunContainers(t *testing.T) {
	for in, want := range map[string]bool{"docker 1.41": true, "none (no Docker engine at unix:///var/run/docker.sock: …)": false, "": false} {
		if got := (&NodeInfo{Containers: in}).CanRunContainers(); got != want {
			t.Errorf("CanRunContainers(%q) = %v, want %v", in, got, want)
		}
	}
}
