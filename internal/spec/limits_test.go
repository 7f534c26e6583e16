package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hostile are configurations that the YAML path and the JSON path must both
// refuse, with the field named. Each was accepted before, and failed at
// start, overflowed, or cost the server far more than its size.
var hostile = map[string]struct {
	yaml   string // the body after "type: task\n"
	json   string // the same as JSON; empty: the YAML only
	limits Limits // zero: DefaultLimits
	field  string
	msg    string // a part of the message
}{
	"max_duration overflows": {
		yaml: "commands: [x]\nmax_duration: 999999999999w\n", json: `{"commands":["x"],"max_duration":604799999999395200}`,
		field: "max_duration", msg: "too long: at most 100 years (36500d)",
	},
	"stop_duration overflows": {
		yaml: "commands: [x]\nstop_duration: 99999999999\n", json: `{"commands":["x"],"stop_duration":99999999999}`,
		field: "stop_duration", msg: "too long",
	},
	"retry duration overflows": {
		yaml: "commands: [x]\nretry: {on_events: [error], duration: 9999999999}\n", json: `{"commands":["x"],"retry":{"on_events":["error"],"duration":9999999999}}`,
		field: "retry.duration", msg: "too long",
	},
	"cpu minimum 0": {
		yaml: "commands: [x]\nresources: {cpu: {count: 0..}}\n", json: `{"commands":["x"],"resources":{"cpu":{"count":{"min":0}}}}`,
		field: "resources.cpu.count", msg: "a node needs at least one CPU: the minimum of 0.. is 0 (write 1..)",
	},
	"cpu up to 4": {
		yaml: "commands: [x]\nresources: {cpu: {count: ..4}}\n", json: `{"commands":["x"],"resources":{"cpu":{"count":{"min":0,"max":4}}}}`,
		field: "resources.cpu.count", msg: "the minimum of ..4 is 0 (write 1..4)",
	},
	"cpu count too large": {
		json:  `{"commands":["x"],"resources":{"cpu":{"count":{"min":4294967296}}}}`,
		field: "resources.cpu.count", msg: "too large",
	},
	"nodes too many": {
		json:  `{"commands":["x"],"nodes":4294967296}`,
		field: "nodes", msg: "must be at most 2147483647",
	},
	"memory too large": {
		json:  `{"commands":["x"],"resources":{"memory":{"min":9223372036854775807}}}`,
		field: "resources.memory", msg: "too large",
	},
	"NUL in a command": {
		yaml: "commands: [\"echo a\\0b\"]\n", json: `{"commands":["echo a\u0000b"]}`,
		field: "commands[0]", msg: "holds a NUL byte (at byte 6)",
	},
	"NUL on line 2 of a command": {
		yaml: "commands:\n  - \"echo a\\necho \\0\"\n", json: `{"commands":["echo a\necho \u0000"]}`,
		field: "commands[0]", msg: "at byte 12, line 2",
	},
	"NUL in a variable": {
		yaml: "commands: [x]\nenv: {A: \"1\\0\"}\n", json: `{"commands":["x"],"env":[{"name":"A","value":"1\u0000"}]}`,
		field: "env[0]", msg: "holds a NUL byte",
	},
	"NUL in working_dir": {
		yaml: "commands: [x]\nworking_dir: \"/tmp/\\0\"\n", json: `{"commands":["x"],"working_dir":"/tmp/\u0000"}`,
		field: "working_dir", msg: "holds a NUL byte",
	},
	"one variable over execve's limit": {
		yaml: "commands: [x]\nenv: {BIG: " + strings.Repeat("v", 128<<10) + "}\n", json: `{"commands":["x"],"env":[{"name":"BIG","value":"` + strings.Repeat("v", 128<<10) + `"}]}`,
		field: "env[0]", msg: "BIG is 131076 bytes with its name: a variable may hold at most 131071",
	},
	"environment over 1MB": {
		yaml: "commands: [x]\nenv:\n" + manyVars(10, 120<<10), json: `{"commands":["x"],"env":[` + manyVarsJSON(10, 120<<10) + `]}`,
		field: "env", msg: "at most 1048576 (1MB",
	},
	"commands over the limit": {
		yaml: "commands:\n  - |\n" + strings.Repeat("    echo "+strings.Repeat("x", 94)+"\n", 700), json: `{"commands":["` + strings.Repeat("echo "+strings.Repeat("x", 94)+`\n`, 700) + `"]}`,
		limits: Limits{ScriptBytes: 64 << 10},
		field:  "commands", msg: "the commands hold 70000 bytes: at most 65536 (64KB, as Slurm's max_script_size)",
	},
	"a group's commands count too": {
		json:   `{"groups":[{"nodes":1,"commands":["` + strings.Repeat("x", 40<<10) + `"]},{"nodes":1,"commands":["` + strings.Repeat("x", 30<<10) + `"]}]}`,
		limits: Limits{ScriptBytes: 64 << 10},
		field:  "commands", msg: "the commands hold 71680 bytes",
	},
	"text past 1MB": {
		json:  `{"commands":["x"],"fleets":["` + strings.Repeat("f", 600<<10) + `","` + strings.Repeat("g", 600<<10) + `"]}`,
		field: "", msg: "besides `commands` and `env`: at most 1048576 (1MB)",
	},
	"a list too long": {
		json:  `{"commands":["x"],"fleets":[` + strings.TrimSuffix(strings.Repeat(`"f",`, 120000), ",") + `]}`,
		field: "", msg: "the configuration holds 1080012 bytes besides `commands` and `env`",
	},
}

