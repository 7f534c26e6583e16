package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// `python:` and `nvcc:` of a run without an image (issue 16). The agent
// says at registration which it offers (api.NodeInfo.Runtimes), and the
// scheduler sends such a run only where they are:
//   - Python 3.X: an image given for that version (--python-image
//     3.12=python:3.12-slim, or *=python:{version}-slim for all) where
//     the node has a container engine; else the host's python3.X on the
//     agent's PATH (or its python3, when that is 3.X).
//   - nvcc: the --nvcc-image where the node has an engine; else nvcc on
//     the agent's PATH or in /usr/local/cuda/bin.
//
// A job that gets an image runs in it as a container job (on the node's
// network, as a process job would be), with `nvcc`'s image taking
// precedence (its own Python then runs). A job on the host gets a
// directory of links first on its PATH: python and python3 name the
// chosen python3.X, and nvcc's directory follows.

// bashIfThere, first in a script sh runs, runs the script with bash
// instead when the image has it ($0 is the script's path).
const bashIfThere = `if [ -z "${BASH_VERSION:-}" ] && [ -x /bin/bash ]; then exec /bin/bash "$0" "$@"; fi`

// cudaBin is where CUDA's installer puts nvcc when it is not on PATH.
var cudaBin = "/usr/local/cuda/bin"

// pythonImage is the image configured for Python v ("" none).
func (c *Config) pythonImage(v string) string {
	if img := c.PythonImages[v]; img != "" {
		return img
	}
	return strings.ReplaceAll(c.PythonImages["*"], "{version}", v)
}

// detectRuntimes fills a.info.Runtimes: call after detectContainers.
func (a *Agent) detectRuntimes() {
	engine := a.info.CanRunContainers()
	rt := map[string]string{}
	default3 := hostPython3()
	for _, v := range spec.PythonVersions {
		key := api.RuntimePython(v)
		if img := a.cfg.pythonImage(v); img != "" && engine {
			rt[key] = api.RuntimeImage + img
		} else if p, err := exec.LookPath("python" + v); err == nil {
			rt[key] = p
		} else if default3[0] == v {
			rt[key] = default3[1]
		}
	}
	if a.cfg.PythonVenv && len(rt) > 0 {
		for k, v := range rt {
			if strings.HasPrefix(k, "python") && api.RuntimeImageOf(v) == "" {
				rt[api.RuntimeVenv] = venvMethod // runtime_venv.go
				break
			}
		}
	}
	if a.cfg.NvccImage != "" && engine {
		rt[api.RuntimeNvcc] = api.RuntimeImage + a.cfg.NvccImage
	} else if p := hostNvcc(); p != "" {
		rt[api.RuntimeNvcc] = p
	}
	if len(rt) > 0 {
		a.info.Runtimes = rt
	}
}

// hostPython3 is the version and path of the host's python3 ("", "" when
// there is none).
func hostPython3() [2]string {
	p, err := exec.LookPath("python3")
	if err != nil {
		return [2]string{}
	}
	out, err := exec.Command(p, "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output()
	if err != nil {
		return [2]string{}
	}
	return [2]string{strings.TrimSpace(string(out)), p}
}

func hostNvcc() string {
	if p, err := exec.LookPath("nvcc"); err == nil {
		return p
	}
	if p := filepath.Join(cudaBin, "nvcc"); isExecutable(p) {
		return p
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runtimeOf decides how the node runs asg's `python:`/`nvcc:`: an image
// (the job becomes a container job), or the host binaries to put first on
// its PATH. A runtime the node does not offer (an agent restarted with
// other flags since the job was placed) is an error.
func (a *Agent) runtimeOf(asg api.Assignment) (image string, bins map[string]string, err error) {
	if asg.Container != nil || (asg.Python == "" && !asg.Nvcc) {
		return "", nil, nil
	}
	rt := a.info.Runtimes
	need := []string{}
	if asg.Nvcc {
		need = append(need, api.RuntimeNvcc)
	}
	if asg.Python != "" {
		need = append(need, api.RuntimePython(asg.Python))
	}
	for _, k := range need {
		if rt[k] == "" {
			return "", nil, fmt.Errorf("this node offers no %s (berth agent --python-image/--nvcc-image, or install it on the agent's PATH)", k)
		}
	}
	// One image runs the job: nvcc's when it needs nvcc and that is an
	// image, else Python's when that is one (and nvcc is not wanted).
	if img := api.RuntimeImageOf(rt[need[0]]); img != "" {
		return img, nil, nil
	}
	bins = map[string]string{}
	for _, k := range need {
		if api.RuntimeImageOf(rt[k]) != "" {
			return "", nil, fmt.Errorf("%s is offered only as an image here, and %s only on the host: give the node --nvcc-image", k, need[0])
		}
		bins[k] = rt[k]
	}
	return "", bins, nil
}

// useRuntime applies runtimeOf to a job about to start: a container for
// an image; for host binaries, a directory of links (under base, a
// directory the job's user can read) put first on the job's PATH.
func useRuntime(asg *api.Assignment, image string, bins map[string]string, base string, env []string) ([]string, error) {
	if image != "" {
		asg.Container = &api.Container{Image: image, Shell: asg.Shell, HostNetwork: true}
		if asg.Shell == "" && len(asg.Commands) > 0 {
			// dstack's images run commands with bash: so does a Python
			// image that has it (sh otherwise), unless the run says shell.
			asg.Commands = append([]string{bashIfThere}, asg.Commands...)
		}
		return env, nil
	}
	if len(bins) == 0 {
		return env, nil
	}
	dir := filepath.Join(base, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return env, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return env, err
	}
	first := []string{dir}
	if p := bins[api.RuntimePython(asg.Python)]; p != "" {
		for _, name := range []string{"python", "python3"} {
			link := filepath.Join(dir, name)
			if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
				return env, err
			}
			if err := os.Symlink(p, link); err != nil {
				return env, err
			}
		}
	}
	if p := bins[api.RuntimeNvcc]; p != "" {
		first = append(first, filepath.Dir(p))
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			path = v
			break
		}
	}
	return append(env, "PATH="+strings.Join(first, ":")+":"+path), nil
}
