package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func seedCorpus(f *testing.F) [][]byte {
	f.Helper()
	files, _ := filepath.Glob("testdata/seeds/*.yml")
	workflows, _ := filepath.Glob("testdata/workflows/*.yml")
	files = append(files, workflows...)
	var out [][]byte
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// FuzzParse: Parse never panics; what it accepts survives a JSON round trip
// through Validate, and re-marshalling is stable.
func FuzzParse(f *testing.F) {
	for _, data := range seedCorpus(f) {
		f.Add(data)
	}
	f.Add([]byte("type: task\ncommands: [x]\nresources:\n  gpu: {vendor: amd, name: MI300X, count: 8}\nretry: true\nmax_duration: off\n"))
	f.Add([]byte("type: task\nimage: x\nenv: {A: 1}\nports: [\"*:80\"]\nschedule: {cron: [\"*/5 * * * mon-fri\"]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := Parse("fuzz.yml", data)
		if err != nil {
			if task != nil {
				t.Fatalf("Parse returned a task and an error")
			}
			if _, ok := err.(Errors); !ok {
				t.Fatalf("Parse error is %T, want Errors", err)
			}
			return
		}
		first, err := json.Marshal(task)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var decoded Task
		if err := json.Unmarshal(first, &decoded); err != nil {
			t.Fatalf("unmarshal %s: %v", first, err)
		}
		if err := decoded.Validate(); err != nil {
			t.Fatalf("Validate after round trip of %s:\n%v", first, err)
		}
		second, err := json.Marshal(&decoded)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("re-marshalling is unstable:\n%s\n%s", first, second)
		}
		_ = task.SetFields()
		_ = task.Resources.String()
	})
}

// FuzzGPU: ParseGPU never panics, and what it accepts prints back to a spec
// that parses to the same value (total memory and compute capability have
// no shorthand and are never produced by it).
func FuzzGPU(f *testing.F) {
	for _, s := range []string{"1", "nvidia:2", "A100", "A10G,A100", "24GB..", "24GB..40GB:2", "A100:80GB", "A100:2", "A100:40GB:2", "nvidia:A10G,A100:40GB..80GB:2..8", "40GB..80GB:4..8", "H100:1", "nvidia:1..8", "A100:80GB:8", "..8", "tpu:v5e:0.5TB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGPU(s)
		if err != nil {
			if g != nil {
				t.Fatalf("ParseGPU returned a spec and an error")
			}
			return
		}
		if ps := g.check(); len(ps) > 0 {
			t.Fatalf("ParseGPU(%q) accepted an invalid spec: %v", s, ps)
		}
		again, err := ParseGPU(g.String())
		if err != nil {
			t.Fatalf("ParseGPU(%q) → %q does not parse: %v", s, g.String(), err)
		}
		a, _ := json.Marshal(g)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("ParseGPU(%q) → %q changes the value:\n%s\n%s", s, g.String(), a, b)
		}
	})
}

// FuzzArray: ParseArray never panics; what it accepts is normalized, reads
// back from String to the same spec, and At, Ordinal, Contains and All
// agree with one another.
func FuzzArray(f *testing.F) {
	for _, s := range []string{"7", "0-15", "1-100%10", "0-15:4", "1,3,5-7", "3,3,1-5", "0-8:4,12,16-20:4", "0-10:2,1-9:2", "1-9:2,4-6", "1-0", "1-7:0", "5:2", "%4", "1-10%0", "0-4000000", "1--3", "1,,3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArray(s)
		if err != nil {
			if a != nil {
				t.Fatalf("ParseArray returned a spec and an error")
			}
			return
		}
		checkArrayRoundTrip(t, s, a)
		if a.Count() > 5000 {
			return
		}
		k := 0
		for i := range a.All() {
			if a.At(k) != i || !a.Contains(i) {
				t.Fatalf("ParseArray(%q): At(%d) = %d, Contains(%d) = %v", s, k, a.At(k), i, a.Contains(i))
			}
			if o, ok := a.Ordinal(i); !ok || o != k {
				t.Fatalf("ParseArray(%q): Ordinal(%d) = %d, %v, want %d", s, i, o, ok, k)
			}
			if !a.Contains(i) || (k > 0 && a.Contains(i-1) != (a.At(k-1) == i-1)) {
				t.Fatalf("ParseArray(%q): Contains(%d) disagrees with At", s, i-1)
			}
			k++
		}
		if k != a.Count() {
			t.Fatalf("ParseArray(%q): All yields %d indexes, Count is %d", s, k, a.Count())
		}
	})
}

// FuzzDecodeJSON: DecodeJSON (the API's configurations) never panics;
// what it refuses is Errors matching ErrInvalid; what it accepts passes
// Validate, and its JSON decodes again to the same Task.
func FuzzDecodeJSON(f *testing.F) {
	for _, data := range seedCorpus(f) {
		if task, err := Parse("seed.yml", data); err == nil {
			b, _ := json.Marshal(task)
			f.Add(b)
		}
	}
	for _, tc := range hostile {
		if tc.json != "" && len(tc.json) < 4096 {
			f.Add([]byte(tc.json))
		}
	}
	for _, s := range []string{`{"commands":["x"]} {}`, `{"commands":["x"],"Commands":["y"]}`, `{"commands":["x"],"env":[{"name":"A","value":"1","x":1}]}`,
		`{"commands":["x"],"tags":{"a":"\u0000"}}`, `{"commands":["x"],"max_duration":-1}`, `[`, `null`, `{"groups":[{"nodes":2}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := DecodeJSON(data, DefaultLimits)
		if err != nil {
			if task != nil {
				t.Fatalf("DecodeJSON returned a task and an error")
			}
			var errs Errors
			if !errors.As(err, &errs) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeJSON error is %T (%v), want Errors", err, err)
			}
			return
		}
		if err := task.Validate(); err != nil {
			t.Fatalf("DecodeJSON accepted what Validate refuses: %v", err)
		}
		first, err := json.Marshal(task)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := DecodeJSON(first, DefaultLimits)
		if err != nil {
			t.Fatalf("DecodeJSON of its own output %s: %v", first, err)
		}
		second, _ := json.Marshal(again)
		if !bytes.Equal(first, second) {
			t.Fatalf("the round trip changes the task:\n%s\n%s", first, second)
		}
	})
}
