package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/berth-hq/berth/internal/spec"
)

// defaultConfigs are the files `berth apply` reads without -f, in the
// working directory, first found wins: dstack's two names, then Berth's.
var defaultConfigs = []string{".dstack.yml", ".dstack.yaml", ".berth.yml", ".berth.yaml"}

// defaultConfig finds the configuration of the directory dir.
func defaultConfig(dir string) (string, error) {
	for _, name := range defaultConfigs {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return name, nil
		}
	}
	return "", fmt.Errorf("apply: no -f FILE, and no %s in %s", strings.Join(defaultConfigs, ", "), dir)
}

// applyOverrides are dstack's `apply` options that change the
// configuration: each set one replaces the file's value.
type applyOverrides struct {
	name, gpu, cpu, memory, disk     string
	maxDuration, retryDuration, spot string
	maxPrice                         float64
	fleets                           []string
	retry, noRetry, spotOn, onDemand bool
	envs                             []string
	flags                            *pflag.FlagSet
}

func (o *applyOverrides) register(f *pflag.FlagSet) {
	o.flags = f
	f.StringVarP(&o.name, "name", "n", "", "the run's name (overrides the file's)")
	f.StringArrayVarP(&o.envs, "env", "e", nil, "set an environment variable: NAME=value, or NAME to pass this shell's value (repeatable)")
	f.StringVar(&o.gpu, "gpu", "", "the GPUs each node needs, as resources.gpu: NAME:COUNT:MEMORY, e.g. A100:2 or 24GB..:1")
	f.StringVar(&o.cpu, "cpu", "", "the CPUs each node needs, as resources.cpu: [ARCH:]COUNT, e.g. 8 or 4..16")
	f.StringVar(&o.memory, "memory", "", "the memory each node needs, as resources.memory, e.g. 64GB or 32GB..")
	f.StringVar(&o.disk, "disk", "", "the disk each node needs, as resources.disk, e.g. 100GB..")
	f.StringVar(&o.maxDuration, "max-duration", "", "the run's time limit, e.g. 2h, or off")
	f.StringArrayVar(&o.fleets, "fleet", nil, "a fleet the run may use (repeatable; replaces the file's fleets)")
	f.Float64Var(&o.maxPrice, "max-price", 0, "the highest price per hour (stored; Berth's own nodes have no price)")
	f.BoolVar(&o.retry, "retry", false, "retry on every event (no-capacity, error, interruption) without a time limit")
	f.BoolVar(&o.noRetry, "no-retry", false, "do not retry (replaces the file's retry)")
	f.StringVar(&o.retryDuration, "retry-duration", "", "retry on every event for at most this long, e.g. 1h")
	f.StringVar(&o.spot, "spot-policy", "", "spot, on-demand or auto (stored; no effect on Berth's own nodes)")
	f.BoolVar(&o.spotOn, "spot", false, "the same as --spot-policy spot")
	f.BoolVar(&o.onDemand, "on-demand", false, "the same as --spot-policy on-demand")
}

// apply changes t as the options say; lookup gives the local environment
// (--env NAME). A bad value is an error naming its option.
func (o *applyOverrides) apply(t *spec.Task, lookup func(string) (string, bool)) error {
	set := func(name string) bool { return o.flags != nil && o.flags.Changed(name) }
	bad := func(flag string, err error) error {
		return fmt.Errorf("--%s: %s", flag, strings.TrimPrefix(err.Error(), "spec: "))
	}
	if o.name != "" {
		t.Name = o.name
	}
	for _, e := range o.envs {
		k, v, hasValue := strings.Cut(e, "=")
		if k == "" {
			return fmt.Errorf("--env %q: want NAME=value or NAME", e)
		}
		if !hasValue {
			local, ok := lookup(k)
			if !ok {
				return fmt.Errorf("--env %s: %s is not set in this shell (export it, or pass --env %s=value)", k, k, k)
			}
			v = local
		}
		t.SetEnv(k, v)
	}
	resources := set("gpu") || set("cpu") || set("memory") || set("disk")
	if resources && len(t.Groups) > 0 {
		return errors.New("--gpu, --cpu, --memory and --disk set the run's resources; this configuration has groups: set each group's resources in the file")
	}
	if set("gpu") {
		g, err := spec.ParseGPU(o.gpu)
		if err != nil {
			return bad("gpu", err)
		}
		t.Resources.GPU = g
	}
	if set("cpu") {
		c, err := spec.ParseCPU(o.cpu)
		if err != nil {
			return bad("cpu", err)
		}
		t.Resources.CPU = c
	}
	if set("memory") {
		r, err := spec.ParseByteRange(o.memory)
		if err != nil {
			return bad("memory", err)
		}
		t.Resources.Memory = &r
	}
	if set("disk") {
		r, err := spec.ParseByteRange(o.disk)
		if err != nil {
			return bad("disk", err)
		}
		t.Resources.Disk = &r
	}
	if set("max-duration") {
		if strings.EqualFold(strings.TrimSpace(o.maxDuration), "off") {
			t.MaxDuration = nil
		} else {
			d, err := spec.ParseDuration(o.maxDuration)
			if err != nil {
				return bad("max-duration", err)
			}
			t.MaxDuration = &d
		}
	}
	if set("fleet") {
		t.Fleets = append([]string(nil), o.fleets...)
	}
	if set("max-price") {
		if o.maxPrice < 0 {
			return fmt.Errorf("--max-price: %s must not be negative", strconv.FormatFloat(o.maxPrice, 'f', -1, 64))
		}
		p := o.maxPrice
		t.MaxPrice = &p
	}
	switch {
	case o.retry && o.noRetry, (o.retry || o.noRetry) && set("retry-duration"):
		return errors.New("--retry, --no-retry and --retry-duration: give one of them")
	case o.retry:
		t.Retry = &spec.Retry{OnEvents: append([]string(nil), spec.RetryEvents...)}
	case o.noRetry:
		t.Retry = nil
	case set("retry-duration"):
		d, err := spec.ParseDuration(o.retryDuration)
		if err != nil {
			return bad("retry-duration", err)
		}
		t.Retry = &spec.Retry{OnEvents: append([]string(nil), spec.RetryEvents...), Duration: &d}
	}
	n := 0
	for _, b := range []bool{set("spot-policy"), o.spotOn, o.onDemand} {
		if b {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("--spot, --on-demand and --spot-policy: give one of them")
	case o.spotOn:
		t.SpotPolicy = "spot"
	case o.onDemand:
		t.SpotPolicy = "on-demand"
	case set("spot-policy"):
		t.SpotPolicy = o.spot
	}
	return nil
}
