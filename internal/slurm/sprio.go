package slurm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// PrioRow is one pending job's priority in sprio, each factor already
// weighted, as slurmctld sends them (priority_factors_object_t).
type PrioRow struct {
	JobID     uint32
	Partition string
	User      string
	Age       float64
	Assoc     float64
	Fairshare float64
	JobSize   float64
	PartPrio  float64 // the partition factor
	QOS       float64
	Site      int64
	Nice      int64
}

// Priority is get_priority_from_factors: the factors' sum, less the nice.
func (r PrioRow) Priority() float64 {
	return r.Age + r.Assoc + r.Fairshare + r.JobSize + r.PartPrio + r.QOS + float64(r.Site) - float64(r.Nice)
}

// PrioWeights are the PriorityWeight* of slurm.conf: which columns sprio
// shows by default, and its -w line.
type PrioWeights struct {
	Age, Assoc, Fairshare, JobSize, Partition, QOS int64
	TRES                                           string
}

// SprioOptions selects sprio's output.
type SprioOptions struct {
	Long, Normalized, NoHeader, Weights bool
	Users                               bool // -u given: the USER column
}

type sprioField struct {
	code  byte
	width int
	right bool
}

// sprioFormat is sprio's default format for the options and weights
// (sprio.c: main).
func sprioFormat(o SprioOptions, w PrioWeights) string {
	if o.Long {
		if o.Normalized {
			return "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t"
		}
		return "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
	}
	f := "%.15i %9r"
	if o.Users {
		f += " %.8u"
	}
	add := func(weight bool, norm, plain string) {
		if weight {
			if o.Normalized {
				f += " " + norm
			} else {
				f += " " + plain
			}
		}
	}
	if o.Normalized {
		f += " %10y"
	} else {
		f += " %.10Y %.10S"
	}
	add(w.Age != 0, "%10a", "%.10A")
	add(w.Assoc != 0, "%10b", "%.10B")
	add(w.Fairshare != 0, "%10f", "%.10F")
	add(w.JobSize != 0, "%10j", "%.10J")
	add(w.Partition != 0, "%10p", "%.10P")
	add(w.QOS != 0, "%10q", "%.10Q")
	add(w.TRES != "", "%20t", "%.20T")
	return f
}

func parseSprioFormat(f string) []sprioField {
	var out []sprioField
	for _, tok := range strings.Fields(f) {
		tok = strings.TrimPrefix(tok, "%")
		right := strings.HasPrefix(tok, ".")
		tok = strings.TrimPrefix(tok, ".")
		n, _ := strconv.Atoi(tok[:len(tok)-1])
		out = append(out, sprioField{code: tok[len(tok)-1], width: n, right: right})
	}
	return out
}

// sprioStr is sprio's _print_str: right-justified or cut to the width,
// then padded to it.
func sprioStr(s string, width int, right bool) string {
	if right {
		s = fmt.Sprintf("%*s", width, s)
	}
	if len(s) > width {
		s = s[:width]
	}
	return s + strings.Repeat(" ", width-len(s))
}

// FormatSprio is sprio's output: the header, then the -w line alone or
// the jobs sorted by id.
func FormatSprio(rows []PrioRow, w PrioWeights, o SprioOptions) string {
	fields := parseSprioFormat(sprioFormat(o, w))
	var b strings.Builder
	line := func(cell func(c byte) string) {
		for i, f := range fields {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(sprioStr(cell(f.code), f.width, f.right))
		}
		b.WriteByte('\n')
	}
	if !o.NoHeader {
		line(func(c byte) string { return sprioTitles[c] })
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	if o.Weights {
		line(func(c byte) string {
			switch c {
			case 'i':
				return "Weights"
			case 'S':
				return "1"
			case 'a', 'A':
				return num(float64(w.Age))
			case 'b', 'B':
				return num(float64(w.Assoc))
			case 'f', 'F':
				return num(float64(w.Fairshare))
			case 'j', 'J':
				return num(float64(w.JobSize))
			case 'p', 'P':
				return num(float64(w.Partition))
			case 'q', 'Q':
				return num(float64(w.QOS))
			case 't', 'T':
				return w.TRES
			}
			return ""
		})
		return b.String()
	}
	rows = append([]PrioRow(nil), rows...)
	sort.SliceStable(rows, func(a, c int) bool { return rows[a].JobID < rows[c].JobID })
	norm := func(v float64, weight int64) string {
		if weight == 0 {
			return strconv.FormatFloat(0, 'f', 7, 64)
		}
		return strconv.FormatFloat(v/float64(weight), 'f', 7, 64)
	}
	for _, r := range rows {
		line(func(c byte) string {
			switch c {
			case 'i':
				return strconv.FormatUint(uint64(r.JobID), 10)
			case 'r':
				return r.Partition
			case 'u':
				return r.User
			case 'Y':
				return strconv.FormatInt(int64(r.Priority()), 10)
			case 'y':
				return fmt.Sprintf("%16.14f", r.Priority()/float64(uint32(0xffffffff)))
			case 'S':
				return strconv.FormatInt(r.Site, 10)
			case 'A':
				return num(r.Age)
			case 'a':
				return norm(r.Age, w.Age)
			case 'B':
				return num(r.Assoc)
			case 'b':
				return norm(r.Assoc, w.Assoc)
			case 'F':
				return num(r.Fairshare)
			case 'f':
				return norm(r.Fairshare, w.Fairshare)
			case 'J':
				return num(r.JobSize)
			case 'j':
				return norm(r.JobSize, w.JobSize)
			case 'P':
				return num(r.PartPrio)
			case 'p':
				return norm(r.PartPrio, w.Partition)
			case 'Q':
				return num(r.QOS)
			case 'q':
				return norm(r.QOS, w.QOS)
			case 'N':
				return strconv.FormatInt(r.Nice, 10)
			}
			return ""
		})
	}
	return b.String()
}

var sprioTitles = map[byte]string{
	'i': "JOBID", 'r': "PARTITION", 'u': "USER", 'Y': "PRIORITY", 'y': "PRIORITY", 'S': "SITE",
	'A': "AGE", 'a': "AGE", 'B': "ASSOC", 'b': "ASSOC", 'F': "FAIRSHARE", 'f': "FAIRSHARE",
	'J': "JOBSIZE", 'j': "JOBSIZE", 'P': "PARTITION", 'p': "PARTITION", 'Q': "QOS", 'q': "QOS",
	'N': "NICE", 'T': "TRES", 't': "TRES",
}
