package slurm

import (
	"errors"
	"sort"
	"strconv"
	"strings"
)

// ErrArraySpec is returned for an --array value slurmctld refuses ("Invalid
// job array specification").
var ErrArraySpec = errors.New("slurm: invalid job array specification")

// DefaultMaxArraySize is Slurm's default MaxArraySize: task ids must be
// below it.
const DefaultMaxArraySize = 1001

// ArraySpec is a parsed --array value.
type ArraySpec struct {
	Indices  []int // ascending, without duplicates
	Throttle int   // at most this many tasks run at once; 0 for no limit
}

// ParseArray parses --array as slurmctld does (_valid_array_inx):
// comma-separated items "N", "A-B" or "A-B:STEP", optionally in brackets,
// then an optional "%MAX" throttle: "1-100%10", "0-15:4", "1,3,5-7". Every
// index must be below maxArraySize (DefaultMaxArraySize when 0 or less).
// Any bad item gives ErrArraySpec.
func ParseArray(s string, maxArraySize int) (ArraySpec, error) {
	if maxArraySize <= 0 {
		maxArraySize = DefaultMaxArraySize
	}
	if s == "" {
		return ArraySpec{}, ErrArraySpec
	}
	set := map[int]bool{}
	any := false
	for _, tok := range strings.Split(s, ",") {
		if tok == "" {
			continue // strtok skips empty tokens
		}
		any = true
		if !parseArrayToken(tok, maxArraySize, set) {
			return ArraySpec{}, ErrArraySpec
		}
	}
	if !any {
		return ArraySpec{}, ErrArraySpec
	}
	spec := ArraySpec{Indices: make([]int, 0, len(set))}
	for i := range set {
		spec.Indices = append(spec.Indices, i)
	}
	sort.Ints(spec.Indices)
	if _, t, ok := strings.Cut(s, "%"); ok {
		spec.Throttle, _ = strconv.Atoi(leadingInt(t))
		if spec.Throttle < 0 {
			spec.Throttle = 0
		}
	}
	return spec, nil
}

// leadingInt is the prefix atoi and strtol read: optional spaces and sign,
// then digits.
func leadingInt(s string) string {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	d := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == d {
		return ""
	}
	return s[start:i]
}

// strtol mimics C's strtol: the value and the rest of s after the number,
// or 0 and s itself when there is no number.
func strtol(s string) (int64, string) {
	num := leadingInt(s)
	if num == "" {
		return 0, s
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		v = 1<<62 - 1 // out of range either way
		if num[0] == '-' {
			v = -v
		}
	}
	return v, s[strings.Index(s, num)+len(num):]
}

// parseArrayToken is slurmctld's _parse_array_tok.
func parseArrayToken(tok string, max int, set map[int]bool) bool {
	tok = strings.TrimPrefix(tok, "[")
	first, rest := strtol(tok)
	rest = strings.TrimPrefix(rest, "]")
	if first < 0 {
		return false
	}
	last, step := first, int64(1)
	if strings.HasPrefix(rest, "-") {
		last, rest = strtol(rest[1:])
		rest = strings.TrimPrefix(rest, "]")
		if strings.HasPrefix(rest, ":") {
			step, rest = strtol(rest[1:])
			rest = strings.TrimPrefix(rest, "]")
			if rest != "" && rest[0] != '%' {
				return false
			}
			if step <= 0 || step >= int64(max) {
				return false
			}
		} else if rest != "" && rest[0] != '%' {
			return false
		}
		if last < first {
			return false
		}
	} else if rest != "" && rest[0] != '%' {
		return false
	}
	if last >= int64(max) {
		return false
	}
	for i := first; i <= last; i += step {
		set[int(i)] = true
	}
	return true
}

// FormatArrayTasks prints the task ids of a job array as squeue's JOBID and
// scontrol's ArrayTaskId show the tasks still pending (xlate_array_task_str):
// "3-5%2", "1,3,5-7", "0-60:4" for a long regular step, cut with "..." past
// 63 characters, then "%MAX" when throttled.
func FormatArrayTasks(indices []int, throttle int) string {
	idx := append([]int(nil), indices...)
	sort.Ints(idx)
	idx = uniqInts(idx)
	out := ""
	if step, ok := arrayStep(idx); ok {
		out = strconv.Itoa(idx[0]) + "-" + strconv.Itoa(idx[len(idx)-1]) + ":" + strconv.Itoa(step)
	} else {
		out = bitFmt(idx, 64)
		if len(out) > 64-3 {
			b := []byte(out)
			for i := 0; i < 3; i++ {
				b[64-2-i] = '.'
			}
			out = string(b)
		}
	}
	if throttle > 0 {
		out += "%" + strconv.Itoa(throttle)
	}
	return out
}

// arrayStep finds the "first-last:step" form xlate_array_task_str uses:
// more than five tasks spanning more than ten ids at a fixed stride > 1.
func arrayStep(idx []int) (int, bool) {
	if len(idx) <= 5 || idx[len(idx)-1]-idx[0] <= 10 || idx[1] == idx[0]+1 {
		return 0, false
	}
	step := idx[1] - idx[0]
	for i := 2; i < len(idx); i++ {
		if idx[i]-idx[i-1] != step {
			return 0, false
		}
	}
	return step, true
}

func uniqInts(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// bitFmt is Slurm's bit_fmt into a buffer of size n: ranges joined by
// commas, silently cut at n-1 bytes.
func bitFmt(idx []int, n int) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	s := b.String()
	if n > 0 && len(s) > n-1 {
		s = s[:n-1]
	}
	return s
}
