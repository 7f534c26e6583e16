package spec

import (
	"fmt"
	"strings"
)

// EnvVar is one environment variable. PassThrough marks `- NAME` entries,
// whose value comes from the submitter's environment (see Env.Resolve).
type EnvVar struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	PassThrough bool   `json:"pass_through,omitempty"`
}

// Env is the ordered list of environment variables of a run.
type Env []EnvVar

// validEnvName reports whether s is a shell identifier.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// parseEnvItem reads one list entry: "NAME" (pass-through) or "NAME=value".
func parseEnvItem(s string) (EnvVar, string) {
	name, value, hasValue := strings.Cut(s, "=")
	if !validEnvName(name) {
		return EnvVar{}, fmt.Sprintf("invalid variable name %q (use letters, digits and _, not starting with a digit)", name)
	}
	return EnvVar{Name: name, Value: value, PassThrough: !hasValue}, ""
}

// check validates names and duplicates; paths are "[i]" relative to "env".
func (e Env) check() []problem {
	var ps []problem
	first := map[string]int{}
	for i, v := range e {
		p := fmt.Sprintf("[%d]", i)
		if !validEnvName(v.Name) {
			ps = append(ps, problem{p, fmt.Sprintf("invalid variable name %q (use letters, digits and _, not starting with a digit)", v.Name)})
			continue
		}
		if j, dup := first[v.Name]; dup {
			ps = append(ps, problem{p, fmt.Sprintf("%s is set twice (first at env[%d])", v.Name, j)})
			continue
		}
		first[v.Name] = i
	}
	return ps
}

// SetEnv adds NAME=value, or replaces the value of an existing NAME (the
// CLI's --env NAME=value override).
func (t *Task) SetEnv(name, value string) {
	for i := range t.Env {
		if t.Env[i].Name == name {
			t.Env[i] = EnvVar{Name: name, Value: value}
			return
		}
	}
	t.Env = append(t.Env, EnvVar{Name: name, Value: value})
}

// Resolve fills every pass-through entry from lookup (typically
// os.LookupEnv) and clears its PassThrough mark. If any are unset it
// changes nothing and returns an error wrapping ErrUnsetEnv that names them
// all.
func (e Env) Resolve(lookup func(string) (string, bool)) error {
	var missing []string
	values := make([]string, len(e))
	for i, v := range e {
		if !v.PassThrough {
			continue
		}
		val, ok := lookup(v.Name)
		if !ok {
			missing = append(missing, v.Name)
			continue
		}
		values[i] = val
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s (set them in your environment or pass --env NAME=value)", ErrUnsetEnv, strings.Join(missing, ", "))
	}
	for i := range e {
		if e[i].PassThrough {
			e[i].Value, e[i].PassThrough = values[i], false
		}
	}
	return nil
}

// Strings returns "NAME=value" for each variable, in order. Unresolved
// pass-through entries have no value yet and are left out.
func (e Env) Strings() []string {
	out := make([]string, 0, len(e))
	for _, v := range e {
		if v.PassThrough {
			continue
		}
		out = append(out, v.Name+"="+v.Value)
	}
	return out
}
