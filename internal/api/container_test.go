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

func TestCanRunContainers(t *testing.T) {
	for in, want := range map[string]bool{"docker 1.41": true, "none (no Docker engine at unix:///var/run/docker.sock: …)": false, "": false} {
		if got := (&NodeInfo{Containers: in}).CanRunContainers(); got != want {
			t.Errorf("CanRunContainers(%q) = %v, want %v", in, got, want)
		}
	}
}
