package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// array reads `array:` as written: a string or a bare integer. ParseArray
// checks it in check(), so that a Task from JSON gets the same messages.
func (w *walker) array(n ast.Node, path string) string {
	s, k := w.scalar(n)
	if k != kindString && k != kindInt {
		w.fail(n, path, "must be task indexes such as 0-15, 1,3,5-7, 0-15:4 or 1-100%%10, not %s", describeScalar(s, k, w.resolve(n)))
		return ""
	}
	s = strings.TrimSpace(s)
	if s == "" {
		_, msg := parseArray(s)
		w.fail(n, path, "%s", msg)
	}
	return s
}

// dependsOn reads `depends_on:`, a list whose items are a run (afterok on
// it) or a one-key mapping from a dependency type to a run or a list of
// runs.
func (w *walker) dependsOn(n ast.Node, path string) []Dependency {
	example := "[prep, {afterany: [train, 42]}]"
	var single *ast.MappingValueNode
	switch m := w.resolve(n).(type) {
	case *ast.MappingNode:
		example = "[{afterok: train}], one condition per item"
		if len(m.Values) == 1 {
			single = m.Values[0]
		}
	case *ast.MappingValueNode:
		single = m
	default:
		if s, k := w.scalar(n); k == kindString || k == kindInt {
			example = "[" + s + "]"
		}
	}
	if single != nil {
		key, _ := w.scalar(single.Key)
		val, _ := w.scalar(single.Value)
		example = fmt.Sprintf("[{%s: %s}]", key, cmp.Or(val, "[...]"))
	}
	return items(w, n, path, example, func(it ast.Node, p string) (Dependency, bool) {
		switch m := w.resolve(it).(type) {
		case *ast.MappingNode:
			if len(m.Values) == 0 {
				w.fail(it, p, "empty condition: write e.g. `afterok: train`")
				return Dependency{}, false
			}
			if len(m.Values) > 1 {
				keys := make([]string, len(m.Values))
				for i, mv := range m.Values {
					keys[i], _ = w.scalar(mv.Key)
				}
				w.fail(it, p, "one condition per item, found %d (%s); give each its own `- ` item", len(keys), strings.Join(keys, ", "))
				return Dependency{}, false
			}
		case *ast.MappingValueNode:
		default:
			return w.dependencyRun(it, p)
		}
		entries, ok := w.mapping(it, p, DependencyTypes, func(key string) string {
			if key == "singleton" {
				return "`singleton` is a field of its own: write `singleton: true` at the top level"
			}
			return fmt.Sprintf("unknown dependency type %q%s (expected one of: %s)", key, didYouMean(key, DependencyTypes), strings.Join(DependencyTypes, ", "))
		})
		if !ok || len(entries) == 0 {
			return Dependency{}, false
		}
		e := entries[0]
		runs, ok := w.runRefs(e.value, e.fieldPath)
		if !ok {
			return Dependency{}, false
		}
		return Dependency{Type: e.key, Runs: runs}, true
	})
}

// dependencyRun reads the short form of an item: a run, meaning afterok.
func (w *walker) dependencyRun(it ast.Node, p string) (Dependency, bool) {
	s, k := w.scalar(it)
	if k != kindString && k != kindInt {
		if k == kindNull {
			w.fail(it, p, "empty item: name a run, or write a condition such as `afterok: train`")
		} else {
			w.fail(it, p, "must be a run or a condition such as {afterok: train}, not %s", describeScalar(s, k, w.resolve(it)))
		}
		return Dependency{}, false
	}
	s = strings.TrimSpace(s)
	if s == "singleton" {
		w.fail(it, p, "`singleton` is a field of its own: write `singleton: true` at the top level")
		return Dependency{}, false
	}
	if typ, runs, ok := strings.Cut(s, ":"); ok && slices.Contains(DependencyTypes, strings.TrimSpace(typ)) {
		w.fail(it, p, "write Slurm's %s as a mapping: `- %s: %s`", s, strings.TrimSpace(typ), strings.ReplaceAll(strings.TrimSpace(runs), ":", ", "))
		return Dependency{}, false
	}
	w.pos[p+".afterok"] = it
	return Dependency{Type: "afterok", Runs: []string{s}}, true
}

// runRefs reads the value of a condition: a run name or ID, or a non-empty
// list of them. A single run's position is kept at path itself, as check()
// names it.
func (w *walker) runRefs(n ast.Node, path string) ([]string, bool) {
	if _, isSeq := w.resolve(n).(*ast.SequenceNode); !isSeq {
		s, k := w.scalar(n)
		switch k {
		case kindString, kindInt:
			return []string{strings.TrimSpace(s)}, true
		case kindNull:
			w.fail(n, path, "name at least one run")
		default:
			w.fail(n, path, "must be a run name or ID, or a list of them, not %s", describeScalar(s, k, w.resolve(n)))
		}
		return nil, false
	}
	its, _ := w.seq(n, path, "")
	if len(its) == 0 {
		w.fail(n, path, "name at least one run")
		return nil, false
	}
	out := make([]string, len(its))
	ok := true
	for i, it := range its {
		p := index(path, i)
		w.pos[p] = it
		s, k := w.scalar(it)
		if k != kindString && k != kindInt {
			w.fail(it, p, "must be a run name or ID, not %s", describeScalar(s, k, w.resolve(it)))
			ok = false
			continue
		}
		out[i] = strings.TrimSpace(s)
	}
	if len(its) == 1 {
		w.pos[path] = its[0]
	}
	return out, ok
}

// groupFields is the schema of one item of `groups:`, in order.
var groupFields = []string{"name", "nodes", "resources", "commands", "ports"}

const groupsExample = "[{name: ps, resources: {cpu: 4}}, {name: workers, nodes: 4, resources: {gpu: 8}}]"

// groups reads `groups:`, the components of a heterogeneous run.
func (w *walker) groups(n ast.Node, path string) []Group {
	return items(w, n, path, groupsExample, func(it ast.Node, p string) (Group, bool) {
		entries, ok := w.mapping(it, p, groupFields, func(key string) string {
			if slices.Contains(resourceFields, key) {
				return fmt.Sprintf("unknown field; did you mean %q? (indent it under `resources:`)", "resources."+key)
			}
			return ""
		})
		if !ok {
			return Group{}, false
		}
		var g Group
		for _, e := range entries {
			if w.isNull(e.value) {
				continue // an empty value leaves the field unset
			}
			v, fp := e.value, e.fieldPath
			switch e.key {
			case "name":
				if s, ok := w.str(v, fp); ok {
					g.Name = s
				}
			case "nodes":
				if n, ok := w.integer(v, fp); ok {
					if n < 1 {
						w.fail(v, fp, "must be at least 1, got %d", n)
						continue
					}
					g.Nodes = n
				}
			case "resources":
				g.Resources = w.resources(v, fp)
			case "commands":
				g.Commands = w.commands(v, fp)
			case "ports":
				g.Ports = w.ports(v, fp)
			}
		}
		return g, true
	})
}
