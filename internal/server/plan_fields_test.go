package server

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The plan's "Not supported yet" list is exact both ways: retry, repos,
// files and resources.disk are acted on for native and container runs;
// instance volumes, ports and shm_size everywhere; network volumes in
// native runs only; python and nvcc on native runs.
func TestUnsupportedFields(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		want []string
	}{
		"native with what it does":      {"repos: [.]\nfiles: [a:b]\nretry: true\nresources: {disk: 10GB}\n", nil},
		"native volumes, ports, shm":    {"volumes: [/data:/data, vol:/v]\nports: [8000]\nresources: {shm_size: 1GB}\n", nil},
		"container volumes, ports, shm": {"image: busybox\nvolumes: [/data:/data]\nports: [8000]\nresources: {shm_size: 1GB}\n", nil},
		"container network volume":      {"image: busybox\nvolumes: [/data:/data, vol:/v]\n", []string{"volumes"}},
		"container repos, files, disk":  {"image: busybox\nrepos: [.]\nfiles: [a:b]\nresources: {disk: 10GB}\n", nil},
		"repo by URL":                   {"repos: [\"https://example.com/r.git\"]\n", nil},
		"python, nvcc, utilization":     {"python: \"3.12\"\nnvcc: true\nutilization_policy: {min_gpu_utilization: 10, time_window: 1h}\n", nil},
	} {
		t.Run(name, func(t *testing.T) {
			got := unsupportedFields(task(t, "type: task\ncommands: [\"true\"]\n"+tc.yaml))
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("unsupported (-want +got):\n%s", diff)
			}
		})
	}
}
