package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrUnavailable says that this host gives the agent no usable cgroups; the
// wrapped message says why.
var ErrUnavailable = errors.New("cgroup: unavailable")

// Host is where this agent makes its jobs' groups: its own group in each
// hierarchy it uses, and the limits the kernel enforces there.
type Host struct {
	version int
	// root: v1, the directory where each controller is mounted as
	// root/<controller> (/sys/fs/cgroup); v2, the unified mount.
	root string
	// base: the agent's group, a path inside its hierarchy (v1: one per
	// controller; v2: key ""). Jobs' groups are made under it.
	base   map[string]string
	memory bool // the memory controller limits jobs
	swap   bool // memory+swap can be limited too (v1 memsw; v2 memory.swap.max)
	cpu    bool // the cpu controller can set a quota
	notes  []string
}

// sys names the kernel's files that Detect reads, so tests can point it at a
// fake tree.
type sys struct {
	mountinfo string // /proc/self/mountinfo
	cgroup    string // /proc/self/cgroup
	pid       int    // the process that may move itself (v2, see enableV2)
}

// v1Controllers are the v1 hierarchies a job's group spans: memory and cpu
// limit, freezer holds still what is being killed.
var v1Controllers = []string{"memory", "cpu", "freezer"}

// v1Accounting is the v1 hierarchy that measures a job's CPU time
// (cpuacct.usage, see Spec.Stats); a job's group spans it too where it is
// mounted beside the others. Where cpu and cpuacct share one mount, the cpu
// group has the file.
const v1Accounting = "cpuacct"

// Detect finds this process's cgroups. It fails, wrapping ErrUnavailable,
// when none can be used; a host that can group but not limit everything
// succeeds and says what is missing (Limits).
func Detect() (*Host, error) {
	return detect(sys{mountinfo: "/proc/self/mountinfo", cgroup: "/proc/self/cgroup", pid: os.Getpid()})
}

func detect(s sys) (*Host, error) {
	mounts, err := readMounts(s.mountinfo)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	own, err := readOwn(s.cgroup)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var unified *mount
	v1limits := false
	for i := range mounts {
		m := &mounts[i]
		switch m.fstype {
		case "cgroup2":
			if unified == nil {
				unified = m
			}
		case "cgroup":
			v1limits = v1limits || m.has("memory") || m.has("cpu")
		}
	}
	// v2 where it holds the controllers (a v2 host, or a hybrid one whose
	// v1 hierarchies are empty); v1 where the controllers are mounted there
	// (legacy, or hybrid as on systemd's default before v2); a v2 hierarchy
	// without controllers can still group and kill.
	switch {
	case unified != nil && (!v1limits || unified.rootHas("memory", "cpu")):
		return detectV2(s, unified, own)
	case v1limits:
		return detectV1(mounts, own)
	}
	return nil, fmt.Errorf("%w: no cgroup hierarchy is mounted", ErrUnavailable)
}

func detectV1(mounts []mount, own map[string]string) (*Host, error) {
	h := &Host{version: 1, base: map[string]string{}}
	for _, c := range append(slices.Clone(v1Controllers), v1Accounting) {
		// The accounting controller only measures (metrics): where it is
		// missing, nothing is lost worth a note.
		note := func(s string) {
			if c != v1Accounting {
				h.notes = append(h.notes, s)
			}
		}
		m := findV1(mounts, c)
		if m == nil {
			note(c + ": not mounted")
			continue
		}
		p, ok := own[c]
		if !ok {
			note(c + ": not in /proc/self/cgroup")
			continue
		}
		rel, err := filepath.Rel(m.root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			note(fmt.Sprintf("%s: own group %s is outside the mount's root %s", c, p, m.root))
			continue
		}
		// The library finds a controller at root/<name>: a mount named
		// otherwise ("cpu,cpuacct") needs the usual symlink beside it.
		root := filepath.Dir(m.point)
		if filepath.Base(m.point) != c && !sameFile(filepath.Join(root, c), m.point) {
			note(fmt.Sprintf("%s: mounted at %s without %s", c, m.point, filepath.Join(root, c)))
			continue
		}
		if h.root == "" {
			h.root = root
		} else if h.root != root {
			note(fmt.Sprintf("%s: mounted under %s, the others under %s", c, root, h.root))
			continue
		}
		h.base[c] = filepath.Join("/", rel)
	}
	if _, ok := h.base[v1Accounting]; ok && len(h.base) == 1 {
		delete(h.base, v1Accounting) // nothing to limit or kill with
	}
	if len(h.base) == 0 {
		return nil, fmt.Errorf("%w: cgroup v1: %s", ErrUnavailable, strings.Join(h.notes, "; "))
	}
	_, h.memory = h.base["memory"]
	_, h.cpu = h.base["cpu"]
	if h.memory {
		h.swap = exists(filepath.Join(h.dir("memory", h.base), "memory.memsw.limit_in_bytes"))
		if !h.swap {
			h.notes = append(h.notes, "swap: not accounted (memory.memsw missing)")
		}
	}
	return h, nil
}

