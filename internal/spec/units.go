package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bytes is a size in bytes.
type Bytes int64

// Byte multiples. dstack uses binary multiples under decimal names
// (1GB = 1024MB), and so does Berth, so that sizes mean the same in both.
const (
	MB Bytes = 1 << 20
	GB Bytes = 1 << 30
	TB Bytes = 1 << 40
)

// Duration is a length of time in whole seconds.
type Duration int64

// DurationOff is the value of StopDuration and IdleDuration when the
// configuration says `off` (or `false`): no limit. MaxDuration instead uses
// nil for `off`, because for it "unset" and "off" mean the same.
const DurationOff Duration = -1

// MaxDurationValue is the longest duration a configuration may give: 100
// years (36500d). The server and the agent count in nanoseconds (time.Duration,
// about 292 years) from now: anything longer wraps around, and a run
// with `max_duration: 999999999999w` was killed the moment it started.
// For no limit, `max_duration: off`.
const MaxDurationValue Duration = 36500 * 86400

// maxCount bounds every count and range of counts (CPUs, GPUs, nodes,
// ports...): the YAML path reads integers up to 2^31-1, and so may JSON.
const maxCount = 1<<31 - 1

// maxBytesValue bounds every size: what ParseBytes reads (4EB), so that
// adding a few never overflows.
const maxBytesValue Bytes = math.MaxInt64 / 2

// IntRange is an inclusive range of non-negative integers; Max nil is an open
// upper bound. A single value N is {Min: N, Max: &N}.
type IntRange struct {
	Min int  `json:"min"`
	Max *int `json:"max,omitempty"`
}

// ByteRange is an inclusive range of sizes; Max nil is an open upper bound.
type ByteRange struct {
	Min Bytes  `json:"min"`
	Max *Bytes `json:"max,omitempty"`
}

var byteUnits = []struct {
	name string
	size Bytes
}{{"TB", TB}, {"GB", GB}, {"MB", MB}}

