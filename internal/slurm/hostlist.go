package slurm

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrHostlist is matched (errors.Is) by every hostlist parse error.
var ErrHostlist = errors.New("slurm: invalid hostlist")

// HostlistError says which part of a hostlist expression is wrong. Msg is
// Slurm's own wording ("Invalid range: `5-1'"), without the "scontrol:
// error: _parse_single_range: " prefix.
type HostlistError struct {
	Expr string
	Msg  string
}

func (e *HostlistError) Error() string {
	return fmt.Sprintf("Invalid hostlist: %s (%s)", e.Expr, e.Msg)
}

// Is reports that every HostlistError is an ErrHostlist.
func (e *HostlistError) Is(target error) bool { return target == ErrHostlist }

// Slurm's limits (src/common/hostlist.c): one bracketed range may name at most
// 64K hosts. A whole expression is capped here too, so that a hostile
// "a[0-65535]b[0-65535]" cannot exhaust memory.
const (
	maxHostsPerRange = 64 * 1024
	maxHostsPerList  = 1 << 20
)

// hostRange is Slurm's hostrange_t: prefix plus the numbers lo..hi printed
// with at least width digits, or a single host without a numeric suffix.
type hostRange struct {
	prefix string
	lo, hi uint64
	width  int
	single bool
}

func (r hostRange) count() int {
	if r.single {
		return 1
	}
	return int(r.hi - r.lo + 1)
}

