package slurm

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode"
)

// CommandError is an error a Slurm command reports to its user: what it
// writes, exactly, and its exit status. The CLI prints Stdout as it is,
// then Stderr one line each, and exits with ExitCode (which is 0 for the
// few errors Slurm does not count as failures).
type CommandError struct {
	Stdout   string
	Stderr   []string
	ExitCode int
}

func (e *CommandError) Error() string {
	if len(e.Stderr) == 0 {
		return strings.TrimSuffix(e.Stdout, "\n")
	}
	return strings.Join(e.Stderr, "\n")
}

const tryHelp = `Try "sbatch --help" for more information`

// SbatchCommand is sbatch's command line after its first pass: the options
// of each heterogeneous component (separated by ":" on the command line),
// then the script and its arguments.
type SbatchCommand struct {
	Components [][]string // the option arguments of each component
	Script     string     // script path; "" for --wrap or a script on stdin
	ScriptArgs []string
	Wrap       string
	Help       bool // --help or -h: print help and exit 0
	Usage      bool // --usage
	Version    bool // -V, --version
	Quiet      bool
	Verbose    int
}

// ParseSbatchArgs is sbatch's first pass over its arguments (without
// argv[0]): it finds malformed options (with Slurm's messages: unrecognized
// option, option requires an argument, ambiguous abbreviation...), the
// early options (--wrap, --help, -v, -Q), and where the script and its
// arguments start. As in sbatch, options end at the first argument that is
// not one ("sbatch -N2 job.sh --foo" passes --foo to the script), "--" ends
// them too, long options may be abbreviated to any unique prefix and short
// ones combined (-HvJname).
func ParseSbatchArgs(args []string) (*SbatchCommand, error) {
	var flat []string
	for _, a := range args {
		if a != ":" {
			flat = append(flat, a)
		}
	}
	cmd := &SbatchCommand{}
	g := getopt{args: flat}
	for {
		def, val, done, err := g.next()
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		switch def.name {
		case "help":
			cmd.Help = true
		case "usage":
			cmd.Usage = true
		case "version":
			cmd.Version = true
		case "quiet":
			cmd.Quiet = true
		case "verbose":
			cmd.Verbose++
		case "wrap":
			cmd.Wrap = *val
		}
	}
	rest := flat[g.optind:]
	if len(rest) > 0 && cmd.Wrap != "" {
		return nil, &CommandError{Stderr: []string{"sbatch: error: Script arguments not permitted with --wrap option"}, ExitCode: 1}
	}
	if len(rest) > 0 {
		cmd.Script, cmd.ScriptArgs = rest[0], rest[1:]
	}
	// The components: split the original arguments at ":", leaving out the
	// script and its arguments.
	n := len(args) - len(rest)
	comp := []string{}
	for _, a := range args[:n] {
		if a == ":" {
			cmd.Components = append(cmd.Components, comp)
			comp = []string{}
			continue
		}
		comp = append(comp, a)
	}
	cmd.Components = append(cmd.Components, comp)
	return cmd, nil
}

// WrapScript is the script sbatch makes of --wrap.
func WrapScript(command string) []byte {
	return []byte("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" + command + "\n")
}

// CheckScript refuses a batch script as sbatch does: empty, only
// whitespace, no "#!" line, a NUL byte, or DOS line breaks.
func CheckScript(body []byte) error {
	fail := func(lines ...string) error {
		for i, l := range lines {
			lines[i] = "sbatch: error: " + l
		}
		return &CommandError{Stderr: lines, ExitCode: 1}
	}
	switch {
	case len(body) == 0:
		return fail("Batch script is empty!")
	case len(bytes.TrimFunc(body, unicode.IsSpace)) == 0:
		return fail("Batch script contains only whitespace!")
	case !bytes.HasPrefix(body, []byte("#!")):
		return fail("This does not look like a batch script.  The first",
			"line must start with #! followed by the path to an interpreter.",
			"For instance: #!/bin/sh")
	case bytes.IndexByte(body, 0) >= 0:
		return fail("The Slurm controller does not allow scripts that",
			"contain a NULL character '\\0'.")
	case bytes.Contains(body, []byte("\r\n")):
		return fail("Batch script contains DOS line breaks (\\r\\n)",
			"instead of expected UNIX line breaks (\\n).")
	}
	return nil
}

// BatchJob is a submission: one BatchOptions per component (one unless the
// job is heterogeneous), the script and its arguments.
type BatchJob struct {
	Components []BatchOptions
	Script     []byte
	ScriptArgs []string
}

// SubmitContext is what sbatch takes from its surroundings, passed in so
// that parsing stays pure.
type SubmitContext struct {
	Cwd        string    // the submission directory: default --chdir, base of relative paths
	Now        time.Time // for --begin
	Env        []string  // the submitter's environment ("NAME=value"), for SBATCH_* variables
	ScriptName string    // for messages about the script; "stdin" when empty
}

