package server

import (
	"slices"
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

// The plan says which Python runs a `python:` run on each node, and that
// it runs in a fresh venv where the node's agent makes them (a node
// whose Python is an image brings its own).
func TestPlanSaysVenv(t *testing.T) {
	nodes := []api.Node{
		{NodeInfo: api.NodeInfo{Name: "n2", Runtimes: map[string]string{"python3.12": "image python:3.12-slim", api.RuntimeVenv: "python3.X -m venv"}}},
		{NodeInfo: api.NodeInfo{Name: "n1", Runtimes: map[string]string{"python3.12": "/usr/bin/python3.12", api.RuntimeVenv: "python3.X -m venv"}}},
		{NodeInfo: api.NodeInfo{Name: "n3", Runtimes: map[string]string{"python3.12": "/usr/bin/python3.12"}}},
	}
	got := runtimeNotes(task(t, "type: task\npython: \"3.12\"\ncommands: [\"true\"]\n"), nodes)
	want := []string{
		"on n1: python3.12: /usr/bin/python3.12 in a fresh venv of the run (python3.12 -m venv)",
		"on n2: python3.12: image python:3.12-slim",
		"on n3: python3.12: /usr/bin/python3.12",
	}
	if !slices.Equal(got, want) {
		t.Errorf("notes:\n%q\nwant\n%q", got, want)
	}
}
