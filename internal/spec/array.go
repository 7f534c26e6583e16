package spec

import (
	"cmp"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// MaxArrayIndex is the largest index an `array:` may name. Slurm's default
// (MaxArraySize 1001) allows indexes up to 1000; Berth's syntax allows more,
// and the server enforces its own, configurable, maximum number of tasks.
const MaxArrayIndex = 4_000_000

// IndexRange is First, First+Step, ..., Last (Last is reached exactly). A
// single index N is {N, N, 1}.
type IndexRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
	Step  int `json:"step"`
}

func (r IndexRange) count() int { return (r.Last-r.First)/r.Step + 1 }

func (r IndexRange) single() bool { return r.First == r.Last }

// String writes "N", "A-B" or "A-B:S".
func (r IndexRange) String() string {
	switch {
	case r.single():
		return strconv.Itoa(r.First)
	case r.Step == 1:
		return strconv.Itoa(r.First) + "-" + strconv.Itoa(r.Last)
	}
	return strconv.Itoa(r.First) + "-" + strconv.Itoa(r.Last) + ":" + strconv.Itoa(r.Step)
}

// ArraySpec is a job array's set of task indexes, after Slurm's --array:
// Ranges are sorted, disjoint (even as intervals) and merged where that is
// cheap, so that a 100,000-task array stays a few ranges. Throttle is the
// most tasks that may run at once (0: no limit).
type ArraySpec struct {
	Ranges   []IndexRange `json:"ranges"`
	Throttle int          `json:"throttle,omitempty"`
}

// ParseArray reads Slurm's --array syntax: comma-separated items, each N,
// A-B or A-B:STEP, then optionally %THROTTLE at the very end ("0-15",
// "1,3,5-7", "0-15:4", "1-100%10"). Indexes run from 0 to MaxArrayIndex;
// repeated or overlapping items are merged, as Slurm does.
func ParseArray(s string) (*ArraySpec, error) {
	if strings.TrimSpace(s) == "" {
		return nil, invalid("empty array (expected e.g. 0-15, 1,3,5-7, 0-15:4 or 1-100%%10)")
	}
	a, msg := parseArray(s)
	if msg != "" {
		return nil, invalid("array %q: %s", s, msg)
	}
	return a, nil
}

// parseArray is ParseArray with a bare message, "" on success, for
// check(), whose errors already point at the value.
func parseArray(s string) (*ArraySpec, string) {
	v := strings.TrimSpace(s)
	if v == "" {
		return nil, "empty: give task indexes such as 0-15, or remove `array`"
	}
	fail := func(format string, args ...any) (*ArraySpec, string) {
		return nil, fmt.Sprintf(format, args...)
	}
	a := &ArraySpec{}
	body, throttle, hasThrottle := strings.Cut(v, "%")
	if hasThrottle {
		t := strings.TrimSpace(throttle)
		switch {
		case t == "":
			return fail("missing throttle after %% (e.g. 1-100%%10 runs at most 10 tasks at once)")
		case strings.HasPrefix(t, "-") && isDigits(t[1:]):
			return fail("throttle must be at least 1, got %s", t)
		case strings.ContainsAny(t, ",-:%"):
			return fail("the throttle %%N goes at the very end, after every index")
		case !isDigits(t):
			return fail("invalid throttle %q (expected a number of tasks)", t)
		}
		n, err := strconv.Atoi(t)
		if err != nil || n > 1<<31-1 {
			return fail("throttle %s is too large", t)
		}
		if n < 1 {
			return fail("throttle must be at least 1, got %d", n)
		}
		a.Throttle = n
	}
	if strings.TrimSpace(body) == "" {
		return fail("no indexes before the throttle (e.g. 1-100%%10)")
	}
	for item := range strings.SplitSeq(body, ",") {
		r, msg := parseArrayItem(strings.TrimSpace(item))
		if msg != "" {
			return fail("%s", msg)
		}
		a.Ranges = append(a.Ranges, r)
	}
	if msg := a.normalize(); msg != "" {
		return fail("%s", msg)
	}
	return a, ""
}

