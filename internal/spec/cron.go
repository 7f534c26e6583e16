package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// cronField describes one of the five fields of a cron line.
type cronField struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i; nil when the field has none
}

var cronFields = []cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	// 7 is also Sunday, as in most crons.
	{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// checkCron returns "" for a valid 5-field cron line (minute hour
// day-of-month month day-of-week; lists, ranges, steps, and month/day
// names), else what is wrong with it.
func checkCron(line string) string {
	fields := strings.Fields(line)
	if len(fields) != 5 {
		hint := ""
		if strings.HasPrefix(strings.TrimSpace(line), "@") {
			hint = "; macros such as @daily are not supported, write e.g. \"0 0 * * *\""
		}
		return fmt.Sprintf("invalid cron expression %q: expected 5 fields (minute hour day-of-month month day-of-week), got %d%s", line, len(fields), hint)
	}
	for i, f := range fields {
		if m := cronFields[i].check(f); m != "" {
			return fmt.Sprintf("invalid cron expression %q: %s field %q: %s", line, cronFields[i].name, f, m)
		}
	}
	return ""
}

func (cf cronField) check(s string) string {
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			return "empty list item"
		}
		base, step, hasStep := strings.Cut(item, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || !isDigits(step) {
				return fmt.Sprintf("invalid step %q", step)
			}
			if n < 1 || n > cf.max-cf.min+1 {
				return fmt.Sprintf("step %d is out of range 1..%d", n, cf.max-cf.min+1)
			}
		}
		if base == "*" {
			continue
		}
		lo, hi, isRange := strings.Cut(base, "-")
		a, m := cf.value(lo)
		if m != "" {
			return m
		}
		if !isRange {
			continue
		}
		b, m := cf.value(hi)
		if m != "" {
			return m
		}
		if a > b {
			return fmt.Sprintf("range %s is backwards", base)
		}
	}
	return ""
}

// value reads a number or a name within the field's bounds.
func (cf cronField) value(s string) (int, string) {
	for i, n := range cf.names {
		if strings.EqualFold(s, n) {
			return cf.min + i, ""
		}
	}
	if !isDigits(s) {
		if s == "" {
			return 0, "missing value"
		}
		if cf.names != nil {
			return 0, fmt.Sprintf("%q is not a number or a name%s", s, didYouMean(strings.ToLower(s), cf.names))
		}
		return 0, fmt.Sprintf("%q is not a number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < cf.min || n > cf.max {
		return 0, fmt.Sprintf("%s is out of range %d..%d", s, cf.min, cf.max)
	}
	return n, ""
}
