package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
)

// A job with `python: 3.X` runs the host's python3.X as python and
// python3 (first on its PATH); a version the node does not offer fails
// the job at its start, saying so; with an image given for the version
// and an engine, the job runs in that image instead.
func TestRuntimePython(t *testing.T) {
	h := hostPython3()
	if h[0] == "" {
		t.Skip("no python3 on PATH")
	}
	a := testAgent(t)
	a.detectRuntimes()
	if got := a.info.Runtimes[api.RuntimePython(h[0])]; got == "" {
		t.Fatalf("runtimes %v lack the host's python%s (%s)", a.info.Runtimes, h[0], h[1])
	}
	start := func(id int64, python string, cmds ...string) *localJob {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.startLocked(api.Assignment{JobID: id, RunID: 120, Alloc: api.Alloc{CPUs: 1}, Python: python, Commands: cmds,
			Env: []string{"PATH=/usr/bin:/bin"}})
		return a.jobs[id]
	}
	j := start(121, h[0], `python -c 'import sys; print("%d.%d" % sys.version_info[:2])'`, "python3 --version | cut -c1-6")
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if out, errs := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != h[0]+"\nPython\n" {
		t.Errorf("python %s: exit %+v, output %q %q", h[0], j.exit, out, errs)
	}
	j = start(122, "3.9", "echo ran")
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if _, err := exec.LookPath("python3.9"); err != nil && (j.exit.Reason != exitStartFailed || !strings.Contains(j.exit.Message, "this node offers no python3.9")) {
		t.Errorf("python 3.9 on a node without it: exit %+v", j.exit)
	}

	// An image for the version, on a node with an engine: the job runs in
	// it.
	containertest.Engine(t)
	a.cfg.PythonImages = map[string]string{"*": "no-such-image-{version}", h[0]: containertest.Image}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.detectContainers(ctx)
	a.detectRuntimes()
	if got, want := a.info.Runtimes[api.RuntimePython(h[0])], "image "+containertest.Image; got != want {
		t.Fatalf("python%s: %q, want %q", h[0], got, want)
	}
	if got, want := a.info.Runtimes["python3.13"], "image no-such-image-3.13"; got != want {
		t.Errorf("python3.13 by the * image: %q, want %q", got, want)
	}
	// The host has its python3 (h[1]); the image (busybox) has none, nor
	// bash: its sh runs the commands.
	j = start(123, h[0], "test -e "+h[1]+" || echo in the image", `echo "${BASH_VERSION:-sh}"`)
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if out, errs := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != "in the image\nsh\n" {
		t.Errorf("python %s by image: exit %+v, output %q %q", h[0], j.exit, out, errs)
	}
}

// nvcc: true needs nvcc on the node: on the agent's PATH or in CUDA's
// directory, which the job then finds on its PATH; without it the node
// offers none, and the job fails at its start.
func TestRuntimeNvcc(t *testing.T) {
	if _, err := exec.LookPath("nvcc"); err == nil {
		t.Skip("this host has nvcc on PATH")
	}
	cuda := t.TempDir()
	defer func(old string) { cudaBin = old }(cudaBin)
	cudaBin = cuda
	a := testAgent(t)
	a.detectRuntimes()
	if _, ok := a.info.Runtimes[api.RuntimeNvcc]; ok {
		t.Fatalf("nvcc offered with none installed: %v", a.info.Runtimes)
	}
	if err := os.WriteFile(cuda+"/nvcc", []byte("#!/bin/sh\necho nvcc here\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a.detectRuntimes()
	if got := a.info.Runtimes[api.RuntimeNvcc]; got != cuda+"/nvcc" {
		t.Fatalf("nvcc: %q, want %s/nvcc", got, cuda)
	}
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 131, RunID: 130, Alloc: api.Alloc{CPUs: 1}, Nvcc: true, Commands: []string{"nvcc"},
		Env: []string{"PATH=/usr/bin:/bin"}})
	j := a.jobs[131]
	a.mu.Unlock()
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if out, errs := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != "nvcc here\n" {
		t.Errorf("nvcc: exit %+v, output %q %q", j.exit, out, errs)
	}

	// --nvcc-image, on a node with an engine: the job runs in it.
	containertest.Engine(t)
	py := hostPython3()
	if py[1] == "" {
		t.Skip("no python3 on the host to tell the image from it")
	}
	a.cfg.NvccImage = containertest.Image
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.detectContainers(ctx)
	a.detectRuntimes()
	if got := a.info.Runtimes[api.RuntimeNvcc]; got != "image "+containertest.Image {
		t.Fatalf("nvcc with --nvcc-image: %q", got)
	}
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 132, RunID: 130, Alloc: api.Alloc{CPUs: 1}, Nvcc: true, Commands: []string{"test -e " + py[1] + " || echo in the nvcc image"}})
	j = a.jobs[132]
	a.mu.Unlock()
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if out, errs := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != "in the nvcc image\n" {
		t.Errorf("nvcc by image: exit %+v, output %q %q", j.exit, out, errs)
	}
}

