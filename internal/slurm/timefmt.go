package slurm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Unlimited is the time limit Slurm spells UNLIMITED (INFINITE, -1).
const Unlimited = time.Duration(math.MaxInt64)

// ErrTimeSpec is returned for a duration Slurm would not parse.
var ErrTimeSpec = errors.New("slurm: invalid time specification")

// TimeNone is a time Slurm prints as "None": an event that will not happen
// (the start of a job cancelled while pending, in sacct). The zero time
// prints as "Unknown".
var TimeNone = time.Unix(0xfffffffe, 0).UTC()

// ParseDuration parses a Slurm duration to the second (time_str2secs):
// "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
// "days-hours:minutes", "days-hours:minutes:seconds"; "UNLIMITED",
// "INFINITE" and "-1" give Unlimited.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, ErrTimeSpec
	}
	if s == "-1" || strings.EqualFold(s, "INFINITE") || strings.EqualFold(s, "UNLIMITED") {
		return Unlimited, nil
	}
	if !validTimespec(s) {
		return 0, ErrTimeSpec
	}
	var d, h, m, sec int64
	if days, rest, ok := strings.Cut(s, "-"); ok {
		// sscanf("%d-%d:%d:%d"): later fields may be missing.
		var err error
		if d, err = strconv.ParseInt(days, 10, 32); err != nil {
			return 0, ErrTimeSpec
		}
		f, ok := scanInts(rest, 3)
		if !ok {
			return 0, ErrTimeSpec
		}
		h, m, sec = f[0], f[1], f[2]
	} else {
		f := strings.Split(s, ":")
		v, ok := scanInts(s, 3)
		if !ok {
			return 0, ErrTimeSpec
		}
		if len(f) == 3 {
			h, m, sec = v[0], v[1], v[2]
		} else { // minutes[:seconds]
			m, sec = v[0], v[1]
		}
	}
	total := ((d*24+h)*60+m)*60 + sec
	if total > math.MaxInt32 { // Slurm's int would overflow
		return 0, ErrTimeSpec
	}
	return time.Duration(total) * time.Second, nil
}

