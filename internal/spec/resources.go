package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// CPUSpec is the CPU requirement per node.
type CPUSpec struct {
	Arch  string   `json:"arch,omitempty"` // x86 or arm; empty = any
	Count IntRange `json:"count"`
}

// GPUSpec is the accelerator requirement per node.
type GPUSpec struct {
	Vendor            string     `json:"vendor,omitempty"`       // nvidia, amd, tpu, intel, tenstorrent
	Names             []string   `json:"names,omitempty"`        // model names as written, any of them
	Memory            *ByteRange `json:"memory,omitempty"`       // per GPU
	TotalMemory       *ByteRange `json:"total_memory,omitempty"` // summed over the node's GPUs
	ComputeCapability string     `json:"compute_capability,omitempty"`
	Count             IntRange   `json:"count"`
}

// Resources is what one node of the run needs.
type Resources struct {
	CPU     *CPUSpec   `json:"cpu,omitempty"`
	Memory  *ByteRange `json:"memory,omitempty"`
	GPU     *GPUSpec   `json:"gpu,omitempty"`
	Disk    *ByteRange `json:"disk,omitempty"`
	SHMSize *Bytes     `json:"shm_size,omitempty"`
}

// GPUVendors are the accelerator vendors a configuration may name.
var GPUVendors = []string{"nvidia", "amd", "tpu", "intel", "tenstorrent"}

// CPUArchs are the CPU architectures a configuration may name.
var CPUArchs = []string{"x86", "arm"}

// vendorOf maps a word to a vendor; dstack also spells TPUs "google".
func vendorOf(word string) (string, bool) {
	w := strings.ToLower(word)
	if w == "google" {
		return "tpu", true
	}
	if slices.Contains(GPUVendors, w) {
		return w, true
	}
	return "", false
}

// problem is a message about a field, the path relative to the value checked.
type problem struct{ path, msg string }

// ParseGPU reads dstack's GPU shorthand,
// `<vendor>:<names>:<memory range>:<count range>`, each part optional and in
// any order: "A100:80GB:2", "nvidia:1..8", "24GB..40GB:2", "A10G,A100", "2".
// A part is a vendor if it is one of GPUVendors, names if it starts with a
// letter, a memory range if it carries a unit, and a count otherwise. The
// count defaults to exactly 1.
func ParseGPU(s string) (*GPUSpec, error) {
	v := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	if v == "" {
		return nil, invalid("empty GPU spec")
	}
	g := &GPUSpec{}
	var seen [4]string // vendor, names, memory, count
	for part := range strings.SplitSeq(v, ":") {
		if part == "" {
			return nil, invalid("GPU spec %q has an empty part (look for \"::\" or a leading/trailing \":\")", s)
		}
		kind := 0
		switch {
		case isVendor(part):
			kind = 0
		case unicode.IsLetter([]rune(part)[0]):
			kind = 1
		case strings.IndexFunc(part, unicode.IsLetter) >= 0:
			kind = 2
		default:
			kind = 3
		}
		if seen[kind] != "" {
			what := [...]string{"vendors", "name lists", "memory ranges", "counts"}[kind]
			return nil, invalid("GPU spec %q has two %s (%q and %q)", s, what, seen[kind], part)
		}
		seen[kind] = part
		switch kind {
		case 0:
			g.Vendor, _ = vendorOf(part)
		case 1:
			g.Names = strings.Split(part, ",")
		case 2:
			r, err := ParseByteRange(part)
			if err != nil {
				return nil, invalid("GPU memory %q: %s", part, msgOf(err))
			}
			g.Memory = &r
		case 3:
			r, err := ParseIntRange(part)
			if err != nil {
				return nil, invalid("GPU count %q: %s", part, msgOf(err))
			}
			g.Count = r
		}
	}
	if seen[3] == "" {
		g.Count = exactly(1)
	}
	if ps := g.check(); len(ps) > 0 {
		return nil, invalid("GPU spec %q: %s", s, ps[0].msg)
	}
	return g, nil
}

func isVendor(s string) bool { _, ok := vendorOf(s); return ok }

// msgOf is the bare message of an error from this package's value parsers.
func msgOf(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Msg
	}
	return err.Error()
}

func exactly(n int) IntRange { return IntRange{Min: n, Max: &n} }

// check validates a GPUSpec however it was built.
func (g *GPUSpec) check() []problem {
	var ps []problem
	if g.Vendor != "" && !slices.Contains(GPUVendors, g.Vendor) {
		ps = append(ps, problem{"vendor", checkEnum(g.Vendor, GPUVendors)})
	}
	seen := map[string]bool{}
	for i, n := range g.Names {
		p := fmt.Sprintf("names[%d]", i)
		switch {
		case n == "":
			ps = append(ps, problem{p, "empty GPU name"})
		case strings.ContainsFunc(n, func(r rune) bool { return unicode.IsSpace(r) || r == ':' || r == ',' }):
			ps = append(ps, problem{p, fmt.Sprintf("invalid GPU name %q", n)})
		case !unicode.IsLetter([]rune(n)[0]):
			ps = append(ps, problem{p, fmt.Sprintf("GPU name %q must start with a letter", n)})
		case seen[strings.ToLower(n)]:
			ps = append(ps, problem{p, fmt.Sprintf("GPU name %q is listed twice", n)})
		}
		seen[strings.ToLower(n)] = true
	}
	if g.Memory != nil {
		if m := g.Memory.check(); m != "" {
			ps = append(ps, problem{"memory", m})
		}
	}
	if g.TotalMemory != nil {
		if m := g.TotalMemory.check(); m != "" {
			ps = append(ps, problem{"total_memory", m})
		}
	}
	if g.ComputeCapability != "" && !validComputeCapability(g.ComputeCapability) {
		ps = append(ps, problem{"compute_capability", fmt.Sprintf("invalid compute capability %q (expected MAJOR.MINOR, e.g. 8.0)", g.ComputeCapability)})
	}
	if m := g.Count.check(); m != "" {
		ps = append(ps, problem{"count", m})
	}
	return ps
}

