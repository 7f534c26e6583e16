package slurm

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrSignalSpec is returned for a --signal value sbatch refuses.
var ErrSignalSpec = errors.New("slurm: invalid --signal specification")

// SignalSpec is a parsed --signal=[{R|B}:]SIG[@TIME]: send Signal this long
// before the time limit.
type SignalSpec struct {
	Signal      int           // signal number, 1..65535
	Before      time.Duration // default 60 s, as Slurm
	BatchOnly   bool          // "B": only the batch shell, not every step
	Reservation bool          // "R": also when the reservation ends
}

// signalNames is Slurm's signals_mapping, with Linux's numbers.
var signalNames = []struct {
	name string
	num  int
}{
	{"HUP", 1}, {"INT", 2}, {"QUIT", 3}, {"ABRT", 6}, {"KILL", 9},
	{"ALRM", 14}, {"TERM", 15}, {"USR1", 10}, {"USR2", 12}, {"URG", 23},
	{"CONT", 18}, {"STOP", 19}, {"TSTP", 20}, {"TTIN", 21}, {"TTOU", 22},
	{"XCPU", 24},
}

// SignalNumber converts a signal name or number as Slurm does
// (sig_name2num): "USR1", "SIGUSR1", "usr1" and "10" all give 10; 0 for
// anything else.
func SignalNumber(s string) int {
	if num := leadingInt(s); num != "" {
		rest := strings.TrimSpace(s[strings.Index(s, num)+len(num):])
		v, err := strconv.Atoi(num)
		if rest != "" || err != nil {
			return 0
		}
		return v
	}
	p := strings.TrimLeft(s, " \t\n\v\f\r")
	if hasPrefixFold(p, "SIG") {
		p = p[3:]
	}
	for _, sig := range signalNames {
		if hasPrefixFold(p, sig.name) && strings.TrimSpace(p[len(sig.name):]) == "" {
			return sig.num
		}
	}
	return 0
}

// SignalName is the name Slurm prints for a signal number (sig_num2name):
// "USR1", or the number.
func SignalName(num int) string {
	for _, sig := range signalNames {
		if sig.num == num {
			return sig.name
		}
	}
	return strconv.Itoa(num)
}

// ParseSignal parses --signal as sbatch does (get_signal_opts).
func ParseSignal(s string) (SignalSpec, error) {
	var spec SignalSpec
	p := s
	if hasPrefixFold(p, "R") {
		spec.Reservation = true
		p = p[1:]
	}
	if hasPrefixFold(p, "B") {
		spec.BatchOnly = true
		p = p[1:]
	}
	if hasPrefixFold(p, "R") {
		spec.Reservation = true
		p = p[1:]
	}
	p = strings.TrimPrefix(p, ":")
	name, when, hasTime := strings.Cut(p, "@")
	num := SignalNumber(name)
	if num < 1 || num > 0xffff {
		return SignalSpec{}, ErrSignalSpec
	}
	spec.Signal = num
	spec.Before = 60 * time.Second
	if !hasTime {
		return spec, nil
	}
	secs, rest := strtol(when)
	if secs < 0 || secs > 0xffff || rest != "" {
		return SignalSpec{}, ErrSignalSpec
	}
	spec.Before = time.Duration(secs) * time.Second
	return spec, nil
}

// String prints the spec as Slurm does (signal_opts_to_cmdline): "B:USR1@90",
// the time left out when it is the default 60 s.
func (s SignalSpec) String() string {
	var b strings.Builder
	if s.Reservation {
		b.WriteByte('R')
	}
	if s.BatchOnly {
		b.WriteByte('B')
	}
	if s.Reservation || s.BatchOnly {
		b.WriteByte(':')
	}
	b.WriteString(SignalName(s.Signal))
	if s.Before != 60*time.Second {
		b.WriteString("@" + strconv.FormatInt(int64(s.Before/time.Second), 10))
	}
	return b.String()
}