func detectV2(s sys, m *mount, own map[string]string) (*Host, error) {
	p, ok := own[""]
	if !ok {
		return nil, fmt.Errorf("%w: cgroup v2: no 0:: line in %s", ErrUnavailable, s.cgroup)
	}
	rel, err := filepath.Rel(m.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("%w: cgroup v2: own group %s is outside the mount's root %s", ErrUnavailable, p, m.root)
	}
	base := filepath.Join("/", rel)
	h := &Host{version: 2, root: m.point, base: map[string]string{"": base}}
	dir := filepath.Join(m.point, base)
	avail := fields(filepath.Join(dir, "cgroup.controllers"))
	var want []string
	for _, c := range []string{"memory", "cpu"} {
		if slices.Contains(avail, c) {
			want = append(want, c)
		} else {
			h.notes = append(h.notes, c+": not delegated to "+base)
		}
	}
	enabled := want
	if err := h.enableV2(s.pid, want); err != nil {
		h.notes = append(h.notes, err.Error())
		enabled = fields(filepath.Join(dir, "cgroup.subtree_control"))
	}
	h.memory = slices.Contains(enabled, "memory")
	h.cpu = slices.Contains(enabled, "cpu")
	// memory.swap.max exists where swap is accounted; only a child group
	// has one to look at (Probe).
	h.swap = h.memory
	return h, nil
}

// v2Leaf is where the agent moves itself when its own group must hold no
// process (cgroup v2 lets a group either hold processes or hand controllers
// to its children). Shared by every agent in that group; never removed.
const v2Leaf = "berth-agents"

