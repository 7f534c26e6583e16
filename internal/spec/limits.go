package spec

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Limits bound what one configuration may hold beyond the schema's own
// rules, so that nothing accepted at submission fails at start or costs the
// server more than its size: ParseLimits and ValidateLimits apply them,
// Parse and Validate apply DefaultLimits.
type Limits struct {
	// ScriptBytes bounds the commands of a run, its groups' included, as
	// Slurm's max_script_size bounds a batch script. The commands reach
	// the node as a file (no longer as one argument, which Linux caps at
	// 128 KiB), so this limit is about the server's memory and database.
	ScriptBytes int64
}

// DefaultScriptBytes is Slurm's default max_script_size: 4 MB.
const DefaultScriptBytes = 4 << 20

// DefaultLimits are the limits of Parse and Validate.
var DefaultLimits = Limits{ScriptBytes: DefaultScriptBytes}

const (
	// maxEnvEntry bounds one NAME=value of the environment: Linux refuses
	// a longer string in execve (MAX_ARG_STRLEN, 32 pages with its NUL),
	// and the job would fail at start with "argument list too long".
	maxEnvEntry = 128<<10 - 1
	// maxEnvBytes bounds the whole environment: with the node's own
	// variables it must fit execve's total (a quarter of the stack limit,
	// usually 2 MB).
	maxEnvBytes = 1 << 20
	// maxOtherBytes bounds the text of every other field together (names,
	// paths, tags, lists), each list item counting 8 bytes more, so that
	// no list is unbounded either. A configuration holds a few KB of them.
	maxOtherBytes = 1 << 20
	// itemBytes is what one list item or map entry counts beside its text.
	itemBytes = 8
	// maxFileSlack is what a file may hold beyond the limits of its
	// fields: YAML's or JSON's syntax, quotes, indentation, comments.
	maxFileSlack = 4 << 20
	// maxDepth bounds how deeply a file nests its collections (block and
	// flow together). Berth's deepest field is five levels down; goccy's
	// parser takes quadratic time in the depth of flow collections (a
	// 200 KB file of brackets took 40 s to refuse).
	maxDepth = 64
	// maxTokens bounds the YAML tokens of a file: parsing takes about 5µs
	// a token, and a script is one token however long.
	maxTokens = 1 << 20
)

// fileBytes is the size a configuration file may have.
func (l Limits) fileBytes() int64 {
	return l.ScriptBytes + maxEnvBytes + maxOtherBytes + maxFileSlack
}

// ValidateLimits is Validate with the given limits (a server configured
// for larger scripts than Slurm's default, say).
func (t *Task) ValidateLimits(l Limits) error {
	ps := t.check(l)
	if len(ps) == 0 {
		return nil
	}
	errs := make(Errors, len(ps))
	for i, p := range ps {
		errs[i] = &Error{Field: p.path, Msg: p.msg}
	}
	return errs
}

// checkText bounds every string of t, found by reflection so that a field
// added later is bounded too: none may hold a NUL byte (no command,
// variable or path can carry one to the job), the commands fit
// l.ScriptBytes, each variable and the environment fit execve, and
// everything else maxOtherBytes.
func (t *Task) checkText(l Limits, add func(path, format string, args ...any)) {
	var script, env, other int64
	walkText(reflect.ValueOf(t).Elem(), "", func(path, s string, items int) {
		n := int64(len(s)) + int64(items)*itemBytes
		switch {
		case isCommand(path):
			script += int64(len(s))
		case strings.HasPrefix(path, "env["):
			env += n
		default:
			other += n
		}
		if i := strings.IndexByte(s, 0); i >= 0 {
			add(path, "holds a NUL byte (at byte %d%s): no command, variable or path can carry one to the job", i, lineOf(s, i))
		}
	})
	if script > l.ScriptBytes {
		add("commands", "the commands hold %d bytes: at most %d (%s, as Slurm's max_script_size); keep large data in files the job reads", script, l.ScriptBytes, sizeText(l.ScriptBytes))
	}
	for i, v := range t.Env {
		if n := len(v.Name) + 1 + len(v.Value); n > maxEnvEntry {
			add(index("env", i), "%s is %d bytes with its name: a variable may hold at most %d (Linux's limit on one string of a job's environment); pass large values in a file", v.Name, n, maxEnvEntry)
		}
	}
	if env > maxEnvBytes {
		add("env", "the variables hold %d bytes: at most %d (1MB; the node's own variables must fit beside them in Linux's limit); pass large values in files", env, maxEnvBytes)
	}
	if other > maxOtherBytes {
		add("", "the configuration holds %d bytes besides `commands` and `env`: at most %d (1MB)", other, maxOtherBytes)
	}
}

// sizeText writes a limit in the largest unit that divides it: "4MB",
// "64KB", "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// isCommand tells whether path is one of the commands (the run's or a
// group's).
func isCommand(path string) bool {
	if strings.HasPrefix(path, "groups[") {
		_, path, _ = strings.Cut(path, ".")
	}
	return strings.HasPrefix(path, "commands[")
}

// lineOf says on which line of a multi-line string byte i is.
func lineOf(s string, i int) string {
	if !strings.Contains(s, "\n") {
		return ""
	}
	return fmt.Sprintf(", line %d", strings.Count(s[:i], "\n")+1)
}

// walkText calls visit for every string in v with its field path as
// check() writes it ("resources.gpu.names[0]", "tags.team"; an env
// variable's name and value are both "env[i]"), and with each list item
// and map entry once as items of an empty string.
func walkText(v reflect.Value, path string, visit func(path, s string, items int)) {
	switch v.Kind() {
	case reflect.String:
		visit(path, v.String(), 0)
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkText(v.Elem(), path, visit)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			visit(path, string(v.Bytes()), 0)
			return
		}
		visit(path, "", v.Len())
		for i := range v.Len() {
			walkText(v.Index(i), index(path, i), visit)
		}
	case reflect.Map:
		visit(path, "", v.Len())
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			p := join(path, fmt.Sprint(k))
			walkText(k, p, visit)
			walkText(v.MapIndex(k), p, visit)
		}
	case reflect.Struct:
		_, isVar := v.Interface().(EnvVar)
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			p := path
			if !isVar {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "-" {
					continue
				}
				p = join(path, name)
			}
			walkText(v.Field(i), p, visit)
		}
	}
}

// JobCount is how many jobs (nodes) a run of t has: one per node, over
// every group of a heterogeneous run.
func (t *Task) JobCount() int {
	if len(t.Groups) == 0 {
		return max(t.Nodes, 1)
	}
	n := 0
	for _, g := range t.Groups {
		n += max(g.Nodes, 1)
	}
	return n
}