func manyVars(n, size int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - V%d=%s\n", i, strings.Repeat("v", size))
	}
	return b.String()
}

func manyVarsJSON(n, size int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"name":"V%d","value":"%s"}`, i, strings.Repeat("v", size))
	}
	return strings.Join(items, ",")
}

// TestHostileConfigurations: the YAML path and the API's JSON path refuse
// the same configurations with the same field and message (YAML's with its
// line), and DecodeJSON agrees with Validate on a decoded Task.
func TestHostileConfigurations(t *testing.T) {
	for name, tc := range hostile {
		t.Run(name, func(t *testing.T) {
			l := tc.limits
			if l.ScriptBytes == 0 {
				l = DefaultLimits
			}
			if tc.yaml != "" {
				_, err := ParseLimits("bad.yml", []byte("type: task\n"+tc.yaml), l)
				checkRefusal(t, "Parse", err, tc.field, tc.msg, true)
			}
			if tc.json == "" {
				return
			}
			_, err := DecodeJSON([]byte(tc.json), l)
			checkRefusal(t, "DecodeJSON", err, tc.field, tc.msg, false)
			var task Task
			if err := json.Unmarshal([]byte(tc.json), &task); err != nil {
				t.Fatal(err)
			}
			task.Normalize()
			checkRefusal(t, "ValidateLimits", task.ValidateLimits(l), tc.field, tc.msg, false)
		})
	}
}

func checkRefusal(t *testing.T, what string, err error, field, msg string, positioned bool) {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("%s: got %v (%T), want Errors", what, err, err)
	}
	for _, e := range errs {
		if e.Field == field && strings.Contains(e.Msg, msg) {
			if positioned && (e.Line < 1 || e.File != "bad.yml") {
				t.Errorf("%s: %v: no file and line", what, e)
			}
			return
		}
	}
	short := err.Error()
	if len(short) > 600 {
		short = short[:600] + "…"
	}
	t.Errorf("%s: want %s: …%s…, got:\n%s", what, field, msg, short)
}

// TestLimitsAreConfigurable: the commands' bound is Slurm's default
// max_script_size, 4MB, unless a caller allows more.
func TestLimitsAreConfigurable(t *testing.T) {
	task := &Task{Commands: []string{strings.Repeat("x", 5<<20)}}
	err := task.Validate()
	checkRefusal(t, "Validate", err, "commands", "the commands hold 5242880 bytes: at most 4194304 (4MB, as Slurm's max_script_size)", false)
	if err := task.ValidateLimits(Limits{ScriptBytes: 8 << 20}); err != nil {
		t.Errorf("ValidateLimits(8MB): %v", err)
	}
	big := "type: task\ncommands:\n  - " + strings.Repeat("x", 100<<10) + "\n"
	if _, err := ParseLimits("big.yml", []byte(big), Limits{ScriptBytes: 64 << 10}); err == nil {
		t.Error("a 100KB command was accepted within 64KB")
	}
	if _, err := ParseLimits("big.yml", []byte(big), Limits{ScriptBytes: 128 << 10}); err != nil {
		t.Errorf("ParseLimits(128KB): %v", err)
	}
}

// TestDeepYAMLIsRefusedBeforeParsing: nesting, which goccy's parser takes
// quadratic time over (a 200 KB file of brackets took 37-51 s to refuse),
// is refused from the tokens, at the token that goes too deep.
func TestDeepYAMLIsRefusedBeforeParsing(t *testing.T) {
	tests := map[string]struct {
		yaml      string
		line, col int
	}{
		"flow lists":    {"commands: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000), 1, 11 + maxDepth - 1},
		"flow mappings": {"commands: " + strings.Repeat("{a: ", 50000) + "1" + strings.Repeat("}", 50000), 1, 11 + 4*(maxDepth-1)},
		"block mappings": {func() string {
			var b strings.Builder
			for i := range 200 {
				b.WriteString(strings.Repeat(" ", i) + "a:\n")
			}
			return b.String()
		}(), maxDepth + 1, maxDepth + 1},
		"block lists": {"commands: " + strings.Repeat("- ", 1000) + "x", 1, 11 + 2*(maxDepth-1)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("deep.yml", []byte(tc.yaml))
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("got %v, want one error", err)
			}
			want := &Error{File: "deep.yml", Line: tc.line, Col: tc.col, Msg: "invalid YAML: collections nested more than 64 levels deep; no configuration needs as many"}
			if diff := cmp.Diff(want, errs[0]); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// What configurations nest stays well inside the bound.
	ok := "type: task\ncommands: [x]\ngroups:\n  - nodes: 1\n    resources:\n      gpu: {vendor: nvidia, name: [A100], memory: 40GB..}\n"
	if _, err := Parse("ok.yml", []byte(ok)); err != nil {
		t.Errorf("Parse: %v", err)
	}
}

// TestHugeFileIsRefusedBeforeParsing: a file over what the limits allow is
// refused by its size alone.
func TestHugeFileIsRefusedBeforeParsing(t *testing.T) {
	data := []byte("type: task\ncommands: [x]\n# " + strings.Repeat("x", int(DefaultLimits.fileBytes())))
	_, err := Parse("huge.yml", data)
	checkRefusal(t, "Parse", err, "", "a configuration may be at most 10485760 (10MB; its commands at most 4MB)", false)
	_, err = DecodeJSON(data, DefaultLimits)
	checkRefusal(t, "DecodeJSON", err, "", "at most 10485760", false)

	// Parsing costs about 5µs a token: a file of a million tiny items is
	// refused from its tokens, at the first one over.
	data = []byte("type: task\ncommands: [x]\nfleets: [" + strings.Repeat("f,", 600000) + "f]\n")
	_, err = Parse("wide.yml", data)
	want := Errors{{File: "wide.yml", Line: 3, Col: 1048575, Msg: "1200013 tokens (keys, values, list items): a configuration may have at most 1048576; keep long scripts in one block (|)"}}
	if diff := cmp.Diff(want, err); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestDecodeJSON: the API's body is read strictly, with the field or the
// position of what is wrong.
func TestDecodeJSON(t *testing.T) {
	tests := map[string]struct {
		json string
		want string
	}{
		"unknown field":        {`{"commands":["x"],"comands":["y"]}`, `comands: unknown field; did you mean "commands"?`},
		"unknown nested field": {`{"commands":["x"],"resources":{"cpu":{"cuont":{"min":1}}}}`, `resources.cpu.cuont: unknown field; did you mean "count"?`},
		"unknown in a list":    {`{"commands":["x"],"env":[{"name":"A","valeu":"1"}]}`, `env[0].valeu: unknown field; did you mean "value"?`},
		"wrong type":           {"{\"commands\":[\"x\"],\n \"nodes\":\"2\"}", `2:12: nodes: must be an integer (int), not string`},
		"syntax":               {"{\"commands\":[\"x\"],\n \"nodes\":2,,}", `2:12: invalid JSON: invalid character ',' looking for beginning of object key string`},
		"trailing garbage":     {`{"commands":["x"]} {"commands":["y"]}`, `1:20: unexpected data after the configuration`},
		"trailing junk":        {`{"commands":["x"]}]`, `1:19: unexpected data after the configuration`},
		"empty":                {``, `invalid JSON: the configuration ends early`},
		"cut short":            {`{"commands":["x"`, `invalid JSON: the configuration ends early`},
		"validated":            {`{"commands":["x"],"nodes":-1}`, `nodes: must be at least 1, got -1`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task, err := DecodeJSON([]byte(tc.json), DefaultLimits)
			if err == nil {
				t.Fatalf("accepted: %+v", task)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v is not ErrInvalid", err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	task, err := DecodeJSON([]byte(`{"commands":["echo hi"],"Nodes":2,"resources":{"gpu":{"count":{"min":1}}}}`), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if task.Nodes != 2 || task.Type != "task" || task.Resources.CPU == nil {
		t.Errorf("decoded %+v: want 2 nodes (a key in another case, as encoding/json reads it), normalized", task)
	}
}