// parseArrayItem reads N, A-B or A-B:STEP; the message is "" on success.
func parseArrayItem(item string) (IndexRange, string) {
	if item == "" {
		return IndexRange{}, `empty item (look for ",," or a leading or trailing ",")`
	}
	if strings.HasPrefix(item, "-") {
		if isDigits(item[1:]) {
			return IndexRange{}, fmt.Sprintf("index %s is negative (indexes start at 0)", item)
		}
		return IndexRange{}, fmt.Sprintf("invalid item %q (expected N, A-B or A-B:STEP)", item)
	}
	span, stepText, hasStep := strings.Cut(item, ":")
	lo, hi, isRange := strings.Cut(span, "-")
	first, msg := arrayNumber(lo, "index")
	if msg != "" {
		return IndexRange{}, msg
	}
	last := first
	if isRange {
		if last, msg = arrayNumber(hi, "index"); msg != "" {
			return IndexRange{}, msg
		}
		if first > last {
			return IndexRange{}, fmt.Sprintf("range %d-%d is backwards (the start is after the end)", first, last)
		}
	}
	step := 1
	if hasStep {
		if !isRange {
			return IndexRange{}, fmt.Sprintf("a step needs a range: write A-B:%s, e.g. 1-7:2", stepText)
		}
		t := strings.TrimSpace(stepText)
		if (strings.HasPrefix(t, "-") && isDigits(t[1:])) || (isDigits(t) && strings.Trim(t, "0") == "") {
			return IndexRange{}, fmt.Sprintf("step must be at least 1, got %s", t)
		}
		if step, msg = arrayNumber(t, "step"); msg != "" {
			return IndexRange{}, msg
		}
	}
	last = first + (last-first)/step*step // the last index actually reached
	if first == last {
		step = 1
	}
	return IndexRange{First: first, Last: last, Step: step}, ""
}

// arrayNumber reads an index or a step: digits, at most MaxArrayIndex.
func arrayNumber(s, what string) (int, string) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return 0, "missing " + what + " (expected N, A-B or A-B:STEP)"
	case strings.HasPrefix(t, "-") && isDigits(t[1:]):
		return 0, fmt.Sprintf("%s %s is negative", what, t)
	case !isDigits(t):
		return 0, fmt.Sprintf("invalid %s %q (expected a number)", what, t)
	}
	n, err := strconv.Atoi(t)
	if err != nil || n > MaxArrayIndex {
		return 0, fmt.Sprintf("%s %s is above the maximum %d", what, t, MaxArrayIndex)
	}
	return n, ""
}

// normalize sorts the ranges, expands and recompresses any whose intervals
// overlap (a bitmap over their span, at most MaxArrayIndex bits), and
// merges neighbours that continue each other. It refuses overlapping
// stepped items that would cost more than a few passes over the whole
// index space to expand, or whose union takes over maxMergedRanges ranges
// (0-4000000:3,1-4000000:3 would take 1,333,334): no real array needs
// that, and a configuration must not make the server spin. The message is
// "" on success; otherwise the ranges are left in any order.
func (a *ArraySpec) normalize() string {
	const tooCostly = "overlapping items too costly to merge; write the indexes as ranges that do not overlap"

	rs := a.Ranges
	slices.SortFunc(rs, func(x, y IndexRange) int {
		return cmp.Or(cmp.Compare(x.First, y.First), cmp.Compare(x.Last, y.Last), cmp.Compare(x.Step, y.Step))
	})
	out := make([]IndexRange, 0, len(rs))
	budget := 8 * (MaxArrayIndex + 1)
	for i := 0; i < len(rs); {
		j, hi := i+1, rs[i].Last
		for j < len(rs) && rs[j].First <= hi {
			hi = max(hi, rs[j].Last)
			j++
		}
		cluster := slices.Compact(rs[i:j:j]) // repeated items cost nothing
		if len(cluster) == 1 {
			out = appendMerged(out, cluster[0])
		} else {
			for _, r := range cluster {
				if r.Step == 1 {
					budget -= 1 + (r.Last-r.First)/64 // a word at a time
				} else {
					budget -= r.count()
				}
			}
			if budget < 0 {
				return tooCostly
			}
			var ok bool
			if out, ok = appendCompressed(out, cluster, cluster[0].First, hi); !ok {
				return fmt.Sprintf("overlapping items merge into more than %d separate ranges; write the indexes as ranges that do not overlap", maxMergedRanges)
			}
		}
		i = j
	}
	a.Ranges = out
	return ""
}

