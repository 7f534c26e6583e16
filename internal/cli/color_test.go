package cli

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/berth-hq/berth/internal/api"
)

// TestColorDecision: colour only on a terminal, never with NO_COLOR set
// (to anything but empty), TERM=dumb or --no-color.
func TestColorDecision(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		tty     bool
		env     func(string) string
		noColor bool
		want    bool
	}{
		{true, env("TERM", "xterm-256color"), false, true},
		{true, env(), false, true},
		{false, env("TERM", "xterm"), false, false},
		{true, env("NO_COLOR", "1"), false, false},
		{true, env("NO_COLOR", ""), false, true},
		{true, env("TERM", "dumb"), false, false},
		{true, env(), true, false},
	} {
		if got := colorDecision(c.tty, c.env, c.noColor); got != c.want {
			t.Errorf("tty %v NO_COLOR %q TERM %q --no-color %v: colour %v, want %v", c.tty, c.env("NO_COLOR"), c.env("TERM"), c.noColor, got, c.want)
		}
	}
}

// TestPaletteOnAPty: a pseudo-terminal gets colour, a pipe and a file do
// not, and NO_COLOR turns it off on the terminal too.
func TestPaletteOnAPty(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "xterm")
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	t.Cleanup(func() { master.Close(); tty.Close() })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !paletteFor(tty, false).on {
		t.Error("no colour on a pty")
	}
	if paletteFor(tty, true).on {
		t.Error("colour on a pty with --no-color")
	}
	if paletteFor(w, false).on || paletteFor(f, false).on || paletteFor(&bytes.Buffer{}, false).on {
		t.Error("colour on a pipe, a file or a buffer")
	}
	t.Setenv("NO_COLOR", "1")
	if paletteFor(tty, false).on {
		t.Error("colour on a pty with NO_COLOR=1")
	}
}

var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestColouredTablesAlign: berth ps's and berth fleet's tables coloured
// are the plain tables with colours added: without the escapes, the same
// bytes (so the same alignment), each status in its colour; plain output
// has no escape.
func TestColouredTablesAlign(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	runs := []*api.Run{
		{ID: 1, Name: "a-long-run-name", Status: api.StatusRunning, SubmittedAt: now.Add(-time.Minute)},
		{ID: 22, Name: "b", Status: api.StatusFailed, SubmittedAt: now.Add(-time.Hour)},
		{ID: 333, Name: "c", Status: api.StatusSubmitted, Reason: "Resources", SubmittedAt: now},
	}
	table := func(on bool) string {
		var b bytes.Buffer
		rt := newRunTable(&b, false, now, palette{on: on})
		for _, r := range runs {
			if err := rt.add(r); err != nil {
				t.Fatal(err)
			}
		}
		rt.end()
		return b.String()
	}
	plain, coloured := table(false), table(true)
	if strings.Contains(plain, "\x1b") {
		t.Errorf("plain ps has escapes:\n%q", plain)
	}
	if got := sgr.ReplaceAllString(coloured, ""); got != plain {
		t.Errorf("coloured ps without its colours:\n%s\nwant:\n%s", got, plain)
	}
	for _, want := range []string{sgrGreen + "running" + sgrReset, sgrRed + "failed" + sgrReset, sgrYellow + "submitted" + sgrReset} {
		if !strings.Contains(coloured, want) {
			t.Errorf("coloured ps lacks %q:\n%q", want, coloured)
		}
	}
	nodes := []api.Node{
		{NodeInfo: api.NodeInfo{Name: "n1", Fleet: "gpu", CPUs: 8}, Status: "idle"},
		{NodeInfo: api.NodeInfo{Name: "node-two", Fleet: "gpu", CPUs: 8}, Status: "drained (maintenance)"},
		{NodeInfo: api.NodeInfo{Name: "n3", CPUs: 8}, Status: "offline"},
	}
	var pf, cf bytes.Buffer
	if err := printFleet(&pf, nodes, palette{}); err != nil {
		t.Fatal(err)
	}
	if err := printFleet(&cf, nodes, palette{on: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(pf.String(), "\x1b") {
		t.Errorf("plain fleet has escapes:\n%q", pf.String())
	}
	if got := sgr.ReplaceAllString(cf.String(), ""); got != pf.String() {
		t.Errorf("coloured fleet without its colours:\n%s\nwant:\n%s", got, pf.String())
	}
	for _, want := range []string{sgrGreen + "idle" + sgrReset, sgrYellow + "drained (maintenance)" + sgrReset, sgrRed + "offline" + sgrReset} {
		if !strings.Contains(cf.String(), want) {
			t.Errorf("coloured fleet lacks %q:\n%q", want, cf.String())
		}
	}
}