// enableV2 makes the controllers available to the children of the agent's
// group (cgroup.subtree_control). The kernel refuses that while the group
// holds processes, so on EBUSY the agent moves into a leaf of its own and
// tries again; if other processes share its group it gives up and says so.
func (h *Host) enableV2(pid int, want []string) error {
	dir := filepath.Join(h.root, h.base[""])
	ctl := filepath.Join(dir, "cgroup.subtree_control")
	var missing []string
	enabled := fields(ctl)
	for _, c := range want {
		if !slices.Contains(enabled, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	line := "+" + strings.Join(missing, " +")
	err := os.WriteFile(ctl, []byte(line), 0)
	if err == nil {
		return nil
	}
	leaf := filepath.Join(dir, v2Leaf)
	if mkErr := os.Mkdir(leaf, 0o755); mkErr != nil && !errors.Is(mkErr, os.ErrExist) {
		return fmt.Errorf("cannot enable %s for child groups of %s: %v; nor make %s: %v", strings.Join(missing, ", "), h.base[""], err, leaf, mkErr)
	}
	if mvErr := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); mvErr != nil {
		return fmt.Errorf("cannot enable %s for child groups of %s: %v; nor move into %s: %v", strings.Join(missing, ", "), h.base[""], err, leaf, mvErr)
	}
	if err := os.WriteFile(ctl, []byte(line), 0); err != nil {
		return fmt.Errorf("cannot enable %s for child groups of %s: %v (other processes share the agent's group: give the agent a group of its own, e.g. systemd Delegate=yes)",
			strings.Join(missing, ", "), h.base[""], err)
	}
	return nil
}

// Version is 1 or 2.
func (h *Host) Version() int { return h.version }

// Limits says, for people, what the kernel will enforce on this host's jobs
// and what it will not, and why.
func (h *Host) Limits() string {
	var on []string
	if h.memory {
		m := "memory"
		if !h.swap {
			m += " (swap not limited)"
		}
		on = append(on, m)
	}
	if h.cpu {
		on = append(on, "cpu")
	}
	s := strings.Join(on, ", ")
	if s == "" {
		s = "none"
	}
	s += fmt.Sprintf(" (cgroup v%d", h.version)
	if len(h.notes) > 0 {
		s += "; " + strings.Join(h.notes, "; ")
	}
	return s + ")"
}

// Spec describes the group of a job named name (unique on this host), with
// the limits this host can enforce of those asked for: memory in bytes and
// whole CPUs, 0 for none.
func (h *Host) Spec(name string, memory int64, cpus int) Spec {
	s := Spec{Version: h.version, Root: h.root, Paths: map[string]string{}}
	for c, p := range h.base {
		s.Paths[c] = filepath.Join(p, name)
	}
	if h.memory && memory > 0 {
		s.Memory, s.Swap = memory, h.swap
	}
	if h.cpu && cpus > 0 {
		s.CPUs = cpus
	}
	return s
}

// Groups lists the names of the groups under the agent's own whose name
// starts with prefix: what an earlier agent may have left.
func (h *Host) Groups(prefix string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for c := range h.base {
		ents, err := os.ReadDir(h.dir(c, h.base))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if n := e.Name(); e.IsDir() && strings.HasPrefix(n, prefix) && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// Probe makes a group called name with limits and removes it again: the way
// to learn that this process may (permissions, a read-only mount), and, on
// v2, whether swap is accounted.
func (h *Host) Probe(name string) error {
	s := h.Spec(name, 64<<20, 1)
	g, err := Create(s)
	if err != nil {
		_ = Remove(s)
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if h.version == 2 && h.memory {
		// v2 has memory.swap.max only where swap is accounted.
		h.swap = exists(filepath.Join(s.Dirs()[0], "memory.swap.max"))
		if !h.swap {
			h.notes = append(h.notes, "swap: not accounted (memory.swap.max missing)")
		}
	}
	if err := g.Delete(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

func (h *Host) dir(c string, paths map[string]string) string {
	if h.version == 1 {
		return filepath.Join(h.root, c, paths[c])
	}
	return filepath.Join(h.root, paths[""])
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	root, point, fstype string
	opts                []string // super options: the v1 controllers
}

func (m *mount) has(opt string) bool { return slices.Contains(m.opts, opt) }

// rootHas tells whether a v2 mount's root group offers any of cs.
func (m *mount) rootHas(cs ...string) bool {
	avail := fields(filepath.Join(m.point, "cgroup.controllers"))
	for _, c := range cs {
		if slices.Contains(avail, c) {
			return true
		}
	}
	return false
}

func findV1(mounts []mount, c string) *mount {
	for i := range mounts {
		if mounts[i].fstype == "cgroup" && mounts[i].has(c) {
			return &mounts[i]
		}
	}
	return nil
}

// readMounts reads the cgroup mounts of mountinfo: "ID PARENT MAJ:MIN ROOT
// POINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS".
func readMounts(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		sep := slices.Index(fs, "-")
		if sep < 5 || len(fs) <= sep+3 {
			continue
		}
		fstype := fs[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		out = append(out, mount{root: unescape(fs[3]), point: unescape(fs[4]), fstype: fstype, opts: strings.Split(fs[sep+3], ",")})
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readOwn reads /proc/self/cgroup: "ID:CONTROLLERS:PATH", one line per
// hierarchy; v2's line is "0::PATH" (key "").
func readOwn(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[strings.TrimPrefix(c, "name=")] = parts[2]
		}
	}
	return own, nil
}

func fields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
