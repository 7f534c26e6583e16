package spec

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/ast"
)

// Secrets: `${{ secrets.NAME }}` names a secret of the run's project
// (berth secret set NAME). A configuration keeps the reference as written;
// the server checks that the secret exists when the run is submitted and
// puts its value in only when it hands a job to its agent, so no value is
// ever part of a stored configuration.

// SecretFields are where a secret may be referenced: the job's
// environment, its commands and the registry's credentials.
const SecretFields = "env values, commands (also a group's) and registry_auth"

// SecretName is a secret's name: a letter or underscore, then letters,
// digits, underscores and hyphens, at most 64 in all.
var secretName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`) })

// ValidSecretName explains why name cannot be a secret's name ("" if it can).
func ValidSecretName(name string) string {
	if secretName().MatchString(name) {
		return ""
	}
	return fmt.Sprintf("invalid secret name %q: use a letter or _, then letters, digits, _ and -, at most 64", name)
}

// SecretRef is one `${{ secrets.NAME }}` of a configuration: the name and
// the field it is in (env[0], commands[2], registry_auth.password).
type SecretRef struct {
	Name  string
	Field string
}

// SecretRefs lists the secrets t references, in field order (a secret
// referenced twice in one field is listed once for it).
func (t *Task) SecretRefs() []SecretRef {
	var out []SecretRef
	t.secretFields(func(field, s string) {
		seen := map[string]bool{}
		scanRefs(s, func(_, _ int, ref string) {
			if name, ok := strings.CutPrefix(ref, "secrets."); ok && !seen[name] {
				seen[name] = true
				out = append(out, SecretRef{Name: name, Field: field})
			}
		})
	})
	return out
}

// secretFields calls f with every value a secret may be referenced in.
func (t *Task) secretFields(f func(field, s string)) {
	for i, v := range t.Env {
		f(fmt.Sprintf("env[%d]", i), v.Value)
	}
	for i, c := range t.Commands {
		f(fmt.Sprintf("commands[%d]", i), c)
	}
	for i, g := range t.Groups {
		for j, c := range g.Commands {
			f(fmt.Sprintf("groups[%d].commands[%d]", i, j), c)
		}
	}
	if a := t.RegistryAuth; a != nil {
		f("registry_auth.username", a.Username)
		f("registry_auth.password", a.Password)
	}
}

// checkSecrets reports secret references that cannot work: a bad name, a
// reference outside SecretFields (it would stay as written), a
// registry password given as its value (it would be stored).
func (t *Task) checkSecrets(add func(path, format string, args ...any)) {
	for _, r := range t.SecretRefs() {
		if m := ValidSecretName(r.Name); m != "" {
			add(r.Field, "${{ secrets.%s }}: %s", r.Name, m)
		}
	}
	elsewhere := func(field, s string) {
		scanRefs(s, func(_, _ int, ref string) {
			if strings.HasPrefix(ref, "secrets.") {
				add(field, "${{ %s }}: secrets are put in only in %s", ref, SecretFields)
			}
		})
	}
	elsewhere("name", t.Name)
	elsewhere("image", t.Image)
	elsewhere("working_dir", t.WorkingDir)
	elsewhere("entrypoint", t.Entrypoint)
	elsewhere("user", t.User)
	for i, v := range t.Env {
		elsewhere(fmt.Sprintf("env[%d]", i), v.Name)
	}
	if a := t.RegistryAuth; a != nil && a.Password != "" && len(SecretRefsIn(a.Password)) == 0 {
		add("registry_auth.password", "give a secret, not the password itself, which would be stored with the run: "+
			"`berth secret set NAME`, then `password: ${{ secrets.NAME }}`")
	}
}

// SecretRefsIn lists the names of the secrets s references.
func SecretRefsIn(s string) []string {
	var out []string
	scanRefs(s, func(_, _ int, ref string) {
		if name, ok := strings.CutPrefix(ref, "secrets."); ok {
			out = append(out, name)
		}
	})
	return out
}

// ExpandSecrets replaces each `${{ secrets.NAME }}` of s with
// values[NAME]; other references and escaped ones (`$${{`) stay as
// written. missing lists the names values lacks (their references stay).
func ExpandSecrets(s string, values map[string]string) (out string, missing []string) {
	if !strings.Contains(s, "${{") {
		return s, nil
	}
	var b strings.Builder
	last := 0
	scanRefs(s, func(start, end int, ref string) {
		name, ok := strings.CutPrefix(ref, "secrets.")
		if !ok {
			return
		}
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return
		}
		b.WriteString(s[last:start])
		b.WriteString(v)
		last = end
	})
	b.WriteString(s[last:])
	return b.String(), missing
}

// Locate answers where field (a path as Error.Field gives it: env[1],
// registry_auth.password) is in the YAML configuration data, so that a
// problem only the server can find (a secret that does not exist) is
// shown at its line; ok is false when data does not parse or has no such
// field.
func Locate(data []byte, field string) (line, col int, ok bool) {
	w := &walker{pos: map[string]ast.Node{}, bad: map[string]bool{}, anchors: map[string]ast.Node{}}
	if int64(len(data)) > DefaultLimits.fileBytes() {
		return 0, 0, false
	}
	root, parsed := w.document(data)
	if !parsed || w.task(root) == nil {
		return 0, 0, false
	}
	n, found := w.pos[field]
	if !found {
		return 0, 0, false
	}
	line, col = position(n)
	return line, col, true
}