// ExpandHostlist returns every host name of a Slurm hostlist expression in
// the order written, duplicates kept, as `scontrol show hostnames` prints
// them: "node[01-03,10],gpu-a[1-2]" gives node01 node02 node03 node10 gpu-a1
// gpu-a2. Hosts are separated by commas, spaces or tabs; a bracketed range
// keeps the zero padding of its lower bound ("[098-100]"), and a bracket may
// also appear inside the name ("rack[1-2]-n[1-4]"). The empty expression
// gives no hosts.
func ExpandHostlist(expr string) ([]string, error) {
	ranges, err := parseHostlist(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range ranges {
		if r.single {
			out = append(out, r.prefix)
			continue
		}
		for n := r.lo; n <= r.hi; n++ {
			out = append(out, formatHost(r.prefix, n, r.width))
		}
	}
	return out, nil
}

// CompressHostlist returns the shortest Slurm expression naming each host
// once, sorted as Slurm sorts hostlists (prefix in natural order, then
// number): n3,n1,n2,n1 gives n[1-3]; node01,node02,node10,gpu1 gives
// gpu1,node[01-02,10]. It is what SLURM_JOB_NODELIST and the NODELIST
// columns show. ExpandHostlist(CompressHostlist(x)) is x sorted, without
// duplicates.
func CompressHostlist(hosts []string) string {
	ranges := make([]hostRange, 0, len(hosts))
	for _, h := range hosts {
		ranges = append(ranges, parseHost(h))
	}
	ranges = uniqRanges(ranges)
	return rangedString(ranges)
}

// RangedHostlist compresses hosts keeping their order and duplicates, joining
// only neighbours, as `scontrol show hostlist` does: n3,n1,n2 gives n[3,1-2].
func RangedHostlist(hosts []string) string {
	var ranges []hostRange
	for _, h := range hosts {
		ranges = pushRange(ranges, parseHost(h))
	}
	return rangedString(ranges)
}

// HostlistCount is the number of hosts an expression names, duplicates
// counted, without expanding it.
func HostlistCount(expr string) (int, error) {
	ranges, err := parseHostlist(expr)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range ranges {
		n += r.count()
	}
	return n, nil
}

func formatHost(prefix string, n uint64, width int) string {
	s := strconv.FormatUint(n, 10)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return prefix + s
}

// parseHostlist is _hostlist_create_bracketed: tokens separated by "\t, ",
// a bracket pair never split.
func parseHostlist(expr string) ([]hostRange, error) {
	var out []hostRange
	total := 0
	for _, tok := range hostTokens(expr) {
		open := strings.LastIndexByte(tok, '[')
		if open < 0 {
			out = pushRange(out, parseHost(tok))
			total++
			continue
		}
		rel := strings.IndexByte(tok[open:], ']')
		if rel < 0 {
			return nil, &HostlistError{Expr: expr, Msg: "unbalanced `['"}
		}
		closeAt := open + rel
		if closeAt != len(tok)-1 {
			return nil, &HostlistError{Expr: expr, Msg: fmt.Sprintf("text after `]' in `%s'", tok)}
		}
		ranges, err := parseRangeList(tok[open+1:closeAt], expr)
		if err != nil {
			return nil, err
		}
		prefixes, err := expandPrefix(tok[:open], expr)
		if err != nil {
			return nil, err
		}
		for _, p := range prefixes {
			for _, r := range ranges {
				total += r.count()
				if total > maxHostsPerList {
					return nil, &HostlistError{Expr: expr, Msg: "too many hosts"}
				}
				r.prefix = p
				out = pushRange(out, r)
			}
		}
	}
	return out, nil
}

// hostTokens is _next_tok with separators "\t, ": separators inside
// brackets do not split a token.
func hostTokens(s string) []string {
	isSep := func(c byte) bool { return c == ',' || c == ' ' || c == '\t' }
	var toks []string
	i := 0
	for i < len(s) {
		for i < len(s) && isSep(s[i]) {
			i++
		}
		if i >= len(s) {
			break
		}
		start := i
		depth := 0
		for i < len(s) && (depth > 0 || !isSep(s[i])) {
			switch s[i] {
			case '[':
				depth++
			case ']':
				if depth > 0 {
					depth--
				}
			}
			i++
		}
		toks = append(toks, s[start:i])
	}
	return toks
}

// expandPrefix expands the bracketed ranges a prefix may hold
// ("rack[1-2]-n" gives rack1-n, rack2-n), as _push_range_list does.
func expandPrefix(prefix, expr string) ([]string, error) {
	open := strings.LastIndexByte(prefix, '[')
	if open < 0 {
		return []string{prefix}, nil
	}
	rel := strings.IndexByte(prefix[open:], ']')
	if rel < 0 {
		return nil, &HostlistError{Expr: expr, Msg: "unbalanced `['"}
	}
	closeAt := open + rel
	ranges, err := parseRangeList(prefix[open+1:closeAt], expr)
	if err != nil {
		return nil, err
	}
	heads, err := expandPrefix(prefix[:open], expr)
	if err != nil {
		return nil, err
	}
	tail := prefix[closeAt+1:]
	var out []string
	for _, h := range heads {
		for _, r := range ranges {
			for n := r.lo; n <= r.hi; n++ {
				out = append(out, formatHost(h, n, r.width)+tail)
				if len(out) > maxHostsPerList {
					return nil, &HostlistError{Expr: expr, Msg: "too many hosts"}
				}
			}
		}
	}
	return out, nil
}

// parseRangeList parses "1-3,7,010-012" (_parse_range_list).
func parseRangeList(s, expr string) ([]hostRange, error) {
	var out []hostRange
	for _, part := range strings.Split(s, ",") {
		r, err := parseSingleRange(part, expr)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// parseSingleRange is _parse_single_range: "lo[-hi]", width taken from lo.
func parseSingleRange(s, expr string) (hostRange, error) {
	bad := &HostlistError{Expr: expr, Msg: fmt.Sprintf("Invalid range: `%s'", s)}
	if strings.IndexByte(s, 'x') >= 0 {
		return hostRange{}, bad
	}
	loStr, hiStr, hasHi := strings.Cut(s, "-")
	if !isDigits(loStr) || (hasHi && hiStr != "" && !isDigits(hiStr)) {
		return hostRange{}, bad
	}
	lo, err := strconv.ParseUint(loStr, 10, 64)
	if err != nil {
		return hostRange{}, bad
	}
	hi := lo
	if hasHi && hiStr != "" {
		if hi, err = strconv.ParseUint(hiStr, 10, 64); err != nil {
			return hostRange{}, bad
		}
	}
	if lo > hi {
		return hostRange{}, bad
	}
	if hi-lo+1 > maxHostsPerRange {
		return hostRange{}, &HostlistError{Expr: expr, Msg: fmt.Sprintf("Too many hosts in range `%s'", s)}
	}
	return hostRange{lo: lo, hi: hi, width: len(loStr)}, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseHost splits a host name into prefix and numeric suffix
// (hostname_create): "node01" is prefix "node", 1, width 2; "login" has no
// suffix. A suffix too long for 64 bits is kept as part of the name.
func parseHost(h string) hostRange {
	i := len(h)
	for i > 0 && h[i-1] >= '0' && h[i-1] <= '9' {
		i--
	}
	if i == len(h) || len(h)-i > 18 {
		return hostRange{prefix: h, single: true}
	}
	n, _ := strconv.ParseUint(h[i:], 10, 64)
	return hostRange{prefix: h[:i], lo: n, hi: n, width: len(h) - i}
}

// pushRange appends r, extending the last range when r continues it
// (hostlist_push_range).
func pushRange(rs []hostRange, r hostRange) []hostRange {
	if n := len(rs); n > 0 {
		tail := &rs[n-1]
		if !tail.single && !r.single && tail.hi+1 == r.lo &&
			prefixCmp(tail, &r) == 0 && widthCombine(tail, &r) {
			tail.hi = r.hi
			return rs
		}
	}
	return append(rs, r)
}

// zeroPadded is the number of zeros needed to pad num to width.
func zeroPadded(num uint64, width int) int {
	n := len(strconv.FormatUint(num, 10))
	if width > n {
		return width - n
	}
	return 0
}

// widthEquiv is _width_equiv: two widths are equivalent when one of them can
// be applied to both numbers without changing either's zero padding; the
// width that would not change is adjusted, as Slurm does.
func widthEquiv(n uint64, wn *int, m uint64, wm *int) bool {
	if *wn == *wm {
		return true
	}
	npad, nmpad := zeroPadded(n, *wn), zeroPadded(n, *wm)
	mpad, mnpad := zeroPadded(m, *wm), zeroPadded(m, *wn)
	switch {
	case npad != nmpad && mpad != mnpad:
		return false
	case npad != nmpad:
		*wm = *wn
	default:
		*wn = *wm
	}
	return true
}

func widthCombine(a, b *hostRange) bool {
	return widthEquiv(a.lo, &a.width, b.lo, &b.width)
}

// prefixCmp is hostrange_prefix_cmp: natural order of prefixes; for equal
// prefixes a host without numeric suffix sorts first.
func prefixCmp(a, b *hostRange) int {
	if c := natCompare(a.prefix, b.prefix); c != 0 {
		return c
	}
	return boolInt(b.single) - boolInt(a.single)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rangeCmp is hostrange_cmp.
func rangeCmp(a, b *hostRange) int {
	if c := prefixCmp(a, b); c != 0 {
		return c
	}
	if widthCombine(a, b) {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	}
	return a.width - b.width
}

// uniqRanges is hostlist_uniq: sort, then join neighbours, dropping
// duplicate hosts.
func uniqRanges(rs []hostRange) []hostRange {
	sort.SliceStable(rs, func(i, j int) bool { return rangeCmp(&rs[i], &rs[j]) < 0 })
	out := rs[:0]
	for i := range rs {
		r := rs[i]
		if n := len(out); n > 0 && joinRange(&out[n-1], &r) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// joinRange merges b into a when they share a prefix and overlap or touch
// (hostrange_join); it reports whether b was absorbed.
func joinRange(a, b *hostRange) bool {
	if prefixCmp(a, b) != 0 || !widthCombine(a, b) {
		return false
	}
	switch {
	case a.single && b.single:
		return true
	case a.single || b.single:
		return false
	case a.hi+1 == b.lo:
		a.hi = b.hi
		return true
	case a.hi >= b.lo:
		if a.hi < b.hi {
			a.hi = b.hi
		}
		return true
	}
	return false
}

// rangedString is hostlist_ranged_string: consecutive ranges with the same
// prefix share one bracket, "n[1-3,5],gpu7".
func rangedString(rs []hostRange) string {
	var b strings.Builder
	for i := 0; i < len(rs); {
		if i > 0 {
			b.WriteByte(',')
		}
		r := &rs[i]
		b.WriteString(r.prefix)
		var next *hostRange
		if i+1 < len(rs) {
			next = &rs[i+1]
		}
		bracket := r.count() > 1 || withinRange(r, next)
		if bracket {
			b.WriteByte('[')
		}
		first := true
		for {
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(numString(&rs[i]))
			i++
			if i >= len(rs) || !withinRange(&rs[i], &rs[i-1]) {
				break
			}
		}
		if bracket {
			b.WriteByte(']')
		}
	}
	return b.String()
}

// withinRange is hostrange_within_range: same prefix, both numbered.
func withinRange(a, b *hostRange) bool {
	if a == nil || b == nil {
		return false
	}
	if prefixCmp(a, b) != 0 {
		return false
	}
	return !a.single && !b.single
}

func numString(r *hostRange) string {
	if r.single {
		return ""
	}
	s := formatHost("", r.lo, r.width)
	if r.lo < r.hi {
		s += "-" + formatHost("", r.hi, r.width)
	}
	return s
}

// natCompare is Martin Pool's strnatcmp, which Slurm uses to order host
// name prefixes: runs of digits compare as numbers ("rack2" < "rack10"),
// runs with a leading zero compare left-aligned.
func natCompare(a, b string) int {
	at := func(s string, i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	isSpace := func(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
	compareRight := func(a, b string) int {
		bias := 0
		for i := 0; ; i++ {
			ca, cb := at(a, i), at(b, i)
			switch {
			case !isDigit(ca) && !isDigit(cb):
				return bias
			case !isDigit(ca):
				return -1
			case !isDigit(cb):
				return 1
			case ca < cb:
				if bias == 0 {
					bias = -1
				}
			case ca > cb:
				if bias == 0 {
					bias = 1
				}
			}
		}
	}
	compareLeft := func(a, b string) int {
		for i := 0; ; i++ {
			ca, cb := at(a, i), at(b, i)
			switch {
			case !isDigit(ca) && !isDigit(cb):
				return 0
			case !isDigit(ca):
				return -1
			case !isDigit(cb):
				return 1
			case ca < cb:
				return -1
			case ca > cb:
				return 1
			}
		}
	}
	ai, bi := 0, 0
	for {
		ca, cb := at(a, ai), at(b, bi)
		for isSpace(ca) {
			ai++
			ca = at(a, ai)
		}
		for isSpace(cb) {
			bi++
			cb = at(b, bi)
		}
		if isDigit(ca) && isDigit(cb) {
			var r int
			if ca == '0' || cb == '0' {
				r = compareLeft(a[ai:], b[bi:])
			} else {
				r = compareRight(a[ai:], b[bi:])
			}
			if r != 0 {
				return r
			}
		}
		if ca == 0 && cb == 0 {
			return 0
		}
		if ca < cb {
			return -1
		}
		if ca > cb {
			return 1
		}
		ai++
		bi++
	}
}
