package slurm

import (
	"sort"
	"strings"
)

// ExportMode says which of the submitter's environment variables a job gets.
type ExportMode int

// Export modes.
const (
	ExportAll  ExportMode = iota // every variable (sbatch's default), plus Vars
	ExportNone                   // none but SLURM_*, plus Vars
	ExportNil                    // "NIL": like NONE, and the user's login environment is not loaded either
)

// EnvVar is one variable named in --export: with a value ("FOO=bar") or
// taken from the submitter's environment ("FOO").
type EnvVar struct {
	Name     string
	Value    string
	HasValue bool
}

// Export is a parsed --export.
type Export struct {
	Mode ExportMode
	Vars []EnvVar
}

// ParseExport parses --export as sbatch does: "ALL" (the default), "NONE",
// "NIL", "ALL,FOO=bar,BAZ", or a list of names and NAME=value pairs, which
// means NONE plus those. A value may itself hold commas when quoted or when
// the next item is not NAME=...: "A=1,2" sets A to "1,2", as Slurm does.
func ParseExport(s string) Export {
	e := Export{Mode: ExportNone}
	items := splitExport(s)
	for _, it := range items {
		switch strings.ToUpper(it) {
		case "ALL":
			e.Mode = ExportAll
			continue
		case "NONE":
			if e.Mode != ExportNil {
				e.Mode = ExportNone
			}
			continue
		case "NIL":
			e.Mode = ExportNil
			continue
		}
		if it == "" {
			continue
		}
		name, val, ok := strings.Cut(it, "=")
		e.Vars = append(e.Vars, EnvVar{Name: name, Value: unquote(val), HasValue: ok})
	}
	if len(items) == 0 {
		e.Mode = ExportAll
	}
	return e
}

// splitExport splits on commas, but a comma followed by something that is
// not "NAME=" or a bare NAME belongs to the previous value (Slurm's
// _env_merge_filter treats "A=1,2" as one assignment).
func splitExport(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	cur := ""
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
			cur += string(c)
		case c == '"' || c == '\'':
			quote = c
			cur += string(c)
		case c == ',' && startsEnvItem(s[i+1:]) || c == ',' && !strings.Contains(cur, "="):
			out = append(out, cur)
			cur = ""
		default:
			cur += string(c)
		}
	}
	return append(out, cur)
}

// startsEnvItem reports whether s starts with NAME followed by "=", "," or
// the end.
func startsEnvItem(s string) bool {
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z' || i > 0 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return i > 0 && (i == len(s) || s[i] == '=' || s[i] == ',')
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// Environment computes a job's environment from the submitter's (as
// "NAME=value" strings) the way sbatch does for this Export: all of it for
// ALL, only SLURM_* for NONE and NIL, then each named variable, from its
// value or from the submitter's environment. The result is sorted by name.
func (e Export) Environment(submitter []string) []string {
	env := map[string]string{}
	from := map[string]string{}
	for _, kv := range submitter {
		name, val, _ := strings.Cut(kv, "=")
		from[name] = val
		if e.Mode == ExportAll || strings.HasPrefix(name, "SLURM_") {
			env[name] = val
		}
	}
	for _, v := range e.Vars {
		if v.HasValue {
			env[v.Name] = v.Value
		} else if val, ok := from[v.Name]; ok {
			env[v.Name] = val
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
