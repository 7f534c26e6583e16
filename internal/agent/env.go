package agent

import (
	"os"
	"strings"

	"github.com/berth-hq/berth/internal/api"
)

// script joins a run's commands into one bash script that stops at the first
// failing command, as dstack runs them.
func script(commands []string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, c := range commands {
		b.WriteString(c)
		if !strings.HasSuffix(c, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// hiddenEnv are the agent's own variables that no job may see.
var hiddenEnv = map[string]bool{"BERTH_TOKEN": true, "BERTH_URL": true}

// jobEnv is the agent's environment (like Slurm's --export=ALL from the node)
// without its secrets, then the agent's own variables for the job (extra),
// then what the server set for the job, which wins.
func jobEnv(asg api.Assignment, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !hiddenEnv[name] {
			env = append(env, kv)
		}
	}
	return append(append(env, extra...), asg.Env...)
}
