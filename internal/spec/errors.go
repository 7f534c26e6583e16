package spec

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every configuration problem this
// package reports: an *Error, an Errors list, and the errors returned by the
// value parsers (ParseGPU, ParseBytes, ...).
var ErrInvalid = errors.New("spec: invalid configuration")

// ErrUnsetEnv is returned (wrapped) by Env.Resolve when pass-through
// variables are missing from the caller's environment.
var ErrUnsetEnv = errors.New("spec: unset environment variable")

// Error is one problem in a configuration.
type Error struct {
	File  string // as given to Parse; empty for Validate
	Line  int    // 1-based; 0 when the problem has no position (Validate)
	Col   int    // 1-based
	Field string // dotted path, e.g. "resources.gpu", "env[2]"; empty for YAML syntax errors
	Msg   string
}

// Error formats the problem as "file:line:col: field: message", leaving out
// the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		if e.File != "" {
			b.WriteString(e.File)
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Col)
	} else if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports that every Error is an ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Errors is every problem found in one configuration, in file order (Parse)
// or schema order (Validate).
type Errors []*Error

// Error joins the problems with newlines.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is reports that Errors is an ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Unwrap exposes the individual problems to errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortByPosition orders problems by line and column, keeping the discovery
// order for problems at the same place.
func (es Errors) sortByPosition() {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Col < es[j].Col
	})
}

// invalid builds a position-less problem; used by the value parsers so that
// callers outside YAML (CLI flags) still get errors.Is(err, ErrInvalid).
func invalid(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// suggest returns the known name closest to s, or "" when nothing is close
// enough to be a plausible typo.
func suggest(s string, known []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, k := range known {
		d := levenshtein(ls, strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > 1+len([]rune(s))/4 || bestD >= len([]rune(s)) {
		return ""
	}
	return best
}

// didYouMean formats suggest's answer as a message suffix.
func didYouMean(s string, known []string) string {
	if m := suggest(s, known); m != "" {
		return fmt.Sprintf("; did you mean %q?", m)
	}
	return ""
}

// levenshtein is the optimal-string-alignment edit distance: insertions,
// deletions, substitutions and adjacent transpositions ("fir" → "fri")
// each cost 1.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// checkEnum returns "" when v is one of allowed, else a message listing them.
func checkEnum(v string, allowed []string) string {
	for _, a := range allowed {
		if v == a {
			return ""
		}
	}
	return fmt.Sprintf("unknown value %q%s (expected one of: %s)", v, didYouMean(v, allowed), strings.Join(allowed, ", "))
}
