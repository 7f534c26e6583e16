package spec

import (
	"fmt"
	"strings"
)

// A dev environment (`type: dev-environment`) is a task whose commands are
// its `init`, then Berth's SSH endpoint (`berth ssh-host`, which serves
// `ssh RUN` and the IDE's Remote-SSH inside the job) until it is stopped,
// or until no SSH connection has been open for `inactivity_duration`.

// IDEs are the values of `ide`.
var IDEs = []string{"vscode", "cursor"}

// IsDevEnvironment reports whether t is a dev environment.
func (t *Task) IsDevEnvironment() bool { return t.Type == "dev-environment" }

// DevCommands are a dev environment's commands: init, then the SSH
// endpoint, run with the node's berth (BERTH_BIN, which the agent sets).
// In a container (`image:`) the job's shim serves SSH from the host
// (Berth's binary is not in the image): after init the job only stays up,
// and a stop's SIGTERM ends it at once (a shell as PID 1 would ignore it).
func (t *Task) DevCommands() []string {
	cmds := append([]string(nil), t.Init...)
	if t.Image != "" {
		return append(cmds, DevKeepAlive)
	}
	host := `exec "${BERTH_BIN:-berth}" ssh-host`
	if d := t.InactivityDuration; d != nil && *d != DurationOff && *d > 0 {
		host += fmt.Sprintf(" --inactivity %ds", int64(*d))
	}
	return append(cmds, host)
}

// DevKeepAlive is the last command of a dev environment in a container.
const DevKeepAlive = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`

// IDELink is the link that opens the dev environment name in its IDE,
// at dir ("" leaves the folder to the IDE).
func (t *Task) IDELink(name, dir string) string {
	scheme := "vscode"
	if t.IDE == "cursor" {
		scheme = "cursor"
	}
	link := scheme + "://vscode-remote/ssh-remote+" + name
	if dir != "" {
		link += "/" + strings.TrimPrefix(dir, "/")
	}
	return link
}

// checkDevEnvironment adds the errors of a dev environment's fields, and
// of their use in another type.
func (t *Task) checkDevEnvironment(add func(path, format string, args ...any)) {
	if !t.IsDevEnvironment() {
		for _, f := range []struct {
			name string
			set  bool
		}{{"ide", t.IDE != ""}, {"init", len(t.Init) > 0}, {"inactivity_duration", t.InactivityDuration != nil}, {"version", t.Version != ""}} {
			if f.set {
				add(f.name, "belongs to dev-environment configurations; add `type: dev-environment` (or remove it)")
			}
		}
		return
	}
	if t.IDE == "" {
		add("ide", "required for a dev environment: vscode or cursor")
	} else if m := checkEnum(t.IDE, IDEs); m != "" {
		add("ide", "%s", m)
	}
	if len(t.Commands) > 0 {
		add("commands", "a dev environment has no commands: put them under `init`, which runs before the environment is ready")
	}
	if t.Nodes > 1 {
		add("nodes", "a dev environment runs on one node")
	}
	if len(t.Groups) > 0 || t.Array != "" || t.Schedule != nil {
		add("type", "a dev environment has no groups, array or schedule")
	}
	if d := t.InactivityDuration; d != nil && *d != DurationOff && *d < 1 {
		add("inactivity_duration", "must be at least 1s, or off")
	}
}
