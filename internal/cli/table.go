package cli

import (
	"io"
	"strings"
	"unicode/utf8"
)

// streamTable prints rows as text/tabwriter does with a padding of two
// (each cell but a row's last padded to its column's widest, plus two
// spaces), but a block of rows at a time, so that a listing of any length
// holds one block in memory. A column's width only grows from one block to
// the next: columns stay aligned unless a later cell is wider than every
// one before it.
type streamTable struct {
	w      io.Writer
	block  int
	rows   [][]string
	widths []int
	err    error
}

// tableBlock is how many rows a streamTable holds before it prints them.
const tableBlock = 1000

func newStreamTable(w io.Writer) *streamTable { return &streamTable{w: w, block: tableBlock} }

// row adds a row; it prints the block once full.
func (t *streamTable) row(cells ...string) {
	t.rows = append(t.rows, cells)
	if len(t.rows) >= t.block {
		t.flush()
	}
}

// flush prints the rows held and returns the first write error so far.
func (t *streamTable) flush() error {
	for _, r := range t.rows {
		for i, c := range r[:max(len(r)-1, 0)] {
			if i == len(t.widths) {
				t.widths = append(t.widths, 0)
			}
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	t.rows = t.rows[:0]
	if _, err := io.WriteString(t.w, b.String()); err != nil && t.err == nil {
		t.err = err
	}
	return t.err
}