// scanInts reads up to n colon-separated integers, missing ones zero (as
// sscanf leaves them); a number too large for 32 bits is refused.
func scanInts(s string, n int) ([]int64, bool) {
	out := make([]int64, n)
	for i, f := range strings.SplitN(s, ":", n) {
		if f == "" {
			break
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// validTimespec is _is_valid_timespec: digits, at most one dash before any
// colon, at most two colons, and enough numbers around them.
func validTimespec(s string) bool {
	digit, dash, colon := 0, 0, 0
	inDigit := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if !inDigit {
				digit++
				inDigit = true
			}
		case c == '-':
			inDigit = false
			dash++
			if colon > 0 {
				return false
			}
		case c == ':':
			inDigit = false
			colon++
		default:
			return false
		}
	}
	if digit == 0 || dash > 1 || colon > 2 {
		return false
	}
	// Berth refuses a leading dash ("-5"), which Slurm would turn into a
	// negative limit.
	if s[0] == '-' {
		return false
	}
	if dash > 0 {
		return !(colon == 1 && digit < 3) && !(colon == 2 && digit < 4)
	}
	return !(colon == 1 && digit < 2) && !(colon == 2 && digit < 3)
}

// ParseTimeLimit parses --time as sbatch does (time_str2mins): any
// ParseDuration form, rounded up to whole minutes. "0" gives 0, which sbatch
// turns into Unlimited.
func ParseTimeLimit(s string) (time.Duration, error) {
	d, err := ParseDuration(s)
	if err != nil || d == Unlimited {
		return d, err
	}
	return (d + time.Minute - time.Second).Truncate(time.Minute), nil
}

// FormatTimeLimit prints a time limit as scontrol and sacct do
// (mins2time_str, seconds dropped): "UNLIMITED", "00:10:00", "1-00:00:00".
func FormatTimeLimit(d time.Duration) string {
	if d == Unlimited {
		return "UNLIMITED"
	}
	if d < 0 {
		return "INVALID"
	}
	return clockString(int64(d/time.Minute)*60, true)
}

// namedHours are the times of day Slurm's parse_time knows by name.
var namedHours = map[string]int{"midnight": 0, "noon": 12, "fika": 15, "teatime": 16}

// namedHour is the name of a time of day s starts with (any case), or "".
func namedHour(s string) string {
	for word := range namedHours {
		if len(s) >= len(word) && strings.EqualFold(s[:len(word)], word) {
			return word
		}
	}
	return ""
}

// FormatElapsed prints a duration as sacct's Elapsed and scontrol's RunTime
// (secs2time_str): "00:00:05", "01:02:03", "2-03:04:05", "INVALID" when
// negative.
func FormatElapsed(d time.Duration) string {
	if d == Unlimited {
		return "UNLIMITED"
	}
	return clockString(int64(d/time.Second), true)
}

// FormatSqueueDuration prints a duration as squeue's TIME, TIME_LIMIT and
// TIME_LEFT columns (and sinfo's TIMELIMIT) do: "0:05", "1:02:03",
// "2-03:04:05"; "INVALID" when negative or longer than a year.
func FormatSqueueDuration(d time.Duration) string {
	secs := int64(d / time.Second)
	if secs < 0 || secs > 365*24*3600 {
		return "INVALID"
	}
	return clockString(secs, false)
}

func clockString(secs int64, padHours bool) string {
	if secs < 0 {
		return "INVALID"
	}
	s, m, h, d := secs%60, secs/60%60, secs/3600%24, secs/86400
	switch {
	case d > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	case padHours:
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// FormatTimestamp prints a time as Slurm does (slurm_make_time_str with the
// default SLURM_TIME_FORMAT): "2026-11-22T01:26:07" in t's location, "Unknown"
// for the zero time, "None" for TimeNone.
func FormatTimestamp(t time.Time) string {
	switch u := t.Unix(); {
	case t.IsZero() || u == 0 || u == 0xffffffff:
		return "Unknown"
	case u == 0xfffffffe:
		return "None"
	}
	return t.Format("2006-01-02T15:04:05")
}

// BeginError is a --begin value parse_time refuses. Pos is the offset Slurm
// reports; Quiet is true where Slurm prints no "Invalid time specification"
// line (nothing was specified at all, e.g. "T").
type BeginError struct {
	Input string
	Pos   int
	Quiet bool
}

func (e *BeginError) Error() string {
	return fmt.Sprintf("Invalid time specification (pos=%d): %s", e.Pos, e.Input)
}

// Is reports that a BeginError is an ErrTimeSpec.
func (e *BeginError) Is(target error) bool { return target == ErrTimeSpec }

var deltaUnits = []struct {
	name string
	mult int64
}{
	{"seconds", 1}, {"second", 1}, {"minutes", 60}, {"minute", 60},
	{"hours", 3600}, {"hour", 3600}, {"days", 86400}, {"day", 86400},
	{"weeks", 7 * 86400}, {"week", 7 * 86400},
}

// ParseBegin parses a --begin (or sacct -S/-E) time as Slurm's parse_time
// does, relative to now and in now's location: "now+60" (seconds),
// "now+1hour" (seconds, minutes, hours, days, weeks), "HH:MM[:SS]" (the next
// such time), "YYYY-MM-DD[THH:MM[:SS]]", "MM/DD[/YY]", "MMDD[YY]",
// "midnight", "noon", "fika" (15:00), "teatime" (16:00), "today",
// "tomorrow", "uts<seconds>". A time of day without a date means the next
// one; a date without a year means the next one. past selects the previous
// occurrence instead (as sacct's -S does).
func ParseBegin(s string, now time.Time, past bool) (time.Time, error) {
	fail := func(pos int) (time.Time, error) { return time.Time{}, &BeginError{Input: s, Pos: pos} }
	at := func(i int) byte {
		if i >= 0 && i < len(s) {
			return s[i]
		}
		return 0
	}
	hasPrefixFold := func(i int, w string) bool {
		return i <= len(s) && len(s)-i >= len(w) && strings.EqualFold(s[i:i+len(w)], w)
	}
	if hasPrefixFold(0, "uts") {
		v, err := strconv.ParseInt(s[3:], 10, 64)
		if err != nil || v < 1000000 {
			return fail(0)
		}
		return time.Unix(v, 0).In(now.Location()), nil
	}
	loc := now.Location()
	hour, minute, second := -1, -1, 0
	month, mday, year := -1, -1, -1 // month 0-based, year as a full year
	setDate := func(t time.Time) { month, mday, year = int(t.Month())-1, t.Day(), t.Year() }

	pos := 0
	for ; pos < len(s) && s[pos] != '\n'; pos++ {
		c := s[pos]
		if c == ' ' || c == '\t' || c == '-' || c == 'T' {
			continue
		}
		if word := namedHour(s[pos:]); word != "" {
			hour, minute, second = namedHours[word], 0, 0
			pos += len(word) - 1
			continue
		}
		switch {
		case hasPrefixFold(pos, "today"):
			setDate(now)
			pos += 4
			continue
		case hasPrefixFold(pos, "tomorrow"):
			setDate(now.Add(24 * time.Hour))
			pos += 7
			continue
		case hasPrefixFold(pos, "now"):
			var delta int64
			for i := pos + 3; ; i++ {
				ci := at(i)
				if ci == '+' || ci == '-' {
					pos += i // Slurm's own arithmetic, kept for its error positions
					d, np, ok := parseDelta(s, pos)
					pos = np
					if !ok {
						return fail(pos)
					}
					delta = d
					if ci == '-' {
						delta = -d
					}
					break
				}
				if ci == ' ' || ci == '\t' {
					continue
				}
				if ci == 0 || ci == '\n' {
					pos += i - 1
					break
				}
				pos += i
				return fail(pos)
			}
			later := now.Add(time.Duration(delta) * time.Second)
			setDate(later)
			hour, minute, second = later.Hour(), later.Minute(), later.Second()
			continue
		}
		if c < '0' || c > '9' {
			return fail(pos)
		}
		if at(pos+1) == ':' || at(pos+2) == ':' {
			h, m, sec, np, ok := parseClock(s, pos)
			pos = np
			if !ok {
				return fail(pos)
			}
			hour, minute, second = h, m, sec
			continue
		}
		mo, d, y, np, ok := parseDate(s, pos)
		pos = np
		if !ok {
			return fail(pos)
		}
		month, mday = mo, d
		if y >= 0 {
			year = y
		}
	}

	switch {
	case hour == -1 && month == -1:
		return time.Time{}, &BeginError{Input: s, Pos: pos, Quiet: true}
	case hour == -1:
		hour, minute = 0, 0
	case month == -1:
		if past || hour > now.Hour() || (hour == now.Hour() && minute > now.Minute()) {
			setDate(now)
		} else {
			setDate(now.Add(24 * time.Hour))
		}
	}
	if year == -1 {
		nm, nd := int(now.Month())-1, now.Day()
		switch {
		case past:
			year = now.Year()
			if month > nm {
				year--
			}
		case month > nm ||
			(month == nm && mday > nd) ||
			(month == nm && mday == nd && hour > now.Hour()) ||
			(month == nm && mday == nd && hour == now.Hour() && minute > now.Minute()):
			year = now.Year()
		default:
			year = now.Year() + 1
		}
	}
	return time.Date(year, time.Month(month+1), mday, hour, minute, second, 0, loc), nil
}

// parseDelta is _get_delta: digits and at most one unit after the sign at
// pos; it returns the seconds and the position of the last character used.
func parseDelta(s string, pos int) (int64, int, bool) {
	var cnt int64
	digits := 0
	off := pos + 1
	for ; off < len(s) && s[off] != '\n'; off++ {
		c := s[off]
		if c == ' ' || (c >= '\t' && c <= '\r') {
			continue
		}
		unit := false
		for _, u := range deltaUnits {
			if len(s)-off >= len(u.name) && strings.EqualFold(s[off:off+len(u.name)], u.name) {
				off += len(u.name)
				cnt *= u.mult
				unit = true
				break
			}
		}
		if unit {
			break
		}
		if c >= '0' && c <= '9' {
			cnt = cnt*10 + int64(c-'0')
			if cnt > 1<<40 {
				return 0, off, false
			}
			digits++
			continue
		}
		return 0, off - 1, false
	}
	if digits == 0 {
		return 0, pos, false
	}
	return cnt, off - 1, true
}

// parseClock is _get_time: "H:MM", "HH:MM[:SS]", optional am/pm.
func parseClock(s string, off int) (hr, min, sec, pos int, ok bool) {
	at := func(i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	digit := func(i int) bool { return at(i) >= '0' && at(i) <= '9' }
	if !digit(off) {
		return 0, 0, 0, off, false
	}
	hr = int(at(off) - '0')
	off++
	if at(off) != ':' {
		if !digit(off) {
			return 0, 0, 0, off, false
		}
		hr = hr*10 + int(at(off)-'0')
		off++
	}
	if hr > 23 {
		return 0, 0, 0, off - 2, false
	}
	if at(off) != ':' {
		return 0, 0, 0, off, false
	}
	// twoDigits reads a minute or second field at off: exactly two digits,
	// at most 59; on failure, the position _get_time reports.
	twoDigits := func(off int) (v, next int, ok bool) {
		if !digit(off) {
			return 0, off, false
		}
		if !digit(off + 1) {
			return 0, off + 1, false
		}
		v = int(at(off)-'0')*10 + int(at(off+1)-'0')
		if v > 59 {
			return 0, off, false
		}
		return v, off + 2, true
	}
	if min, off, ok = twoDigits(off + 1); !ok {
		return 0, 0, 0, off, false
	}
	if at(off) == ':' {
		if sec, off, ok = twoDigits(off + 1); !ok {
			return 0, 0, 0, off, false
		}
	}
	for at(off) == ' ' || (at(off) >= '\t' && at(off) <= '\r') {
		off++
	}
	if len(s)-off >= 2 && strings.EqualFold(s[off:off+2], "pm") {
		hr += 12
		if hr > 23 {
			if hr != 24 {
				return 0, 0, 0, off, false
			}
			hr = 12
		}
		off += 2
	} else if len(s)-off >= 2 && strings.EqualFold(s[off:off+2], "am") {
		if hr > 11 {
			if hr != 12 {
				return 0, 0, 0, off, false
			}
			hr = 0
		}
		off += 2
	}
	return hr, min, sec, off - 1, true
}

// parseDate is _get_date: "YYYY-MM-DD", "MM/DD[/YY]", "MM.DD[.YY]",
// "MMDD[YY]". month is 0-based; year is -1 when not given.
func parseDate(s string, off int) (month, day, year, pos int, ok bool) {
	at := func(i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	digit := func(i int) bool { return at(i) >= '0' && at(i) <= '9' }
	year = -1
	if len(s) >= off+7 && at(off+4) == '-' && at(off+7) == '-' {
		yr := 0
		for k := 0; k < 4; k++ {
			if !digit(off) {
				return 0, 0, 0, off, false
			}
			yr = yr*10 + int(at(off)-'0')
			off++
		}
		off++ // '-'
		mon := int(at(off)) - '0'
		off++
		if digit(off) {
			mon = mon*10 + int(at(off)-'0')
			off++
		}
		if mon < 1 || mon > 12 {
			return 0, 0, 0, off - 2, false
		}
		off++ // '-'
		if !digit(off) {
			return 0, 0, 0, off, false
		}
		d := int(at(off) - '0')
		off++
		if digit(off) {
			d = d*10 + int(at(off)-'0')
			off++
		}
		if d < 1 || d > 31 {
			return 0, 0, 0, off - 2, false
		}
		return mon - 1, d, yr, off - 1, true
	}
	mon := int(at(off)) - '0'
	off++
	if digit(off) {
		mon = mon*10 + int(at(off)-'0')
		off++
	}
	if mon < 1 || mon > 12 {
		return 0, 0, 0, off - 2, false
	}
	if at(off) == '.' || at(off) == '/' {
		off++
	}
	if !digit(off) {
		return 0, 0, 0, off, false
	}
	d := int(at(off) - '0')
	off++
	if digit(off) {
		d = d*10 + int(at(off)-'0')
		off++
	}
	if d < 1 || d > 31 {
		return 0, 0, 0, off - 2, false
	}
	if at(off) == '.' || at(off) == '/' {
		off++
	}
	if digit(off) {
		yr := int(at(off) - '0')
		off++
		if !digit(off) {
			return 0, 0, 0, off, false
		}
		yr = yr*10 + int(at(off)-'0')
		off++
		if yr != 0 {
			year = 2000 + yr
		}
	}
	return mon - 1, d, year, off - 1, true
}
