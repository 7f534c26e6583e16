package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DependencyTypes are the conditions of `depends_on`, after Slurm's
// --dependency, in the order messages list them: after (the other run has
// started, or was cancelled), afterany (it ended, however), afterok (it
// succeeded), afternotok (it failed), aftercorr (task N of this array
// after task N of the other succeeded).
var DependencyTypes = []string{"after", "afterany", "afterok", "afternotok", "aftercorr"}

// DependencyPolicies are the values of `dependency_policy`: all conditions
// must hold (Slurm's `,`, the default) or any one of them (Slurm's `?`).
var DependencyPolicies = []string{"all", "any"}

// ArrayRefs are the references a job array's tasks may use in `name`,
// `commands`, `env` values and the groups' `commands`; ForArrayTask
// replaces them.
var ArrayRefs = []string{"array.index", "array.count"}

// runRef is what a dependency may name: a run name, a run ID, or one task
// of an array run, NAME_INDEX or ID_INDEX (run names have no `_`).
var runRef = lazyRegexp(`^(?:[a-z][a-z0-9-]{1,40}|[0-9]{1,18})(?:_[0-9]{1,7})?$`)

// groupName is what a group may be called.
var groupName = lazyRegexp(`^[a-z][a-z0-9-]{0,40}$`)

// ArraySpec parses the task's `array:`; nil, nil when it has none.
func (t *Task) ArraySpec() (*ArraySpec, error) {
	if t.Array == "" {
		return nil, nil
	}
	return ParseArray(t.Array)
}

// checkWorkflow is check() for array, depends_on, dependency_policy,
// groups and the `${{ array.* }}` references.
func (t *Task) checkWorkflow(add func(path, format string, args ...any)) {
	if t.Array != "" {
		if _, msg := parseArray(t.Array); msg != "" {
			add("array", "%s", msg)
		}
		if len(t.Groups) > 0 {
			add("array", "a heterogeneous run (`groups`) cannot be a job array, as in Slurm: drop `array` or `groups`")
		}
	}
	for i, d := range t.DependsOn {
		p := fmt.Sprintf("depends_on[%d]", i)
		if !slices.Contains(DependencyTypes, d.Type) {
			add(p, "unknown dependency type %q%s (expected one of: %s)", d.Type, didYouMean(d.Type, DependencyTypes), strings.Join(DependencyTypes, ", "))
			continue
		}
		p += "." + d.Type
		if len(d.Runs) == 0 {
			add(p, "name at least one run")
		}
		for j, r := range d.Runs {
			rp := p
			if len(d.Runs) > 1 {
				rp = index(p, j)
			}
			if !runRef().MatchString(r) {
				add(rp, "%q is not a run: give a run name (train), a run ID (42) or one task of an array run (train_3, 42_3)", r)
			}
		}
		if d.Type == "aftercorr" && t.Array == "" {
			add(p, "`aftercorr` starts each task of this array after the same task of the other: it needs `array:` on this run")
		}
	}
	if t.DependencyPolicy != "" {
		if m := checkEnum(t.DependencyPolicy, DependencyPolicies); m != "" {
			add("dependency_policy", "%s", m)
		}
	}

	if len(t.Groups) > 0 {
		const move = "each group has its own nodes and resources; move them into the groups"
		if t.Nodes > 1 {
			add("nodes", move)
		}
		if len(resourceSetFields(t.Resources)) > 0 {
			add("resources", move)
		}
	}
	names := map[string]int{}
	for i, g := range t.Groups {
		p := fmt.Sprintf("groups[%d]", i)
		if g.Name != "" {
			if j, dup := names[g.Name]; dup {
				add(p+".name", "%q is also the name of groups[%d]", g.Name, j)
			} else if !groupName().MatchString(g.Name) {
				add(p+".name", "%q is not a valid group name: use up to 41 lowercase letters, digits and hyphens, starting with a letter", g.Name)
			}
			names[g.Name] = i
		}
		if g.Nodes < 0 {
			add(p+".nodes", "must be at least 1, got %d", g.Nodes)
		} else if g.Nodes > maxCount {
			add(p+".nodes", "must be at most %d, got %d", maxCount, g.Nodes)
		}
		for _, q := range g.Resources.check() {
			add(p+".resources."+q.path, "%s", q.msg)
		}
		for j, c := range g.Commands {
			if strings.TrimSpace(c) == "" {
				add(fmt.Sprintf("%s.commands[%d]", p, j), "empty command")
			}
		}
	}

	refs := func(path, s string) {
		seen := map[string]bool{}
		scanRefs(s, func(_, _ int, name string) {
			if ns, _, _ := strings.Cut(name, "."); ns != "array" || seen[name] {
				return
			}
			seen[name] = true
			switch {
			case !slices.Contains(ArrayRefs, name):
				add(path, "unknown reference ${{ %s }}%s (expected ${{ array.index }} or ${{ array.count }})", name, didYouMean(name, ArrayRefs))
			case t.Array == "":
				add(path, "${{ %s }} needs `array:`: it is set for each task of a job array", name)
			}
		})
	}
	refs("name", t.Name)
	for i, c := range t.Commands {
		refs(fmt.Sprintf("commands[%d]", i), c)
	}
	for i, v := range t.Env {
		refs(fmt.Sprintf("env[%d]", i), v.Value)
	}
	for i, g := range t.Groups {
		for j, c := range g.Commands {
			refs(fmt.Sprintf("groups[%d].commands[%d]", i, j), c)
		}
	}
}