// A `python:` run sent to an image runs its commands with bash when the
// image has /bin/bash (as dstack's images do) and with sh otherwise; a
// run that names its shell keeps it. The script as the container's sh
// runs it, here on the host (which has bash), and the busybox image
// without bash in TestRuntimePython.
func TestRuntimeImageBash(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	asg := api.Assignment{Python: "3.12", Commands: []string{`echo "${BASH_VERSION:+bash}" "$1"`}}
	if _, err := useRuntime(&asg, "python:3.12-slim", nil, "", nil); err != nil {
		t.Fatal(err)
	}
	if asg.Container == nil || asg.Container.Image != "python:3.12-slim" || asg.Container.Shell != "" {
		t.Fatalf("container %+v", asg.Container)
	}
	path := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(path, []byte(jobScript(asg)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", path, "arg").CombinedOutput()
	if err != nil || string(out) != "bash arg\n" {
		t.Errorf("the script under sh: %q %v, want bash to run it (with its arguments)", out, err)
	}
	named := api.Assignment{Python: "3.12", Shell: "sh", Commands: []string{"true"}}
	if _, err := useRuntime(&named, "python:3.12-slim", nil, "", nil); err != nil {
		t.Fatal(err)
	}
	if named.Container.Shell != "sh" || len(named.Commands) != 1 {
		t.Errorf("a run that names its shell: %+v, commands %q", named.Container, named.Commands)
	}
}

// With --python-venv a `python: 3.X` job on the host gets a fresh venv of
// its own, first on its PATH: python is the venv's, and pip installs
// into it (a wheel made in the job, offline), not into the host's
// Python; the node reports that it makes them.
func TestRuntimePythonVenv(t *testing.T) {
	h := hostPython3()
	if h[0] == "" {
		t.Skip("no python3 on PATH")
	}
	if err := exec.Command(h[1], "-c", "import ensurepip, venv").Run(); err != nil {
		t.Skip("the host's python3 cannot make venvs (python3-venv)")
	}
	a := testAgent(t)
	a.cfg.PythonVenv = true
	a.detectRuntimes()
	if got := a.info.Runtimes[api.RuntimeVenv]; got != venvMethod {
		t.Fatalf("runtimes %v: venv %q, want %q", a.info.Runtimes, got, venvMethod)
	}
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 131, RunID: 130, Alloc: api.Alloc{CPUs: 1}, Python: h[0], Env: []string{"PATH=/usr/bin:/bin"}, Commands: []string{
		`python -c 'import sys; print(sys.prefix == sys.base_prefix and "host" or "venv")'`,
		`test "$(command -v pip)" = "$VIRTUAL_ENV/bin/pip" && echo pip in venv`,
		// A wheel of one module, made here: pip installs it with no index.
		`python - <<'EOF'
import zipfile
with zipfile.ZipFile("berthdemo-0.1-py3-none-any.whl", "w") as z:
    z.writestr("berthdemo.py", "WORD = 'installed'\n")
    z.writestr("berthdemo-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: berthdemo\nVersion: 0.1\n")
    z.writestr("berthdemo-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: berth\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("berthdemo-0.1.dist-info/RECORD", "")
EOF`,
		`pip install --no-index --disable-pip-version-check -q ./berthdemo-0.1-py3-none-any.whl`,
		`python -c 'import berthdemo; print(berthdemo.WORD)'`,
	}})
	j := a.jobs[131]
	a.mu.Unlock()
	// Making a venv (ensurepip) costs seconds of CPU: minutes on a loaded
	// machine.
	for end := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		a.mu.Lock()
		done := j.exit != nil
		a.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(end) {
			out, errs := jobOutput(t, j.dir)
			t.Fatalf("the job did not end in 5 minutes; output %q %q", out, errs)
		}
	}
	if out, errs := jobOutput(t, j.dir); j.exit.ExitCode != 0 || out != "venv\npip in venv\ninstalled\n" {
		t.Errorf("python %s with a venv: exit %+v, output %q %q", h[0], j.exit, out, errs)
	}
	if err := exec.Command(h[1], "-c", "import berthdemo").Run(); err == nil {
		t.Error("the host's python3 imports the run's package: pip installed outside the run's venv")
	}
}
