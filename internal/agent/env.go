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

// hiddenEnv are the agent's own variables that no job may see: its
// credential and where to find one (BERTH_HOME holds the client
// configuration, with a token). A job gets the server's URL and its run's
// own credential instead (jobCredEnv).
var hiddenEnv = map[string]bool{"BERTH_TOKEN": true, "BERTH_URL": true, "BERTH_HOME": true, "BERTH_JOB_TOKEN": true,
	"BERTH_METRICS_TOKEN": true, "BERTH_SOCKET": true}

// jobCredEnv is what a job needs to reach the server about its own run:
// the server's URL and the run's credential (srun's steps, the step
// hosts), and the node's socket for its user's other calls.
func (a *Agent) jobCredEnv(asg api.Assignment) []string {
	env := []string{"BERTH_URL=" + a.cfg.Server}
	// BERTH_BIN is the node's berth, for the commands a job runs of it
	// (a dev environment's `berth ssh-host`).
	if exe, err := os.Executable(); err == nil {
		env = append(env, "BERTH_BIN="+exe)
	}
	if asg.JobToken != "" {
		env = append(env, "BERTH_JOB_TOKEN="+asg.JobToken)
	}
	if a.cfg.Socket != "" && a.cfg.Socket != "none" {
		env = append(env, "BERTH_SOCKET="+a.cfg.Socket)
	}
	return env
}

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
