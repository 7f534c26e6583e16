package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// Detect reads this host's CPUs, memory and GPUs. GPUs come from nvidia-smi
// when it is installed; a host without it reports none (declare them instead).
func Detect(ctx context.Context) (cpus int, memory int64, gpus []api.GPU, err error) {
	cpus = runtime.NumCPU()
	memory, err = memTotal("/proc/meminfo")
	if err != nil {
		return 0, 0, nil, err
	}
	gpus, err = nvidiaGPUs(ctx)
	return cpus, memory, gpus, err
}

func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("agent: memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("agent: memory: %s: %w", path, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("agent: memory: no MemTotal in %s", path)
}

// nvidiaGPUs asks nvidia-smi for the devices; no nvidia-smi means no NVIDIA GPUs.
func nvidiaGPUs(ctx context.Context) ([]api.GPU, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil, fmt.Errorf("agent: nvidia-smi: %w", err)
	}
	gpus, err := parseNvidiaSMI(out)
	if err != nil {
		return nil, err
	}
	// MIG instances, where a GPU is split, are devices of their own.
	list, err := exec.CommandContext(ctx, path, "-L").Output()
	if err != nil {
		return gpus, nil // older drivers: no MIG listing, whole GPUs only
	}
	return withMIG(gpus, list), nil
}

// withMIG replaces every GPU that `nvidia-smi -L` shows split into MIG
// instances by those instances: each is a device of its own (Slurm's MIG
// GRES), named after the GPU and its profile ("NVIDIA A100-SXM4-40GB MIG
// 3g.20gb"), with the profile's memory, reached by its MIG UUID. Indices are
// renumbered after the last whole GPU's, in listing order.
func withMIG(gpus []api.GPU, list []byte) []api.GPU {
	type mig struct {
		profile, uuid string
	}
	byGPU := map[int][]mig{}
	cur := -1
	for _, line := range strings.Split(string(list), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "GPU "):
			n, _, _ := strings.Cut(strings.TrimPrefix(t, "GPU "), ":")
			if i, err := strconv.Atoi(n); err == nil {
				cur = i
			}
		case strings.HasPrefix(t, "MIG ") && cur >= 0:
			f := strings.Fields(t)
			_, uuid, ok := strings.Cut(t, "UUID: ")
			if len(f) < 2 || !ok {
				continue
			}
			byGPU[cur] = append(byGPU[cur], mig{profile: f[1], uuid: strings.TrimSuffix(strings.TrimSpace(uuid), ")")})
		}
	}
	if len(byGPU) == 0 {
		return gpus
	}
	var out []api.GPU
	next := 0
	for _, g := range gpus {
		if len(byGPU[g.Index]) == 0 {
			out = append(out, g)
			next = max(next, g.Index+1)
		}
	}
	for _, g := range gpus {
		for _, m := range byGPU[g.Index] {
			out = append(out, api.GPU{Index: next, Vendor: g.Vendor, Name: g.Name + " MIG " + m.profile, Memory: migMemory(m.profile), UUID: m.uuid})
			next++
		}
	}
	return out
}

// migMemory reads the memory of a MIG profile ("3g.20gb" -> 20 GiB).
func migMemory(profile string) int64 {
	_, mem, ok := strings.Cut(profile, ".")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.ToLower(mem), "gb"), 10, 64)
	if err != nil {
		return 0
	}
	return n << 30
}

// parseNvidiaSMI reads `index, uuid, name, memory.total [MiB]` lines.
func parseNvidiaSMI(out []byte) ([]api.GPU, error) {
	var gpus []api.GPU
	for i, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		f := strings.Split(string(line), ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("agent: nvidia-smi line %d: want 4 fields, got %q", i+1, line)
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(f[0]))
		mib, err2 := strconv.ParseInt(strings.TrimSpace(f[3]), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("agent: nvidia-smi line %d: %q", i+1, line)
		}
		gpus = append(gpus, api.GPU{Index: idx, Vendor: "nvidia", UUID: strings.TrimSpace(f[1]), Name: strings.TrimSpace(f[2]), Memory: mib << 20})
	}
	return gpus, nil
}

// ParseGPUs reads a declared GPU list, like Slurm's manual gres.conf:
// "4" (four unnamed GPUs), "A100:4", "A100:80GB:4", "nvidia:A100:80GB:4".
// Several groups are separated by commas: "A100:80GB:4,T4:16GB:2".
func ParseGPUs(s string, parseBytes func(string) (int64, error)) ([]api.GPU, error) {
	var gpus []api.GPU
	if strings.TrimSpace(s) == "" || s == "0" {
		return nil, nil
	}
	for _, group := range strings.Split(s, ",") {
		g := api.GPU{Vendor: "nvidia"}
		count := -1
		for _, part := range strings.Split(strings.TrimSpace(group), ":") {
			switch {
			case part == "":
				return nil, fmt.Errorf("agent: --gpus %q: empty part", s)
			case isVendor(part):
				g.Vendor = strings.ToLower(part)
			case isDigits(part):
				n, _ := strconv.Atoi(part)
				count = n
			case strings.HasSuffix(strings.ToUpper(part), "B"):
				b, err := parseBytes(part)
				if err != nil {
					return nil, fmt.Errorf("agent: --gpus %q: %w", s, err)
				}
				g.Memory = b
			default:
				g.Name = part
			}
		}
		if count < 0 {
			count = 1
		}
		for range count {
			d := g
			d.Index = len(gpus)
			gpus = append(gpus, d)
		}
	}
	return gpus, nil
}

func isVendor(s string) bool {
	switch strings.ToLower(s) {
	case "nvidia", "amd", "intel", "tpu", "tenstorrent":
		return true
	}
	return false
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
