package web

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/client"
)

// TestSearchLines: matches are capped at maxMatches lines, jobs in order,
// numbered per job, each match marked and the rest escaped.
func TestSearchLines(t *testing.T) {
	var big strings.Builder
	for i := range maxMatches + 5 {
		fmt.Fprintf(&big, "x%d <y>\n", i)
	}
	out := map[int]*bytes.Buffer{1: bytes.NewBufferString(big.String()), 0: bytes.NewBufferString("a <x> x\nno\n")}
	m, err := matcher("x", false)
	if err != nil {
		t.Fatal(err)
	}
	got, capped := searchLines(out, m)
	if !capped || len(got) != maxMatches {
		t.Fatalf("%d matches, capped %v; want %d, capped", len(got), capped, maxMatches)
	}
	if got[0].Job != 0 || got[0].Line != 1 || got[0].HTML != "a &lt;<mark>x</mark>&gt; <mark>x</mark>" {
		t.Errorf("first match = %+v", got[0])
	}
	if got[1].Job != 1 || got[1].Line != 1 || got[1].HTML != "<mark>x</mark>0 &lt;y&gt;" {
		t.Errorf("second match = %+v", got[1])
	}
	re, err := matcher(`^no$|\d{4}`, true)
	if err != nil {
		t.Fatal(err)
	}
	got, capped = searchLines(out, re)
	if capped || len(got) != 6 || got[0].Line != 2 || got[1].HTML != "x<mark>1000</mark> &lt;y&gt;" {
		t.Errorf("regexp matches = %+v (capped %v)", got, capped)
	}
	if _, err := matcher("a(", true); err == nil {
		t.Error("a bad regexp was taken")
	}
	if _, err := matcher(strings.Repeat("a", maxQuery+1), false); err == nil {
		t.Error("an over-long search was taken")
	}
}

// TestProblemsPlaced: the API's refusal of a field is shown at its line.
func TestProblemsPlaced(t *testing.T) {
	data := []byte("type: task\nname: a\nenv:\n  - X=1\ncommands:\n  - echo\n")
	got := problems(&client.APIError{Status: 400, Field: "env", Message: "env: the project has no secret Y"}, "a.yml", data)
	if len(got) != 1 || !strings.HasPrefix(got[0], "a.yml:4:3:") || !strings.HasSuffix(got[0], "env: the project has no secret Y") {
		t.Errorf("problems = %q", got)
	}
}

// TestSubmitRefusesLocalFiles: a repo or file on the submitter's machine
// cannot come through the dashboard; it says so at the field's line.
func TestSubmitRefusesLocalFiles(t *testing.T) {
	data := []byte("type: task\nrepos:\n  - .\nfiles:\n  - configs:~/configs\ncommands:\n  - echo\n")
	_, err := submitRequest("t.yml", data, "")
	got := problems(err, "t.yml", data)
	if len(got) != 2 || !strings.HasPrefix(got[0], "t.yml:3:") || !strings.Contains(got[0], "repos[0]: . is on your machine") ||
		!strings.HasPrefix(got[1], "t.yml:5:") || !strings.Contains(got[1], "files[0]: configs is on your machine") {
		t.Errorf("problems = %q", got)
	}
	if _, err := submitRequest("t.yml", []byte("type: task\ncommands:\n  - echo\n"), "p"); err != nil {
		t.Errorf("a plain task: %v", err)
	}
}
