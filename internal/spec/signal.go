package spec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Signal is a parsed `signal:` (Berth's, after Slurm's --signal): send the
// signal Number to the job Before its time limit (`max_duration`), so that
// it can save a checkpoint.
//
// Written [B:]SIG[@TIME]: SIG a name (USR1, SIGUSR1, usr1) or a number
// (10), TIME a duration (a plain number is seconds, so Slurm's
// `B:USR1@300` reads the same), 60 s when left out, as Slurm. With `B:`
// (Slurm's "batch shell only") only the job's main process gets the
// signal: the shell running `commands`, whose `trap` then runs once the
// foreground command returns. With `S:` (what sbatch's --signal without
// B: becomes) only the tasks of the job's srun steps get it, on every node,
// as Slurm signals a job's steps and not its batch shell. With neither,
// every process of the job gets it.
type Signal struct {
	Number    int      // 1..64, Linux numbering
	Before    Duration // seconds before the time limit
	BatchOnly bool     // B: the main process only
	StepsOnly bool     // S: the tasks of the job's steps only
}

// DefaultSignalBefore is the time before the limit when `@TIME` is left
// out (Slurm's default).
const DefaultSignalBefore Duration = 60

// signalNames are Linux's signal names, by number.
var signalNames = []string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL",
	10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM", 16: "STKFLT", 17: "CHLD", 18: "CONT",
	19: "STOP", 20: "TSTP", 21: "TTIN", 22: "TTOU", 23: "URG", 24: "XCPU", 25: "XFSZ", 26: "VTALRM", 27: "PROF",
	28: "WINCH", 29: "IO", 30: "PWR", 31: "SYS"}

// maxSignal is Linux's SIGRTMAX.
const maxSignal = 64

// ParseSignal reads a `signal:` value; errors match ErrInvalid.
func ParseSignal(s string) (Signal, error) {
	v := strings.TrimSpace(s)
	if v == "" {
		return Signal{}, invalid("empty: give a signal such as USR1 or USR1@5m, or remove `signal`")
	}
	sig := Signal{Before: DefaultSignalBefore}
	if flags, rest, ok := strings.Cut(v, ":"); ok {
		switch strings.ToUpper(flags) {
		case "B":
			sig.BatchOnly = true
		case "S":
			sig.StepsOnly = true
		case "R", "RB", "BR":
			return Signal{}, invalid("%q: Slurm's R (also at the end of a reservation) has no meaning in Berth, which has no reservations; remove it", s)
		default:
			return Signal{}, invalid("invalid signal %q (expected [B:|S:]SIG[@TIME], e.g. USR1, B:USR1@5m or 10@300)", s)
		}
		v = rest
	}
	name, when, hasTime := strings.Cut(v, "@")
	n, msg := signalNumber(name)
	if msg != "" {
		return Signal{}, invalid("%s", msg)
	}
	sig.Number = n
	if hasTime {
		if strings.TrimSpace(when) == "" {
			return Signal{}, invalid("%q: give the time before the limit after @, e.g. %s@5m", s, strings.TrimSpace(name))
		}
		d, err := ParseDuration(when)
		if err != nil {
			return Signal{}, invalid("%q: time before the limit: %s", s, msgOf(err))
		}
		sig.Before = d
	}
	return sig, nil
}

// signalNumber reads a signal name or number.
func signalNumber(s string) (int, string) {
	v := strings.TrimSpace(s)
	if isDigits(v) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSignal {
			return 0, fmt.Sprintf("signal number %s is out of range 1..%d", v, maxSignal)
		}
		return n, ""
	}
	name := strings.ToUpper(v)
	name = strings.TrimPrefix(name, "SIG")
	switch name {
	case "IOT":
		return 6, ""
	case "POLL":
		return 29, ""
	}
	for n, known := range signalNames {
		if known != "" && known == name {
			return n, ""
		}
	}
	if v == "" {
		return 0, "a signal name or number is required before @ (e.g. USR1@5m)"
	}
	return 0, fmt.Sprintf("unknown signal %q%s (expected a name such as USR1, USR2, TERM or INT, or a number 1..%d)", v, didYouMean(name, signalNames[1:]), maxSignal)
}

// SignalName is the signal's name without SIG ("USR1"), or its number for
// the real-time signals.
func SignalName(n int) string {
	if n > 0 && n < len(signalNames) {
		return signalNames[n]
	}
	return strconv.Itoa(n)
}

// String writes the signal in the form ParseSignal reads: "B:USR1@5m",
// "TERM" (the default time left out).
func (s Signal) String() string {
	var b strings.Builder
	if s.BatchOnly {
		b.WriteString("B:")
	} else if s.StepsOnly {
		b.WriteString("S:")
	}
	b.WriteString(SignalName(s.Number))
	if s.Before != DefaultSignalBefore {
		b.WriteString("@" + s.Before.String())
	}
	return b.String()
}

// ParsedSignal is the run's `signal:`, parsed; nil when unset or invalid
// (Validate reports the latter).
func (t *Task) ParsedSignal() *Signal {
	if t.Signal == "" {
		return nil
	}
	s, err := ParseSignal(t.Signal)
	if err != nil {
		return nil
	}
	return &s
}

// signal reads `signal:` as written: a string, or a bare signal number.
// ParseSignal checks it in check(), so that a Task from JSON gets the same
// messages.
func (w *walker) signal(n ast.Node, path string) string {
	s, k := w.scalar(n)
	if k != kindString && k != kindInt {
		w.fail(n, path, "must be a signal such as USR1, B:USR1@5m or 10@300, not %s", describeScalar(s, k, w.resolve(n)))
		return ""
	}
	s = strings.TrimSpace(s)
	if s == "" {
		_, err := ParseSignal(s)
		w.fail(n, path, "%s", msgOf(err))
	}
	return s
}

// checkSignal is the rule of `signal:` in check().
func (t *Task) checkSignal(add func(path, format string, args ...any)) {
	if t.Signal == "" {
		return
	}
	if _, err := ParseSignal(t.Signal); err != nil {
		add("signal", "%s", msgOf(err))
		return
	}
	if t.MaxDuration == nil {
		add("signal", "needs `max_duration`: the signal is sent that long before the time limit, and this run has none")
	}
}