// maxMergedRanges bounds the ranges that merging one group of overlapping
// items may produce, beyond a few per item.
const maxMergedRanges = 10_000

// appendMerged appends r, or extends the last range when r continues it:
// consecutive indexes (1-3 then 4-7 is 1-7) or the same progression (0-8:4
// then 12 is 0-12:4). No later range could merge with a range that its
// first part did not merge with, so one pass is enough and parsing String()
// gives back the same ranges.
func appendMerged(out []IndexRange, r IndexRange) []IndexRange {
	if len(out) == 0 {
		return append(out, r)
	}
	p := &out[len(out)-1]
	switch {
	case r.First == p.Last+1 && p.Step == 1 && r.Step == 1:
		p.Last = r.Last
	case !p.single() && r.First == p.Last+p.Step && (r.Step == p.Step || r.single()):
		p.Last = r.Last
	default:
		return append(out, r)
	}
	return out
}

// appendCompressed appends the union of overlapping ranges, spanning
// [lo, hi], as few progressions: runs of consecutive indexes first, other
// steps when at least three indexes share them. Overlapping items of real
// arrays give a few ranges; interleaved progressions can give millions, so
// it stops and reports false past maxMergedRanges beyond a few per item.
func appendCompressed(out []IndexRange, rs []IndexRange, lo, hi int) ([]IndexRange, bool) {
	limit := len(out) + 4*len(rs) + maxMergedRanges
	set := make([]uint64, (hi-lo)/64+1)
	for _, r := range rs {
		if r.Step == 1 {
			setBits(set, r.First-lo, r.Last-lo)
			continue
		}
		for i := r.First; i <= r.Last; i += r.Step {
			set[(i-lo)/64] |= 1 << ((i - lo) % 64)
		}
	}
	var run IndexRange // the progression being built
	n := 0             // its length
	flush := func() {
		switch {
		case n == 0:
		case n == 2 && run.Step > 1:
			out = appendMerged(out, IndexRange{run.First, run.First, 1})
			out = appendMerged(out, IndexRange{run.Last, run.Last, 1})
		default:
			out = appendMerged(out, run)
		}
		n = 0
	}
	for w, word := range set {
		if len(out) > limit {
			return out, false
		}
		for word != 0 {
			x := lo + w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			switch {
			case n == 0:
				run, n = IndexRange{x, x, 1}, 1
			case n == 1:
				run.Last, run.Step, n = x, x-run.First, 2
			case x-run.Last == run.Step:
				run.Last = x
				n++
			case n == 2 && run.Step > 1:
				// A pair with a gap: keep its first index alone and let
				// the second start a progression with x (1,3,4,5 is
				// 1,3-5 rather than 1-3:2,4-5).
				out = appendMerged(out, IndexRange{run.First, run.First, 1})
				run = IndexRange{run.Last, x, x - run.Last}
			default:
				flush()
				run, n = IndexRange{x, x, 1}, 1
			}
		}
	}
	flush()
	return out, len(out) <= limit
}

// setBits sets bits a to b (inclusive), a word at a time.
func setBits(set []uint64, a, b int) {
	for a <= b {
		w, off := a/64, a%64
		n := min(64-off, b-a+1)
		mask := ^uint64(0)
		if n < 64 {
			mask = (1<<n - 1) << off
		}
		set[w] |= mask
		a += n
	}
}

// Count is the number of tasks.
// From is the spec of the indices from the k-th on (k counts from 0, in
// ascending order), without the throttle: what is left of an array once its
// first k tasks exist.
func (a *ArraySpec) From(k int) *ArraySpec {
	out := &ArraySpec{}
	for _, r := range a.Ranges {
		n := r.count()
		if k >= n {
			k -= n
			continue
		}
		if k > 0 {
			r.First += k * r.Step
			k = 0
		}
		out.Ranges = append(out.Ranges, r)
	}
	return out
}

