package cli

import (
	"io"
	"os"
	"strings"
)

// colorDecision tells whether a native command colours what it writes to
// w: only on a terminal, never with NO_COLOR set to anything but empty
// (no-color.org), TERM=dumb or --no-color. The Slurm commands never
// colour: their output is byte for byte Slurm's.
func colorDecision(tty bool, getenv func(string) string, noColor bool) bool {
	return tty && !noColor && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// paletteFor is the palette of a native command writing to w.
func paletteFor(w io.Writer, noColor bool) palette {
	return palette{on: colorDecision(isTTY(w), os.Getenv, noColor)}
}

// palette colours status cells. Every cell of a coloured column carries
// as many invisible bytes as every other (a 5-byte colour, a 4-byte
// reset; the header and plain cells the terminal's default colour), so
// that tabwriter and streamTable, which count bytes and runes, keep the
// columns aligned.
type palette struct{ on bool }

const (
	sgrGreen   = "\x1b[32m"
	sgrRed     = "\x1b[31m"
	sgrYellow  = "\x1b[33m"
	sgrDefault = "\x1b[39m"
	sgrReset   = "\x1b[0m"
)

// plain is a cell of a coloured column left in the default colour (its
// header).
func (p palette) plain(s string) string {
	if !p.on {
		return s
	}
	return sgrDefault + s + sgrReset
}

// status colours a run's, job's or node's status: green running, done,
// idle, busy; red failed, aborted, terminated, offline, unreachable,
// down; yellow waiting (submitted, scheduled, provisioning, pulling),
// terminating, draining, drained; others (and a node's health warning,
// "idle (warning)") yellow too when they say something is wrong.
func (p palette) status(s string) string {
	if !p.on {
		return s
	}
	return statusColor(s) + s + sgrReset
}

func statusColor(s string) string {
	word, rest, _ := strings.Cut(s, " ")
	switch word {
	case "running", "done", "idle", "busy":
		if strings.Contains(rest, "failure") {
			return sgrRed
		}
		if rest != "" {
			return sgrYellow // a health warning
		}
		return sgrGreen
	case "failed", "aborted", "terminated", "offline", "unreachable", "down":
		return sgrRed
	case "submitted", "scheduled", "provisioning", "pulling", "terminating", "draining", "drained", "pending":
		return sgrYellow
	}
	return sgrDefault
}
