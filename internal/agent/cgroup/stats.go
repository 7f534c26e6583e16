package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Stats is what a job's group has used, read from the kernel's files
// (no library call: reading is all it takes, and the files are the same
// whatever made the group).
type Stats struct {
	// CPU is the CPU time the group's processes have used since it was
	// made (v1 cpuacct.usage, v2 cpu.stat usage_usec); HasCPU is false
	// where the host does not account it (no cpuacct hierarchy).
	CPU    time.Duration
	HasCPU bool
	// Memory is the working set: what is charged to the group less the
	// page cache the kernel may drop at once (inactive files), as docker
	// stats and the kubelet count it. Peak is the most ever charged (v1
	// memory.max_usage_in_bytes, v2 memory.peak where the kernel has it,
	// 0 where not; it includes page cache). Limit is the group's memory
	// limit, 0 for none. Usage is all that is charged, page cache
	// included (v1 memory.usage_in_bytes, v2 memory.current). HasMemory is
	// false without a memory controller.
	Memory    int64
	Usage     int64
	Peak      int64
	Limit     int64
	HasMemory bool
}

// noLimit is above any real memory limit: v1 reports "no limit" as a
// huge page-aligned number.
const noLimit = 1 << 62

// Stats reads the group's usage. A group that does not exist (the job has
// not started, or has ended) fails with an error that is os.ErrNotExist.
func (s Spec) Stats() (Stats, error) {
	var st Stats
	switch s.Version {
	case 1:
		return s.v1Stats()
	case 2:
		return s.v2Stats()
	}
	return st, fmt.Errorf("cgroup: version %d", s.Version)
}

// Peak is the most memory the group ever held (Stats' Peak) and whether
// the group has a memory controller that tells it. It reads that one file:
// a job's end needs no more (memory.stat makes the kernel add up every
// counter).
func (s Spec) Peak() (int64, bool) {
	var file string
	switch s.Version {
	case 1:
		if _, ok := s.Paths["memory"]; !ok {
			return 0, false
		}
		file = filepath.Join(s.dir("memory"), "memory.max_usage_in_bytes")
	case 2:
		file = filepath.Join(s.dir(""), "memory.peak")
	default:
		return 0, false
	}
	n, err := readUint(file)
	return int64(n), err == nil
}

func (s Spec) v1Stats() (Stats, error) {
	var st Stats
	found := false
	// cpuacct where the job's group spans it; else the cpu group, which
	// has the file where cpu and cpuacct share a mount.
	for _, c := range []string{v1Accounting, "cpu"} {
		if _, ok := s.Paths[c]; !ok {
			continue
		}
		n, err := readUint(filepath.Join(s.dir(c), "cpuacct.usage"))
		if errors.Is(err, os.ErrNotExist) {
			if exists(s.dir(c)) {
				found = true // the group exists, without the file
			}
			continue
		}
		if err != nil {
			return st, fmt.Errorf("cgroup: stats: %w", err)
		}
		st.CPU, st.HasCPU, found = time.Duration(n), true, true
		break
	}
	if _, ok := s.Paths["memory"]; ok {
		dir := s.dir("memory")
		usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return st, fmt.Errorf("cgroup: stats: %w", err)
		default:
			found, st.HasMemory, st.Usage = true, true, int64(usage)
			inactive, _ := readKey(filepath.Join(dir, "memory.stat"), "total_inactive_file")
			st.Memory = workingSet(usage, inactive)
			if peak, err := readUint(filepath.Join(dir, "memory.max_usage_in_bytes")); err == nil {
				st.Peak = int64(peak)
			}
			if lim, err := readUint(filepath.Join(dir, "memory.limit_in_bytes")); err == nil && lim < noLimit {
				st.Limit = int64(lim)
			}
		}
	}
	if !found {
		return st, fmt.Errorf("cgroup: stats of %s: %w", strings.Join(s.Dirs(), ", "), os.ErrNotExist)
	}
	return st, nil
}

func (s Spec) v2Stats() (Stats, error) {
	var st Stats
	dir := s.dir("")
	usec, err := readKey(filepath.Join(dir, "cpu.stat"), "usage_usec")
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("cgroup: stats of %s: %w", dir, os.ErrNotExist)
	}
	if err == nil {
		st.CPU, st.HasCPU = time.Duration(usec)*time.Microsecond, true
	}
	usage, err := readUint(filepath.Join(dir, "memory.current"))
	if err == nil {
		st.HasMemory, st.Usage = true, int64(usage)
		inactive, _ := readKey(filepath.Join(dir, "memory.stat"), "inactive_file")
		st.Memory = workingSet(usage, inactive)
		if peak, err := readUint(filepath.Join(dir, "memory.peak")); err == nil {
			st.Peak = int64(peak)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "memory.max")); err == nil {
			if lim, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && lim < noLimit {
				st.Limit = int64(lim) // "max": no limit
			}
		}
	}
	return st, nil
}

func workingSet(usage, inactive uint64) int64 {
	if inactive > usage {
		return 0
	}
	return int64(usage - inactive)
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
