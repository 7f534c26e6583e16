package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// Within a block, a streamTable prints what tabwriter prints; across
// blocks, a column never narrows.
func TestStreamTable(t *testing.T) {
	rows := [][]string{{"NAME", "ID", "STATUS"}, {"a", "1", "running"}, {"ünïcode-name", "22", "done"}, {"  job 0", "333", "x"}}
	var want, got bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', 0)
	st := newStreamTable(&got)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
		st.row(r...)
	}
	tw.Flush()
	if err := st.flush(); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("streamTable printed\n%s\ntabwriter\n%s", got.String(), want.String())
	}

	got.Reset()
	st = newStreamTable(&got)
	st.block = 2
	st.row("NAME", "ID", "X")
	st.row("a-long-name", "1", "x")
	st.row("b", "2", "y") // a later block, narrower
	st.flush()
	want.Reset()
	want.WriteString("NAME         ID  X\na-long-name  1   x\nb            2   y\n")
	if got.String() != want.String() {
		t.Errorf("blocks printed\n%q\nwant\n%q", got.String(), want.String())
	}
}

// jsonList writes what printJSON writes for the whole list.
func TestJSONList(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for n := range 4 {
		runs := []api.Run{}
		for i := range n {
			runs = append(runs, api.Run{ID: int64(i + 1), Name: fmt.Sprintf("r<%d>", i), SubmittedAt: at})
		}
		var want, got bytes.Buffer
		if err := printJSON(&want, runs); err != nil {
			t.Fatal(err)
		}
		l := newJSONList(&got)
		for i := range runs {
			if err := l.add(&runs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.end(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d runs: jsonList wrote\n%s\nprintJSON\n%s", n, got.String(), want.String())
		}
	}
}
