package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSignal(t *testing.T) {
	tests := map[string]struct {
		in   string
		want Signal
		str  string // String(); "" = the input
	}{
		"name":              {in: "USR1", want: Signal{Number: 10, Before: 60}},
		"SIG prefix":        {in: "SIGUSR2", want: Signal{Number: 12, Before: 60}, str: "USR2"},
		"lower case":        {in: "usr1@5m", want: Signal{Number: 10, Before: 300}, str: "USR1@5m"},
		"number":            {in: "10", want: Signal{Number: 10, Before: 60}, str: "USR1"},
		"slurm seconds":     {in: "B:USR1@300", want: Signal{Number: 10, Before: 300, BatchOnly: true}, str: "B:USR1@5m"},
		"batch lower":       {in: "b:TERM@1h30m", want: Signal{Number: 15, Before: 5400, BatchOnly: true}, str: "B:TERM@1h30m"},
		"steps only":        {in: "s:USR2@50", want: Signal{Number: 12, Before: 50, StepsOnly: true}, str: "S:USR2@50s"},
		"real-time":         {in: "40@90s", want: Signal{Number: 40, Before: 90}, str: "40@90s"},
		"zero before":       {in: "INT@0", want: Signal{Number: 2, Before: 0}, str: "INT@0s"},
		"aliases":           {in: "SIGIOT", want: Signal{Number: 6, Before: 60}, str: "ABRT"},
		"spaces":            {in: " USR1@60 ", want: Signal{Number: 10, Before: 60}, str: "USR1"},
		"default is stated": {in: "HUP@60s", want: Signal{Number: 1, Before: 60}, str: "HUP"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSignal(tc.in)
			if err != nil {
				t.Fatalf("ParseSignal(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			want := tc.str
			if want == "" {
				want = tc.in
			}
			if got.String() != want {
				t.Errorf("String() = %q, want %q", got.String(), want)
			}
			again, err := ParseSignal(got.String())
			if err != nil || again != got {
				t.Errorf("ParseSignal(String()) = %+v, %v; want %+v", again, err, got)
			}
		})
	}
}

func TestParseSignalErrors(t *testing.T) {
	tests := map[string]string{
		"":           "empty: give a signal such as USR1 or USR1@5m, or remove `signal`",
		"USR3":       `unknown signal "USR3"; did you mean "USR1"? (expected a name such as USR1, USR2, TERM or INT, or a number 1..64)`,
		"0":          "signal number 0 is out of range 1..64",
		"65@1m":      "signal number 65 is out of range 1..64",
		"USR1@":      `"USR1@": give the time before the limit after @, e.g. USR1@5m`,
		"USR1@5x":    `"USR1@5x": time before the limit: invalid duration "5x" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`,
		"USR1@-5":    `"USR1@-5": time before the limit: duration "-5" is negative`,
		"@5m":        "a signal name or number is required before @ (e.g. USR1@5m)",
		"R:USR1@300": `"R:USR1@300": Slurm's R (also at the end of a reservation) has no meaning in Berth, which has no reservations; remove it`,
		"X:USR1":     `invalid signal "X:USR1" (expected [B:|S:]SIG[@TIME], e.g. USR1, B:USR1@5m or 10@300)`,
	}
	for in, want := range tests {
		_, err := ParseSignal(in)
		if err == nil {
			t.Errorf("ParseSignal(%q) succeeded, want %q", in, want)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseSignal(%q): %v is not an ErrInvalid", in, err)
		}
		if err.Error() != want {
			t.Errorf("ParseSignal(%q):\n got %s\nwant %s", in, err, want)
		}
	}
}

// TestParseSignalField: `signal:` in a file, its positions and messages,
// and the decoded value.
func TestParseSignalField(t *testing.T) {
	tests := map[string]struct {
		in   string
		want string   // the decoded field, when it parses
		errs []string // else the problems
	}{
		"string":       {in: "max_duration: 1h\nsignal: B:USR1@5m\n", want: "B:USR1@5m"},
		"number":       {in: "max_duration: 1h\nsignal: 10\n", want: "10"},
		"slurm form":   {in: "max_duration: 1h\nsignal: \"B:USR1@300\"\n", want: "B:USR1@300"},
		"unknown":      {in: "max_duration: 1h\nsignal: USR3@5m\n", errs: []string{`f.yml:4:9: signal: unknown signal "USR3"; did you mean "USR1"? (expected a name such as USR1, USR2, TERM or INT, or a number 1..64)`}},
		"bad time":     {in: "max_duration: 1h\nsignal: USR1@soon\n", errs: []string{`f.yml:4:9: signal: "USR1@soon": time before the limit: invalid duration "soon" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`}},
		"a list":       {in: "max_duration: 1h\nsignal: [USR1]\n", errs: []string{"f.yml:4:9: signal: must be a signal such as USR1, B:USR1@5m or 10@300, not a list"}},
		"empty string": {in: "max_duration: 1h\nsignal: ''\n", errs: []string{"f.yml:4:9: signal: empty: give a signal such as USR1 or USR1@5m, or remove `signal`"}},
		"no limit":     {in: "signal: USR1\n", errs: []string{"f.yml:3:9: signal: needs `max_duration`: the signal is sent that long before the time limit, and this run has none"}},
		"misspelt":     {in: "max_duration: 1h\nsignl: USR1\n", errs: []string{`f.yml:4:1: signl: unknown field; did you mean "signal"?`}},
		"null":         {in: "max_duration: 1h\nsignal:\n", want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task, err := Parse("f.yml", []byte("type: task\ncommands: [x]\n"+tc.in))
			if tc.errs != nil {
				if err == nil {
					t.Fatalf("Parse succeeded with signal %q, want %q", task.Signal, tc.errs)
				}
				if diff := cmp.Diff(tc.errs, strings.Split(err.Error(), "\n")); diff != "" {
					t.Errorf("mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if task.Signal != tc.want {
				t.Errorf("signal = %q, want %q", task.Signal, tc.want)
			}
		})
	}
}

// TestValidateSignal: the same rules on a Task from JSON, as the server
// gets it, and SetFields lists the field in schema order.
func TestValidateSignal(t *testing.T) {
	var task Task
	if err := json.Unmarshal([]byte(`{"type":"task","commands":["x"],"max_duration":600,"signal":"B:USR1@300","stop_duration":5}`), &task); err != nil {
		t.Fatal(err)
	}
	task.Normalize()
	if err := task.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if diff := cmp.Diff([]string{"commands", "max_duration", "stop_duration", "signal"}, task.SetFields()); diff != "" {
		t.Errorf("SetFields mismatch (-want +got):\n%s", diff)
	}
	if got := task.ParsedSignal(); got == nil || *got != (Signal{Number: 10, Before: 300, BatchOnly: true}) {
		t.Errorf("ParsedSignal = %+v", got)
	}
	task.Signal = "R:USR1"
	err := task.Validate()
	if err == nil || err.Error() != `signal: "R:USR1": Slurm's R (also at the end of a reservation) has no meaning in Berth, which has no reservations; remove it` {
		t.Errorf("Validate of R: = %v", err)
	}
	if task.ParsedSignal() != nil {
		t.Errorf("ParsedSignal of an invalid signal is not nil")
	}
	task.Signal, task.MaxDuration = "USR1", nil
	if err := task.Validate(); err == nil || !strings.Contains(err.Error(), "signal: needs `max_duration`") {
		t.Errorf("Validate without max_duration = %v", err)
	}
}

func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"USR1", "B:USR1@300", "10@5m", "R:TERM", "sigint@1h30m", "@", "B:", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseSignal(%q): %v is not an ErrInvalid", s, err)
			}
			return
		}
		if sig.Number < 1 || sig.Number > 64 || sig.Before < 0 {
			t.Fatalf("ParseSignal(%q) = %+v", s, sig)
		}
		again, err := ParseSignal(sig.String())
		if err != nil || again != sig {
			t.Fatalf("ParseSignal(%q).String() = %q reads back as %+v, %v", s, sig.String(), again, err)
		}
	})
}
