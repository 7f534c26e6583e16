package cli

import (
	"fmt"
	"strings"

	"github.com/berth-hq/berth/internal/slurm"
)

// The Slurm commands other than sbatch (whose parser lives in
// internal/slurm) read their options with this getopt_long: glibc's rules
// and messages, so that a script calling squeue or scancel with a typo
// sees what Slurm would print.

type optArg int

const (
	noArg optArg = iota
	reqArg
	optionalArg
)

// slurmOpt is one option of a command's table: a long name (may be ""), a
// short letter (0 for none), and whether it takes a value.
type slurmOpt struct {
	long  string
	short byte
	arg   optArg
}

// gotOpt is one option found on the command line, by its canonical name
// (the long name, or the letter when it has none).
type gotOpt struct {
	name string
	val  string
	has  bool // a value was given
}

// getoptLong parses args (without argv[0]) as glibc's getopt_long does.
// With permute (glibc's default), non-options are collected wherever they
// are; without, the first one ends the options. "--" always ends them.
// Errors are glibc's messages and the command's "Try --help" line, exit 1.
func getoptLong(prog string, args []string, table []slurmOpt, permute bool) ([]gotOpt, []string, error) {
	var got []gotOpt
	var rest []string
	fail := func(format string, a ...any) error {
		return &slurm.CommandError{Stderr: []string{prog + ": " + fmt.Sprintf(format, a...),
			fmt.Sprintf("Try \"%s --help\" for more information", prog)}, ExitCode: 1}
	}
	name := func(o *slurmOpt) string {
		if o.long != "" {
			return o.long
		}
		return string(o.short)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return got, append(rest, args[i+1:]...), nil
		case len(a) < 2 || a[0] != '-':
			if !permute {
				return got, append(rest, args[i:]...), nil
			}
			rest = append(rest, a)
		case strings.HasPrefix(a, "--"):
			key, val, hasVal := strings.Cut(a[2:], "=")
			var found *slurmOpt
			var matches []*slurmOpt
			for k := range table {
				o := &table[k]
				if o.long == "" {
					continue
				}
				if o.long == key {
					found = o
					break
				}
				if strings.HasPrefix(o.long, key) {
					matches = append(matches, o)
				}
			}
			if found == nil {
				switch {
				case len(matches) == 1:
					found = matches[0]
				case len(matches) > 1:
					var b strings.Builder
					fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", a[2:])
					for _, m := range matches {
						fmt.Fprintf(&b, " '--%s'", m.long)
					}
					return nil, nil, fail("%s", b.String())
				default:
					return nil, nil, fail("unrecognized option '%s'", a)
				}
			}
			switch {
			case hasVal && found.arg == noArg:
				return nil, nil, fail("option '--%s' doesn't allow an argument", found.long)
			case hasVal:
				got = append(got, gotOpt{name: name(found), val: val, has: true})
			case found.arg == reqArg:
				if i+1 >= len(args) {
					return nil, nil, fail("option '--%s' requires an argument", found.long)
				}
				i++
				got = append(got, gotOpt{name: name(found), val: args[i], has: true})
			default:
				got = append(got, gotOpt{name: name(found)})
			}
		default:
			cluster := a[1:]
			for len(cluster) > 0 {
				c := cluster[0]
				cluster = cluster[1:]
				var found *slurmOpt
				for k := range table {
					if table[k].short == c {
						found = &table[k]
						break
					}
				}
				if found == nil {
					return nil, nil, fail("invalid option -- '%c'", c)
				}
				switch found.arg {
				case noArg:
					got = append(got, gotOpt{name: name(found)})
					continue
				case optionalArg:
					if cluster != "" {
						got = append(got, gotOpt{name: name(found), val: cluster, has: true})
					} else {
						got = append(got, gotOpt{name: name(found)})
					}
				case reqArg:
					switch {
					case cluster != "":
						got = append(got, gotOpt{name: name(found), val: cluster, has: true})
					case i+1 < len(args):
						i++
						got = append(got, gotOpt{name: name(found), val: args[i], has: true})
					default:
						return nil, nil, fail("option requires an argument -- '%c'", c)
					}
				}
				cluster = ""
			}
		}
	}
	return got, rest, nil
}
