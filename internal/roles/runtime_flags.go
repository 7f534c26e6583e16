package roles

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/spec"
)

// runtimeFlags name the images an agent runs `python:` and `nvcc:` runs
// in where it has a container engine (internal/agent/runtime.go).
type runtimeFlags struct {
	pythonImages pythonImages
	nvccImage    string
	pythonVenv   bool
}

func (f *runtimeFlags) add(cmd *cobra.Command, prefix string) {
	fs := cmd.Flags()
	fs.Var(&f.pythonImages, "python-image", prefix+"VERSION=IMAGE: run a configuration's `python: VERSION` (no image) in IMAGE where this node has a container engine, e.g. 3.12=python:3.12-slim, or *=python:{version}-slim for every version; repeatable (default: the host's python3.X, on the agent's PATH)")
	fs.BoolVar(&f.pythonVenv, "python-venv", false, prefix+"give each `python: VERSION` run on the host (not in an image) a fresh virtual environment in its directory (python3.X -m venv, first on its PATH), so that pip install works as the job's user without touching the host's Python")
	fs.StringVar(&f.nvccImage, "nvcc-image", "", prefix+"run a configuration's `nvcc: true` (no image) in this image where this node has a container engine, e.g. nvidia/cuda:12.4.1-devel-ubuntu22.04 (default: nvcc on the agent's PATH or in /usr/local/cuda/bin)")
}

// apply puts the flags in cfg.
func (f *runtimeFlags) apply(cfg *agent.Config) {
	if len(f.pythonImages) > 0 {
		cfg.PythonImages = maps.Clone(map[string]string(f.pythonImages))
	}
	cfg.NvccImage = f.nvccImage
	cfg.PythonVenv = f.pythonVenv
}

// pythonImages is --python-image: VERSION=IMAGE, repeatable, checked as
// it is read.
type pythonImages map[string]string

func (p *pythonImages) Set(kv string) error {
	v, img, ok := strings.Cut(kv, "=")
	if !ok || img == "" {
		return fmt.Errorf("want VERSION=IMAGE, e.g. 3.12=python:3.12-slim, not %q", kv)
	}
	if v != "*" && !slices.Contains(spec.PythonVersions, v) {
		return fmt.Errorf("version %q is not one of %s (or *)", v, strings.Join(spec.PythonVersions, ", "))
	}
	if *p == nil {
		*p = pythonImages{}
	}
	(*p)[v] = img
	return nil
}

func (p *pythonImages) String() string {
	var out []string
	for _, v := range slices.Sorted(maps.Keys(*p)) {
		out = append(out, v+"="+(*p)[v])
	}
	return strings.Join(out, ",")
}

func (p *pythonImages) Type() string { return "version=image" }