// ParseBytes reads a size such as "200GB", "1TB", "512MB" or "1.5GB". Units
// are case-insensitive; a plain number is in GB, as in dstack.
func ParseBytes(s string) (Bytes, error) {
	v := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	if v == "" {
		return 0, invalid("empty size")
	}
	if strings.HasPrefix(v, "-") {
		return 0, invalid("size %q is negative", s)
	}
	unit := GB
	upper := strings.ToUpper(v)
	for _, u := range byteUnits {
		if strings.HasSuffix(upper, u.name) {
			unit = u.size
			v = v[:len(v)-len(u.name)]
			break
		}
	}
	if !isDecimal(v) {
		return 0, invalid("invalid size %q (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)", s)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f*float64(unit) >= float64(maxBytesValue) {
		return 0, invalid("size %q is too large", s)
	}
	return Bytes(math.Round(f * float64(unit))), nil
}

// isDecimal reports whether s is digits with at most one inner decimal point.
func isDecimal(s string) bool {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if !isDigits(intPart) {
		return false
	}
	return !hasDot || isDigits(frac)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// String writes the size in the unit that gives the shortest exact form,
// never below 1 unless under 1MB: "80GB", "512MB", "1.5TB". ParseBytes
// reads it back to the same value.
func (b Bytes) String() string {
	if b == 0 {
		return "0GB"
	}
	best := ""
	for _, u := range byteUnits {
		if b < u.size && u.size != MB {
			continue // "0.5GB" reads worse than "512MB"
		}
		s := strconv.FormatFloat(float64(b)/float64(u.size), 'f', -1, 64) + u.name
		if best == "" || len(s) < len(best) {
			best = s
		}
	}
	return best
}

// Approx is b for people: the largest unit it reaches, with at most one
// decimal ("23.5GB", "512MB"), where String is exact.
func (b Bytes) Approx() string {
	for _, u := range byteUnits {
		if b >= u.size || u.size == MB {
			return strconv.FormatFloat(math.Round(float64(b)/float64(u.size)*10)/10, 'f', -1, 64) + u.name
		}
	}
	return b.String()
}

var durationUnits = []struct {
	suffix byte
	secs   Duration
}{{'w', 7 * 86400}, {'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}}

// ParseDuration reads "90s", "5m", "2h", "1d", "1w", compounds in
// decreasing unit order such as "1h30m", or a plain integer of seconds.
func ParseDuration(s string) (Duration, error) {
	v := strings.TrimSpace(s)
	if v == "" {
		return 0, invalid("empty duration")
	}
	if strings.HasPrefix(v, "-") {
		return 0, invalid("duration %q is negative", s)
	}
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || Duration(n) > MaxDurationValue {
			return 0, tooLong(s)
		}
		return Duration(n), nil
	}
	bad := invalid("invalid duration %q (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)", s)
	var total Duration
	next := 0 // index of the largest unit still allowed
	for v != "" {
		i := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == 0 || i == len(v) {
			return 0, bad
		}
		n, err := strconv.ParseInt(v[:i], 10, 64)
		if err != nil {
			return 0, tooLong(s)
		}
		u := -1
		for j := next; j < len(durationUnits); j++ {
			if durationUnits[j].suffix == v[i] {
				u = j
				break
			}
		}
		if u < 0 {
			return 0, bad
		}
		if n > int64(MaxDurationValue/durationUnits[u].secs) || total > MaxDurationValue-Duration(n)*durationUnits[u].secs {
			return 0, tooLong(s)
		}
		total += Duration(n) * durationUnits[u].secs
		next = u + 1
		v = v[i+1:]
	}
	return total, nil
}

// Bounded is d, at most MaxDurationValue: a configuration stored before
// durations were bounded may hold more, which must not wrap around where
// it is counted in nanoseconds.
func (d Duration) Bounded() Duration { return min(d, MaxDurationValue) }

// Std is d (a positive one, bounded) as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d.Bounded()) * time.Second }

// tooLong refuses a duration over MaxDurationValue.
func tooLong(s string) *Error {
	return invalid("duration %q is too long: at most 100 years (36500d); use `off` for no limit", s)
}

// checkDuration is "" for a duration a configuration may hold: off (when
// off is allowed), or 0..MaxDurationValue.
func checkDuration(d Duration, offAllowed bool) string {
	switch {
	case d == DurationOff && offAllowed:
		return ""
	case d < 0:
		return "must not be negative"
	case d > MaxDurationValue:
		return fmt.Sprintf("%s is too long: at most 100 years (36500d); use `off` for no limit", d)
	}
	return ""
}

// String writes the duration as ParseDuration reads it: whole minutes as a
// compound of w, d, h and m ("2h", "1h30m"), anything else in seconds
// ("90s"). DurationOff is "off".
func (d Duration) String() string {
	switch {
	case d == DurationOff:
		return "off"
	case d < 0:
		return strconv.FormatInt(int64(d), 10) + "s"
	case d == 0:
		return "0s"
	case d%60 != 0:
		return strconv.FormatInt(int64(d), 10) + "s"
	}
	var b strings.Builder
	for _, u := range durationUnits {
		if n := d / u.secs; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteByte(u.suffix)
			d -= n * u.secs
		}
	}
	return b.String()
}

// splitRange splits "a..b", "a..", "..b" or "a" (spaces ignored); single
// reports the last form.
func splitRange(s string) (lo, hi string, single bool, err error) {
	v := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	if v == "" {
		return "", "", false, invalid("empty value")
	}
	lo, hi, isRange := strings.Cut(v, "..")
	if !isRange {
		return v, v, true, nil
	}
	if lo == "" && hi == "" {
		return "", "", false, invalid("empty range %q: give a minimum, a maximum or both", s)
	}
	if strings.Contains(hi, "..") {
		return "", "", false, invalid("invalid range %q", s)
	}
	return lo, hi, false, nil
}

// ParseIntRange reads "4", "2..", "..8" or "2..8".
func ParseIntRange(s string) (IntRange, error) {
	lo, hi, _, err := splitRange(s)
	if err != nil {
		return IntRange{}, err
	}
	parse := func(p string) (int, error) {
		if strings.HasPrefix(p, "-") {
			return 0, invalid("%q is negative", s)
		}
		if !isDigits(p) {
			return 0, invalid("invalid number %q in %q", p, s)
		}
		n, err := strconv.Atoi(p)
		if err != nil || n > 1<<31-1 {
			return 0, invalid("number %q is too large", p)
		}
		return n, nil
	}
	var r IntRange
	if lo != "" {
		if r.Min, err = parse(lo); err != nil {
			return IntRange{}, err
		}
	}
	if hi != "" {
		m, err := parse(hi)
		if err != nil {
			return IntRange{}, err
		}
		r.Max = &m
	}
	if msg := r.check(); msg != "" {
		return IntRange{}, invalid("%s", msg)
	}
	return r, nil
}

// check returns "" for a well-formed range.
func (r IntRange) check() string {
	if r.Min < 0 || (r.Max != nil && *r.Max < 0) {
		return "range " + r.String() + " is negative"
	}
	if r.Min > maxCount || (r.Max != nil && *r.Max > maxCount) {
		return fmt.Sprintf("range %s is too large: counts go up to %d", r, maxCount)
	}
	if r.Max != nil && *r.Max < r.Min {
		return "range " + r.String() + ": minimum is greater than maximum"
	}
	return ""
}

// String writes "4", "2..", "..8" or "2..8".
func (r IntRange) String() string {
	switch {
	case r.Max == nil:
		return strconv.Itoa(r.Min) + ".."
	case *r.Max == r.Min:
		return strconv.Itoa(r.Min)
	case r.Min == 0:
		return ".." + strconv.Itoa(*r.Max)
	}
	return strconv.Itoa(r.Min) + ".." + strconv.Itoa(*r.Max)
}

// ParseByteRange reads "8GB", "200GB..", "..1TB" or "500GB..1TB".
func ParseByteRange(s string) (ByteRange, error) {
	lo, hi, _, err := splitRange(s)
	if err != nil {
		return ByteRange{}, err
	}
	var r ByteRange
	if lo != "" {
		if r.Min, err = ParseBytes(lo); err != nil {
			return ByteRange{}, err
		}
	}
	if hi != "" {
		m, err := ParseBytes(hi)
		if err != nil {
			return ByteRange{}, err
		}
		r.Max = &m
	}
	if msg := r.check(); msg != "" {
		return ByteRange{}, invalid("%s", msg)
	}
	return r, nil
}

func (r ByteRange) check() string {
	if r.Min < 0 || (r.Max != nil && *r.Max < 0) {
		return "range " + r.String() + " is negative"
	}
	if r.Min >= maxBytesValue || (r.Max != nil && *r.Max >= maxBytesValue) {
		return "range " + r.String() + " is too large"
	}
	if r.Max != nil && *r.Max < r.Min {
		return "range " + r.String() + ": minimum is greater than maximum"
	}
	return ""
}

// String writes "8GB", "200GB..", "..1TB" or "500GB..1TB".
func (r ByteRange) String() string {
	switch {
	case r.Max == nil:
		return r.Min.String() + ".."
	case *r.Max == r.Min:
		return r.Min.String()
	case r.Min == 0:
		return ".." + r.Max.String()
	}
	return r.Min.String() + ".." + r.Max.String()
}
