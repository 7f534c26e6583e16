package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

func TestPrefixer(t *testing.T) {
	var out, errw bytes.Buffer
	p := newPrefixer(&out, &errw, true)
	p.write(api.LogEntry{JobNum: 0, Stream: "stdout", Data: []byte("a\nb")})
	p.write(api.LogEntry{JobNum: 1, Stream: "stdout", Data: []byte("x\n")})
	p.write(api.LogEntry{JobNum: 0, Stream: "stdout", Data: []byte("c\n")})
	p.write(api.LogEntry{JobNum: 1, Stream: "stderr", Data: []byte("oops")})
	p.flush()
	if want := "node-0 | a\nnode-1 | x\nnode-0 | bc\n"; out.String() != want {
		t.Errorf("stdout = %q, want %q", out.String(), want)
	}
	if want := "node-1 | oops\n"; errw.String() != want {
		t.Errorf("stderr = %q, want %q", errw.String(), want)
	}
	out.Reset()
	single := newPrefixer(&out, &errw, false)
	single.write(api.LogEntry{Stream: "stdout", Data: []byte("raw, no newline")})
	single.flush()
	if out.String() != "raw, no newline" {
		t.Errorf("a single job's output must pass through untouched: %q", out.String())
	}
}

func TestRunExit(t *testing.T) {
	code := func(v int) *int { return &v }
	tests := map[string]struct {
		run  api.Run
		want int
	}{
		"done":                 {api.Run{Status: api.StatusDone, ExitCode: code(0)}, 0},
		"failed with its code": {api.Run{Status: api.StatusFailed, ExitCode: code(3)}, 3},
		"terminated by signal": {api.Run{Status: api.StatusTerminated, ExitCode: code(143)}, 143},
		"lost, no code":        {api.Run{Status: api.StatusFailed, ExitCode: code(-1)}, 1},
		"stopped before start": {api.Run{Status: api.StatusTerminated}, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := runExit(&bytes.Buffer{}, &tc.run)
			got := 0
			var ee *ExitError
			if errors.As(err, &ee) {
				got = ee.Code
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if got != tc.want {
				t.Errorf("exit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAgo(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	tests := map[time.Duration]string{
		3 * time.Second:  "now",
		42 * time.Second: "42 secs ago",
		time.Minute:      "1 min ago",
		5 * time.Minute:  "5 mins ago",
		3 * time.Hour:    "3 hours ago",
	}
	for d, want := range tests {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestPrintPlan(t *testing.T) {
	var b bytes.Buffer
	printPlan(&b, "x.yml", &api.Plan{Name: "train", Resources: "2xCPU", Nodes: 1, Rows: []api.PlanRow{
		{Node: "n1", Resources: "0/2 CPU, 1GB/2GB", Fits: "later", Why: "not enough free CPUs"},
	}, Unsupported: []string{"volumes", "schedule"}})
	for _, want := range []string{" Run            train\n", "n1", "later (not enough free CPUs)", "No node can start it now",
		"Not supported yet (parsed and stored, no effect): volumes, schedule"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}

func TestConfirm(t *testing.T) {
	for in, want := range map[string]bool{"y\n": true, "yes\n": true, "n\n": false, "": false, "Y": true} {
		if got := confirm(strings.NewReader(in), &bytes.Buffer{}, "? "); got != want {
			t.Errorf("confirm(%q) = %v", in, got)
		}
	}
}

func TestParseWeights(t *testing.T) {
	w, err := parseWeights("age=5, fairshare=0,max-age=1h,favor-small=true")
	if err != nil {
		t.Fatal(err)
	}
	if w.Age != 5 || w.Fairshare != 0 || w.MaxAge != time.Hour || !w.FavorSmall || w.Priority != 10000 {
		t.Errorf("weights = %+v", w)
	}
	for _, bad := range []string{"age", "speed=3", "age=-1", "max-age=soon"} {
		if _, err := parseWeights(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