// BuildBatchJob is sbatch's second pass: for each component, the #SBATCH
// directives of the script (those of the component's "#SBATCH hetjob"
// section), then the SBATCH_* environment, then the command line, so that
// flags win over the environment and both over directives. script is the
// script's contents (WrapScript for --wrap). Errors are *CommandError with
// Slurm's messages and exit status.
func BuildBatchJob(cmd *SbatchCommand, script []byte, ctx SubmitContext) (*BatchJob, error) {
	if ctx.ScriptName == "" {
		ctx.ScriptName = "stdin"
	}
	sections, err := ScriptDirectives(script, ctx.ScriptName)
	if err != nil {
		return nil, err
	}
	n := len(cmd.Components)
	if len(sections) > n {
		n = len(sections)
	}
	env := map[string]string{}
	for _, kv := range ctx.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	job := &BatchJob{Script: script, ScriptArgs: cmd.ScriptArgs}
	for i := 0; i < n; i++ {
		o := newBatchOptions()
		if i < len(sections) {
			g := getopt{args: sections[i], directives: true}
			if err := o.applyAll(&g, ctx, false); err != nil {
				return nil, err
			}
			if g.optind < len(sections[i]) {
				return nil, &CommandError{Stderr: []string{"sbatch: error: Invalid directive found in batch script: " + sections[i][g.optind]}, ExitCode: 255}
			}
		}
		for _, e := range sbatchEnv {
			v, ok := env[e.env]
			if !ok {
				continue
			}
			if err := o.apply(e.option, &v, true, ctx.Cwd, ctx.Now); err != nil {
				return nil, err.command()
			}
		}
		cliSet := map[string]bool{}
		if i < len(cmd.Components) {
			g := getopt{args: cmd.Components[i]}
			before := o.set
			o.set = map[string]bool{}
			if err := o.applyAll(&g, ctx, true); err != nil {
				return nil, err
			}
			cliSet = o.set
			for k := range before {
				o.set[k] = true
			}
		}
		if err := o.memoryRule(cliSet); err != nil {
			return nil, err
		}
		if err := o.verify(); err != nil {
			return nil, err
		}
		o.finish(cmd, ctx)
		job.Components = append(job.Components, o)
	}
	return job, nil
}

// applyAll applies every option g yields. Early options were handled in
// the first pass: on the command line they are skipped, in a script they
// are ignored, as sbatch does.
func (o *BatchOptions) applyAll(g *getopt, ctx SubmitContext, cli bool) error {
	for {
		def, val, done, err := g.next()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if def.early {
			continue
		}
		if e := o.apply(def.name, val, false, ctx.Cwd, ctx.Now); e != nil {
			return e.command()
		}
	}
}

// memoryRule is _validate_memory_options: one of --mem, --mem-per-cpu,
// --mem-per-gpu on the command line clears the others.
func (o *BatchOptions) memoryRule(cli map[string]bool) error {
	n := 0
	for _, k := range []string{"mem", "mem-per-cpu", "mem-per-gpu"} {
		if cli[k] {
			n++
		}
	}
	switch {
	case n > 1:
		return &CommandError{Stderr: []string{"sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."}, ExitCode: 1}
	case cli["mem"]:
		o.MemPerCPU, o.MemPerGPU = -1, -1
	case cli["mem-per-cpu"]:
		o.Mem, o.MemPerGPU = -1, -1
	case cli["mem-per-gpu"]:
		o.Mem, o.MemPerCPU = -1, -1
	}
	return nil
}

// verify is what sbatch's _opt_verify and the controller refuse of values
// that parsed: a count that C's (int) cast of a long made negative (-c
// 2147483648 is -2147483648 CPUs per task, which Berth took for none
// given, and so 1), and -N 0, a job on no node, which slurmctld allows
// only to make a burst buffer (Berth took it for 1 node).
func (o *BatchOptions) verify() error {
	var msgs []string
	if o.NTasks < 0 {
		msgs = append(msgs, fmt.Sprintf("sbatch: error: invalid number of tasks (-n %d)", o.NTasks))
	}
	if o.CPUsPerTask < 0 {
		msgs = append(msgs, fmt.Sprintf("sbatch: error: invalid number of cpus per task (-c %d)", o.CPUsPerTask))
	}
	if len(msgs) > 0 {
		return &CommandError{Stderr: msgs, ExitCode: 1}
	}
	if o.set["nodes"] && o.Nodes == 0 && o.MaxNodes == 0 {
		return SubmitFailed("Node count specification invalid")
	}
	return nil
}

