package scenario

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/sched"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the expected plans in testdata")

const sep = "----\n"

// TestGolden runs every scenario in testdata and compares the plan with the
// one written under its ---- line. Run with -update to rewrite them, then
// review the diff: each file says in comments what must hold and why.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in, want, ok := strings.Cut(string(data), sep)
			if !ok && !*update {
				t.Fatalf("%s: no %q line", f, strings.TrimSpace(sep))
			}
			snap, err := Parse(in)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got := Format(snap, sched.Schedule(snap, Now), Now)
			if again := Format(snap, sched.Schedule(snap, Now), Now); again != got {
				t.Errorf("the plan is not deterministic:\n%s\nthen\n%s", got, again)
			}
			if *update {
				if err := os.WriteFile(f, []byte(in+sep+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: plan (-want +got):\n%s", f, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]string{
		"unknown statement": "frobnicate 1\n",
		"bad field":         "node n1 cpus=4 colour=red\n",
		"bad number":        "pending 1 cpus=many\n",
		"bad scope":         "limit team:x jobs=1\n",
		"bad mode":          "qos q mode=pause\n",
		"unknown switch":    "switch top switches=nowhere\n",
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(text); err == nil {
				t.Errorf("Parse(%q) = nil error", text)
			}
		})
	}
	if _, err := Parse("node n1 cpus=4\n\npending 1 cpus=x\n"); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error should name line 3: %v", err)
	}
}
