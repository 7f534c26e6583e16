package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDevEnvironment(t *testing.T) {
	got, err := Parse("dev.yml", []byte(`type: dev-environment
name: box
ide: cursor
init:
  - pip install -r requirements.txt
inactivity_duration: 2h
ports: [8000]
`))
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsDevEnvironment() || got.IDE != "cursor" || got.InactivityDuration == nil || *got.InactivityDuration != 7200 {
		t.Errorf("parsed %+v", got)
	}
	want := []string{"pip install -r requirements.txt", `exec "${BERTH_BIN:-berth}" ssh-host --inactivity 7200s`}
	if diff := cmp.Diff(want, got.DevCommands()); diff != "" {
		t.Errorf("DevCommands (-want +got):\n%s", diff)
	}
	if link := got.IDELink("box", "/w/work"); link != "cursor://vscode-remote/ssh-remote+box/w/work" {
		t.Errorf("IDELink: %s", link)
	}
}

// In a container the job's shim serves SSH: after init the job only stays
// up.
func TestDevEnvironmentInContainer(t *testing.T) {
	got, err := Parse("dev.yml", []byte("type: dev-environment\nide: vscode\nimage: python:3.12\ninit: [make]\ninactivity_duration: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"make", DevKeepAlive}, got.DevCommands()); diff != "" {
		t.Errorf("DevCommands (-want +got):\n%s", diff)
	}
}

func TestDevEnvironmentErrors(t *testing.T) {
	tests := map[string]struct {
		yaml, want string
	}{
		"no ide":           {"type: dev-environment\n", "dev.yml:1:1: ide: required for a dev environment: vscode or cursor"},
		"unknown ide":      {"type: dev-environment\nide: emacs\n", "dev.yml:2:6: ide:"},
		"commands":         {"type: dev-environment\nide: vscode\ncommands: [ls]\n", "commands: a dev environment has no commands: put them under `init`"},
		"init in a task":   {"type: task\ncommands: [ls]\ninit: [ls]\n", "init: belongs to dev-environment configurations"},
		"nodes":            {"type: dev-environment\nide: vscode\nnodes: 2\n", "nodes: a dev environment runs on one node"},
		"still refused":    {"type: fleet\n", `"fleet" configurations are not supported`},
		"inactivity < 1s":  {"type: dev-environment\nide: vscode\ninactivity_duration: 0s\n", "inactivity_duration:"},
		"ide in a service": {"type: task\ncommands: [ls]\nide: vscode\n", "ide: belongs to dev-environment"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("dev.yml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