// finish fills what sbatch derives after parsing: the job name, the working
// directory, absolute file names, the --wrap command.
func (o *BatchOptions) finish(cmd *SbatchCommand, ctx SubmitContext) {
	o.Wrap = cmd.Wrap
	o.Verbose += cmd.Verbose
	o.Quiet = o.Quiet || cmd.Quiet
	if o.JobName == "" {
		switch {
		case cmd.Wrap != "":
			o.JobName = "wrap"
		case cmd.Script != "":
			o.JobName = path.Base(cmd.Script)
		}
	}
	if o.Chdir == "" {
		o.Chdir = ctx.Cwd
	}
	if o.Input == "" {
		o.Input = "/dev/null"
	}
	o.Output = absPath(o.Output, o.Chdir)
	o.Error = absPath(o.Error, o.Chdir)
	o.Input = absPath(o.Input, o.Chdir)
	if o.CPUsPerTask > 0 && o.MinCPUsPerNode < o.CPUsPerTask {
		o.MinCPUsPerNode = o.CPUsPerTask
	}
}

func (e *optError) command() *CommandError {
	lines := make([]string, len(e.msgs))
	for i, m := range e.msgs {
		if strings.HasPrefix(m, "!") {
			lines[i] = m[1:]
		} else {
			lines[i] = "sbatch: error: " + m
		}
	}
	return &CommandError{Stderr: lines, ExitCode: e.code}
}

// ScriptDirectives returns the arguments of a script's #SBATCH lines, one
// list per heterogeneous component ("#SBATCH hetjob" starts the next), as
// sbatch reads them: directives start at column 0, end at the first line
// that is neither blank nor a comment, and are split like a shell would
// (quotes, backslash escapes, an unquoted # starts a comment). #SLURM lines
// count too. name is used in messages.
func ScriptDirectives(script []byte, name string) ([][]string, error) {
	sections := [][]string{{}}
	for lineno, line := range strings.Split(string(script), "\n") {
		var rest string
		switch {
		case strings.HasPrefix(line, "#SBATCH"):
			rest = line[len("#SBATCH"):]
		case strings.HasPrefix(line, "#SLURM"):
			rest = line[len("#SLURM"):]
		default:
			if t := strings.TrimLeftFunc(line, isCSpace); t != "" && t[0] != '#' {
				return sections, nil // the first command
			}
			continue
		}
		trimmed := strings.TrimLeftFunc(rest, isCSpace)
		if isSeparatorWord(trimmed, "hetjob") || isSeparatorWord(trimmed, "packjob") {
			sections = append(sections, []string{})
			word := 6
			if hasPrefixFold(trimmed, "packjob") {
				word = 7
			}
			rest = trimmed[word:]
		}
		for {
			arg, skipped, ok, err := scriptArgument(rest, name, lineno+1)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			sections[len(sections)-1] = append(sections[len(sections)-1], arg)
			rest = rest[skipped:]
		}
	}
	return sections, nil
}

func isCSpace(r rune) bool { return r == ' ' || (r >= '\t' && r <= '\r') }

func isSeparatorWord(s, w string) bool {
	return hasPrefixFold(s, w) && (len(s) == len(w) || isCSpace(rune(s[len(w)])))
}

// scriptArgument is sbatch's get_argument: the next word of a directive.
func scriptArgument(line, file string, lineno int) (arg string, skipped int, ok bool, err error) {
	p := 0
	for p < len(line) && isCSpace(rune(line[p])) {
		p++
	}
	if p < len(line) && line[p] == ':' {
		return "", 0, false, &CommandError{Stderr: []string{fmt.Sprintf("sbatch: fatal: %s: line %d: Unexpected `:` in [%s]", file, lineno, line)}, ExitCode: 1}
	}
	if p >= len(line) {
		return "", p, false, nil
	}
	var b strings.Builder
	var quote byte
	escape := false
	any := false
	for p < len(line) && (quote != 0 || !isCSpace(rune(line[p]))) && line[p] != '\n' {
		c := line[p]
		switch {
		case escape:
			escape = false
		case c == '\\':
			escape = true
			p++
			continue
		case quote != 0:
			if c == quote {
				quote = 0
				p++
				continue
			}
		case c == '"' || c == '\'':
			quote = c
			p++
			continue
		case c == '#':
			// An unescaped # starts a comment.
			if !any {
				return "", p, false, nil
			}
			return b.String(), p, true, nil
		}
		b.WriteByte(c)
		any = true
		p++
	}
	if quote != 0 {
		return "", 0, false, &CommandError{Stderr: []string{fmt.Sprintf("sbatch: fatal: %s: line %d: Unmatched `%c` in [%s]", file, lineno, quote, line)}, ExitCode: 1}
	}
	if !any {
		return "", p, false, nil
	}
	return b.String(), p, true, nil
}
