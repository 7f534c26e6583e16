package slurm

import (
	"fmt"
	"strings"
)

// getopt is glibc's getopt_long over sbatch's option table in "+" mode
// (stop at the first non-option), with glibc's error messages. sbatch exits
// 255 on any of them, after pointing at --help.
type getopt struct {
	args       []string
	directives bool // parsing #SBATCH lines; errors read the same

	optind   int
	nextchar string // the rest of a cluster of short options
}

// next returns the next option and its value (nil when none), or done at
// the first non-option, or the error sbatch reports.
func (g *getopt) next() (def *optionDef, val *string, done bool, err error) {
	if g.nextchar == "" {
		if g.optind >= len(g.args) {
			return nil, nil, true, nil
		}
		a := g.args[g.optind]
		if a == "--" {
			g.optind++
			return nil, nil, true, nil
		}
		if len(a) < 2 || a[0] != '-' {
			return nil, nil, true, nil
		}
		if strings.HasPrefix(a, "--") {
			g.optind++
			return g.long(a[2:])
		}
		g.nextchar = a[1:]
	}
	return g.short()
}

func getoptError(msg string) error {
	return &CommandError{Stderr: []string{"sbatch: " + msg, tryHelp}, ExitCode: 255}
}

func (g *getopt) long(arg string) (*optionDef, *string, bool, error) {
	name, value, hasValue := strings.Cut(arg, "=")
	var found *optionDef
	for i := range sbatchOptions {
		if sbatchOptions[i].name == name {
			found = &sbatchOptions[i]
			break
		}
	}
	if found == nil && name != "" {
		var matches []*optionDef
		for i := range sbatchOptions {
			if strings.HasPrefix(sbatchOptions[i].name, name) {
				matches = append(matches, &sbatchOptions[i])
			}
		}
		// Matches that set the same option the same way as the first one
		// are not ambiguous, and glibc does not list them.
		ambig := append([]*optionDef(nil), matches[:min(1, len(matches))]...)
		for _, m := range matches[min(1, len(matches)):] {
			if optionKey(m) != optionKey(matches[0]) || m.arg != matches[0].arg {
				ambig = append(ambig, m)
			}
		}
		if len(ambig) > 1 {
			var b strings.Builder
			fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", arg)
			for _, m := range ambig {
				fmt.Fprintf(&b, " '--%s'", m.name)
			}
			return nil, nil, false, getoptError(b.String())
		}
		if len(matches) > 0 {
			found = matches[0]
		}
	}
	if found == nil {
		return nil, nil, false, getoptError(fmt.Sprintf("unrecognized option '--%s'", arg))
	}
	switch {
	case hasValue && found.arg == argNone:
		return nil, nil, false, getoptError(fmt.Sprintf("option '--%s' doesn't allow an argument", found.name))
	case hasValue:
		return found, &value, false, nil
	case found.arg == argRequired:
		if g.optind >= len(g.args) {
			return nil, nil, false, getoptError(fmt.Sprintf("option '--%s' requires an argument", found.name))
		}
		v := g.args[g.optind]
		g.optind++
		return found, &v, false, nil
	}
	return found, nil, false, nil
}

func optionKey(d *optionDef) string {
	if c, ok := canonicalOption[d.name]; ok {
		return c
	}
	return d.name
}

func (g *getopt) short() (*optionDef, *string, bool, error) {
	c := g.nextchar[0]
	g.nextchar = g.nextchar[1:]
	if g.nextchar == "" {
		g.optind++
	}
	var found *optionDef
	for i := range sbatchOptions {
		if sbatchOptions[i].short == c {
			found = &sbatchOptions[i]
			break
		}
	}
	if found == nil {
		g.nextchar = ""
		return nil, nil, false, getoptError(fmt.Sprintf("invalid option -- '%c'", c))
	}
	switch found.arg {
	case argOptional:
		if g.nextchar != "" {
			v := g.nextchar
			g.nextchar = ""
			g.optind++
			return found, &v, false, nil
		}
		return found, nil, false, nil
	case argRequired:
		if g.nextchar != "" {
			v := g.nextchar
			g.nextchar = ""
			g.optind++
			return found, &v, false, nil
		}
		if g.optind >= len(g.args) {
			return nil, nil, false, getoptError(fmt.Sprintf("option requires an argument -- '%c'", c))
		}
		v := g.args[g.optind]
		g.optind++
		return found, &v, false, nil
	}
	return found, nil, false, nil
}