// Without is the spec less the given indices (those it does not hold are
// ignored), without the throttle: what is left of an array once some tasks
// were stopped before they existed.
func (a *ArraySpec) Without(drop []int) *ArraySpec {
	out := &ArraySpec{Ranges: slices.Clone(a.Ranges)}
	for _, d := range drop {
		for i, r := range out.Ranges {
			if d < r.First || d > r.Last || (d-r.First)%r.Step != 0 {
				continue
			}
			var parts []IndexRange
			if d > r.First {
				parts = append(parts, IndexRange{First: r.First, Last: d - r.Step, Step: r.Step})
			}
			if d < r.Last {
				parts = append(parts, IndexRange{First: d + r.Step, Last: r.Last, Step: r.Step})
			}
			out.Ranges = slices.Replace(out.Ranges, i, i+1, parts...)
			break
		}
	}
	return out
}

func (a *ArraySpec) Count() int {
	n := 0
	for _, r := range a.Ranges {
		n += r.count()
	}
	return n
}

// Min is the smallest index (SLURM_ARRAY_TASK_MIN); 0 for an empty spec.
func (a *ArraySpec) Min() int {
	if len(a.Ranges) == 0 {
		return 0
	}
	return a.Ranges[0].First
}

// Max is the largest index (SLURM_ARRAY_TASK_MAX); 0 for an empty spec.
func (a *ArraySpec) Max() int {
	if len(a.Ranges) == 0 {
		return 0
	}
	return a.Ranges[len(a.Ranges)-1].Last
}

// Step is SLURM_ARRAY_TASK_STEP: the step of the one range when the spec
// is a single progression (0-15:4 gives 4), else 1.
func (a *ArraySpec) Step() int {
	if len(a.Ranges) == 1 {
		return a.Ranges[0].Step
	}
	return 1
}

// At is the k-th smallest index, k from 0 to Count()-1; it panics outside
// that, as a slice index would.
func (a *ArraySpec) At(k int) int {
	if k >= 0 {
		rest := k
		for _, r := range a.Ranges {
			n := r.count()
			if rest < n {
				return r.First + rest*r.Step
			}
			rest -= n
		}
	}
	panic(fmt.Sprintf("spec: ArraySpec.At(%d) with %d tasks", k, a.Count()))
}

// Contains reports whether i is one of the indexes.
func (a *ArraySpec) Contains(i int) bool {
	_, ok := a.Ordinal(i)
	return ok
}

// Ordinal is the inverse of At: the position of index i among the
// indexes, and whether it is one.
func (a *ArraySpec) Ordinal(i int) (int, bool) {
	before := 0
	for _, r := range a.Ranges {
		if i < r.First {
			return 0, false
		}
		if i <= r.Last {
			if (i-r.First)%r.Step != 0 {
				return 0, false
			}
			return before + (i-r.First)/r.Step, true
		}
		before += r.count()
	}
	return 0, false
}

// Indices lists the indexes at positions from (inclusive) to to
// (exclusive), clamped to [0, Count()]: Indices(0, Count()) is all of them.
func (a *ArraySpec) Indices(from, to int) []int {
	from, to = max(from, 0), min(to, a.Count())
	if from >= to {
		return nil
	}
	out := make([]int, 0, to-from)
	k := 0
	for _, r := range a.Ranges {
		n := r.count()
		if k+n <= from {
			k += n
			continue
		}
		for j := max(from-k, 0); j < n && k+j < to; j++ {
			out = append(out, r.First+j*r.Step)
		}
		k += n
		if k >= to {
			break
		}
	}
	return out
}

// All yields every index in increasing order.
func (a *ArraySpec) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for _, r := range a.Ranges {
			for i := r.First; i <= r.Last; i += r.Step {
				if !yield(i) {
					return
				}
			}
		}
	}
}

// String writes the spec in Slurm's compact form, which ParseArray reads
// back to the same value: "1-100%10", "0-12:4", "1,3,5-7".
func (a *ArraySpec) String() string {
	parts := make([]string, len(a.Ranges))
	for i, r := range a.Ranges {
		parts[i] = r.String()
	}
	s := strings.Join(parts, ",")
	if a.Throttle > 0 {
		s += "%" + strconv.Itoa(a.Throttle)
	}
	return s
}
