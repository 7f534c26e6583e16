package spec

import (
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// resources decodes `resources:`. Shorthand strings go through the same
// parsers the CLI uses for its flags.
func (w *walker) resources(n ast.Node, path string) Resources {
	var r Resources
	entries, ok := w.mapping(n, path, resourceFields, nil)
	if !ok {
		return r
	}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		v, p := e.value, e.fieldPath
		switch e.key {
		case "cpu":
			r.CPU = w.cpu(v, p)
		case "memory":
			r.Memory = w.byteRange(v, p)
		case "shm_size":
			if s, ok := w.sizeText(v, p); ok {
				b, err := ParseBytes(s)
				if err != nil {
					w.fail(v, p, "%s", msgOf(err))
					continue
				}
				r.SHMSize = &b
			}
		case "gpu":
			r.GPU = w.gpu(v, p)
		case "disk":
			if _, isMap := w.resolve(v).(*ast.MappingNode); isMap {
				entries, ok := w.mapping(v, p, []string{"size"}, nil)
				if !ok {
					continue
				}
				for _, e := range entries {
					r.Disk = w.byteRange(e.value, e.fieldPath)
				}
				continue
			}
			r.Disk = w.byteRange(v, p)
		}
	}
	return r
}

// sizeText reads a size or range as written: a string, or a bare number
// (which means GB).
func (w *walker) sizeText(n ast.Node, path string) (string, bool) {
	s, k := w.scalar(n)
	if k == kindString || k == kindInt || k == kindFloat {
		return s, true
	}
	w.fail(n, path, "must be a size such as 80GB or a range such as 200GB.., not %s", describeScalar(s, k, w.resolve(n)))
	return "", false
}

func (w *walker) byteRange(n ast.Node, path string) *ByteRange {
	s, ok := w.sizeText(n, path)
	if !ok {
		return nil
	}
	r, err := ParseByteRange(s)
	if err != nil {
		w.fail(n, path, "%s", msgOf(err))
		return nil
	}
	return &r
}

// countText reads a count or count range: an integer or a string.
func (w *walker) countText(n ast.Node, path string) (string, bool) {
	s, k := w.scalar(n)
	if k == kindString || k == kindInt {
		return s, true
	}
	w.fail(n, path, "must be a count such as 2 or a range such as 2..8, not %s", describeScalar(s, k, w.resolve(n)))
	return "", false
}

func (w *walker) intRange(n ast.Node, path string) (IntRange, bool) {
	s, ok := w.countText(n, path)
	if !ok {
		return IntRange{}, false
	}
	r, err := ParseIntRange(s)
	if err != nil {
		w.fail(n, path, "%s", msgOf(err))
		return IntRange{}, false
	}
	return r, true
}

func (w *walker) cpu(n ast.Node, path string) *CPUSpec {
	if _, isMap := w.resolve(n).(*ast.MappingNode); isMap {
		entries, ok := w.mapping(n, path, []string{"arch", "count"}, nil)
		if !ok {
			return nil
		}
		c := &CPUSpec{Count: IntRange{Min: 1}}
		for _, e := range entries {
			switch e.key {
			case "arch":
				if s, ok := w.str(e.value, e.fieldPath); ok {
					c.Arch = strings.ToLower(s)
				}
			case "count":
				if r, ok := w.intRange(e.value, e.fieldPath); ok {
					c.Count = r
				}
			}
		}
		return c
	}
	s, ok := w.countText(n, path)
	if !ok {
		return nil
	}
	c, err := ParseCPU(s)
	if err != nil {
		w.fail(n, path, "%s", msgOf(err))
		return nil
	}
	return c
}

func (w *walker) gpu(n ast.Node, path string) *GPUSpec {
	if _, isMap := w.resolve(n).(*ast.MappingNode); !isMap {
		s, ok := w.countText(n, path)
		if !ok {
			return nil
		}
		g, err := ParseGPU(s)
		if err != nil {
			w.fail(n, path, "%s", msgOf(err))
			return nil
		}
		return g
	}
	entries, ok := w.mapping(n, path, []string{"vendor", "name", "memory", "total_memory", "compute_capability", "count"}, nil)
	if !ok {
		return nil
	}
	g := &GPUSpec{Count: exactly(1)}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		v, p := e.value, e.fieldPath
		switch e.key {
		case "vendor":
			s, ok := w.str(v, p)
			if !ok {
				continue
			}
			vendor, known := vendorOf(s)
			if !known {
				w.fail(v, p, "%s", checkEnum(strings.ToLower(s), GPUVendors))
				continue
			}
			g.Vendor = vendor
		case "name":
			// dstack's key is `name`, holding one name or a list of them.
			if _, isSeq := w.resolve(v).(*ast.SequenceNode); isSeq {
				g.Names = w.strings(v, p, "[A100, H100]")
				for i := range g.Names {
					w.pos[index(path+".names", i)] = w.pos[index(p, i)]
				}
			} else if s, ok := w.str(v, p); ok {
				g.Names = strings.Split(strings.ReplaceAll(s, " ", ""), ",")
			}
			w.pos[path+".names"] = v
		case "memory", "total_memory":
			r := w.byteRange(v, p)
			if e.key == "memory" {
				g.Memory = r
			} else {
				g.TotalMemory = r
			}
		case "compute_capability":
			s, k := w.scalar(v)
			if k != kindString && k != kindFloat {
				w.fail(v, p, "must be MAJOR.MINOR such as \"8.0\", not %s", describeScalar(s, k, w.resolve(v)))
				continue
			}
			g.ComputeCapability = s
		case "count":
			if r, ok := w.intRange(v, p); ok {
				g.Count = r
			}
		}
	}
	return g
}
