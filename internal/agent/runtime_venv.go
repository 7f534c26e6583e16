package agent

import (
	"path/filepath"
	"strings"

	"github.com/berth-hq/berth/internal/api"
)

// A virtual environment per run (issue 16): with `berth agent
// --python-venv`, a `python: 3.X` run that runs on the host (not in an
// image) gets a fresh venv in its own directory, made by the job itself
// (as its user, in its cgroup, before its commands: `python3.X -m venv`,
// the chosen Python being first on its PATH as python3) and first on its
// PATH, with VIRTUAL_ENV set: `pip install` then installs into the run's
// venv, as its user, and the host's Python is left as it was. The venv
// goes with the job's directory. A run in a container, a Slurm batch
// script and a run without `python:` get none.

// venvMethod is how the agent makes the venvs, as the node reports it.
const venvMethod = "python3.X -m venv"

// venvCreate, first of the job's commands, makes its venv unless it is
// there (a requeued attempt in the same directory keeps it).
const venvCreate = `[ -x "$VIRTUAL_ENV/bin/python" ] || python3 -m venv "$VIRTUAL_ENV" || { echo "berth: could not make the run's venv with $(command -v python3) -m venv in $VIRTUAL_ENV (on Debian: apt-get install python3-venv)" >&2; exit 1; }`

// venvFor says whether the job gets a venv: the agent makes them, and
// the job runs a host Python.
func (a *Agent) venvFor(asg api.Assignment, bins map[string]string) bool {
	return a.cfg.PythonVenv && asg.Container == nil && asg.Python != "" && bins[api.RuntimePython(asg.Python)] != "" && !isBatch(asg)
}

// withVenv puts the venv under base first on env's PATH, with
// VIRTUAL_ENV (after useRuntime, whose PATH it extends).
func withVenv(base string, env []string) []string {
	dir := filepath.Join(base, "venv")
	path := "/usr/local/bin:/usr/bin:/bin"
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			path = v
			break
		}
	}
	return append(env, "VIRTUAL_ENV="+dir, "PATH="+filepath.Join(dir, "bin")+":"+path)
}