func validComputeCapability(s string) bool {
	major, minor, ok := strings.Cut(s, ".")
	return ok && isDigits(major) && isDigits(minor) && len(major) <= 3 && len(minor) <= 3
}

// String writes the spec in ParseGPU's grammar (total memory and compute
// capability have no shorthand and are left out): "nvidia:A100:80GB:2".
func (g GPUSpec) String() string {
	var parts []string
	if g.Vendor != "" {
		parts = append(parts, g.Vendor)
	}
	if len(g.Names) > 0 {
		parts = append(parts, strings.Join(g.Names, ","))
	}
	if g.Memory != nil {
		parts = append(parts, g.Memory.String())
	}
	parts = append(parts, g.Count.String())
	return strings.Join(parts, ":")
}

// ParseCPU reads "32", "2..", "2..8", "x86:4..8" or "arm:4".
func ParseCPU(s string) (*CPUSpec, error) {
	v := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	c := &CPUSpec{}
	if arch, rest, ok := strings.Cut(v, ":"); ok {
		a := strings.ToLower(arch)
		if !slices.Contains(CPUArchs, a) {
			return nil, invalid("CPU spec %q: architecture %s", s, checkEnum(arch, CPUArchs))
		}
		c.Arch, v = a, rest
	}
	r, err := ParseIntRange(v)
	if err != nil {
		return nil, invalid("CPU spec %q: %s", s, msgOf(err))
	}
	c.Count = r
	if ps := c.check(); len(ps) > 0 {
		return nil, invalid("CPU spec %q: %s", s, ps[0].msg)
	}
	return c, nil
}

func (c *CPUSpec) check() []problem {
	var ps []problem
	if c.Arch != "" && !slices.Contains(CPUArchs, c.Arch) {
		ps = append(ps, problem{"arch", checkEnum(c.Arch, CPUArchs)})
	}
	switch m := c.Count.check(); {
	case m != "":
		ps = append(ps, problem{"count", m})
	case c.Count.Max != nil && *c.Count.Max == 0:
		ps = append(ps, problem{"count", "a node needs at least one CPU"})
	case c.Count.Min < 1:
		// The minimum is what is allocated: 0 would let any number of
		// such runs share a node's CPUs.
		ps = append(ps, problem{"count", fmt.Sprintf("a node needs at least one CPU: the minimum of %s is 0 (write 1..%s)", c.Count, maxText(c.Count))})
	}
	return ps
}

// maxText is a range's upper bound as written, empty when open.
func maxText(r IntRange) string {
	if r.Max == nil {
		return ""
	}
	return strconv.Itoa(*r.Max)
}

// check validates resources however they were built; paths are relative to
// "resources".
func (r Resources) check() []problem {
	var ps []problem
	sub := func(prefix string, in []problem) {
		for _, p := range in {
			ps = append(ps, problem{prefix + "." + p.path, p.msg})
		}
	}
	if r.CPU != nil {
		sub("cpu", r.CPU.check())
	}
	if r.Memory != nil {
		if m := r.Memory.check(); m != "" {
			ps = append(ps, problem{"memory", m})
		}
	}
	if r.GPU != nil {
		sub("gpu", r.GPU.check())
	}
	if r.Disk != nil {
		if m := r.Disk.check(); m != "" {
			ps = append(ps, problem{"disk", m})
		}
	}
	if r.SHMSize != nil && *r.SHMSize < 0 {
		ps = append(ps, problem{"shm_size", "size is negative"})
	} else if r.SHMSize != nil && *r.SHMSize >= maxBytesValue {
		ps = append(ps, problem{"shm_size", "size is too large"})
	}
	return ps
}

// String is the human form used in plans, leaving out what is unset:
// "2..xCPU, 8GB.., A100:80GB:2, 100GB.. (disk)".
func (r Resources) String() string {
	var parts []string
	if r.CPU != nil {
		s := r.CPU.Count.String() + "xCPU"
		if r.CPU.Arch != "" {
			s += " (" + r.CPU.Arch + ")"
		}
		parts = append(parts, s)
	}
	if r.Memory != nil {
		parts = append(parts, r.Memory.String())
	}
	if r.GPU != nil {
		s := r.GPU.String()
		var extra []string
		if r.GPU.TotalMemory != nil {
			extra = append(extra, "total "+r.GPU.TotalMemory.String())
		}
		if r.GPU.ComputeCapability != "" {
			extra = append(extra, "cc "+r.GPU.ComputeCapability)
		}
		if len(extra) > 0 {
			s += " (" + strings.Join(extra, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if r.Disk != nil {
		parts = append(parts, r.Disk.String()+" (disk)")
	}
	if r.SHMSize != nil {
		parts = append(parts, r.SHMSize.String()+" (shm)")
	}
	return strings.Join(parts, ", ")
}