// nameAsRun is the name to hold to the run-name rule: the name itself, or
// for a job array the name of its task with the longest index. ok is false
// when the name's array references are wrong, which checkWorkflow reports.
func (t *Task) nameAsRun() (name string, ok bool) {
	if !strings.Contains(t.Name, "${{") {
		return t.Name, true
	}
	a, err := t.ArraySpec()
	if a == nil || err != nil {
		return t.Name, !hasArrayRefs(t.Name)
	}
	name, err = ExpandRefs(t.Name, arrayVars(a.Max(), a.Count()))
	return name, err == nil
}

func hasArrayRefs(s string) bool {
	found := false
	scanRefs(s, func(_, _ int, name string) {
		found = found || strings.HasPrefix(name, "array.")
	})
	return found
}

func arrayVars(index, count int) map[string]string {
	return map[string]string{"array.index": strconv.Itoa(index), "array.count": strconv.Itoa(count)}
}

// ForArrayTask is the configuration of one task of a job array: a copy of
// t with `${{ array.index }}` and `${{ array.count }}` replaced in the name,
// the commands, the env values and the groups' commands, and Array
// cleared. The slices it changes, and DependsOn (whose IDs the server
// fills), are copied; t is not modified. Call it on a validated Task:
// unknown `${{ array.* }}` references are left as written.
func (t *Task) ForArrayTask(index, count int) *Task {
	vars := arrayVars(index, count)
	expand := func(s string) string {
		out, _ := ExpandRefs(s, vars)
		return out
	}
	c := *t
	c.Array = ""
	c.Name = expand(t.Name)
	c.Commands = expandAll(t.Commands, expand)
	c.Env = slices.Clone(t.Env)
	for i := range c.Env {
		c.Env[i].Value = expand(c.Env[i].Value)
	}
	c.Groups = slices.Clone(t.Groups)
	for i := range c.Groups {
		c.Groups[i].Commands = expandAll(c.Groups[i].Commands, expand)
	}
	c.DependsOn = slices.Clone(t.DependsOn)
	for i := range c.DependsOn {
		c.DependsOn[i].Runs = slices.Clone(c.DependsOn[i].Runs)
		c.DependsOn[i].IDs = slices.Clone(c.DependsOn[i].IDs)
	}
	return &c
}

func expandAll(in []string, expand func(string) string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s)
	}
	return out
}

// ExpandRefs replaces each `${{ name }}` of s (any spacing inside the
// braces) whose namespace, the part before the first dot, is that of a key
// of vars: `${{ array.index }}` with vars["array.index"]. References to
// other namespaces (`${{ secrets.token }}`, `${{ dstack.node_rank }}`) and
// escaped ones (`$${{ ... }}`) are left as written. A reference to a known
// namespace but an unknown name is an error; the returned text then keeps
// it as written and replaces the rest.
func ExpandRefs(s string, vars map[string]string) (string, error) {
	if !strings.Contains(s, "${{") {
		return s, nil
	}
	namespaces := map[string]bool{}
	for k := range vars {
		ns, _, _ := strings.Cut(k, ".")
		namespaces[ns] = true
	}
	var b strings.Builder
	last := 0
	var unknown []string
	scanRefs(s, func(start, end int, name string) {
		if ns, _, _ := strings.Cut(name, "."); !namespaces[ns] {
			return
		}
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, name)
			return
		}
		b.WriteString(s[last:start])
		b.WriteString(v)
		last = end
	})
	b.WriteString(s[last:])
	if len(unknown) > 0 {
		known := make([]string, 0, len(vars))
		for k := range vars {
			known = append(known, k)
		}
		slices.Sort(known)
		return b.String(), invalid("unknown reference ${{ %s }}%s (known: %s)", unknown[0], didYouMean(unknown[0], known), strings.Join(known, ", "))
	}
	return b.String(), nil
}

// scanRefs calls f with the byte span and the trimmed name of each
// `${{ name }}` of s, in order, skipping escaped ones (`$${{`).
func scanRefs(s string, f func(start, end int, name string)) {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "${{")
		if j < 0 {
			return
		}
		start := i + j
		if start > 0 && s[start-1] == '$' {
			i = start + 3
			continue
		}
		k := strings.Index(s[start+3:], "}}")
		if k < 0 {
			return
		}
		end := start + 3 + k + 2
		f(start, end, strings.TrimSpace(s[start+3:end-2]))
		i = end
	}
}
