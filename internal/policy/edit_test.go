package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDocEdit(t *testing.T) {
	type edit struct {
		value string // "" deletes
		path  []string
	}
	tests := map[string]struct {
		in    string
		edits []edit
		want  string
	}{
		"empty file": {"", []edit{{"{}", []string{"qos", "normal"}}}, "qos:\n  normal: {}\n"},
		"comments only": {"# rules\n", []edit{{"3", []string{"projects", "ml", "shares"}}},
			"# rules\nprojects:\n  ml:\n    shares: 3\n"},
		"value replaced, comments kept": {"# head\nprojects:\n  # ml team\n  ml:\n    shares: 3 # three\n", []edit{{"5", []string{"projects", "ml", "shares"}}},
			"# head\nprojects:\n  # ml team\n  ml:\n    shares: 5 # three\n"},
		"into flow style": {"default_qos: high\nqos:\n  high: {priority: 1}\n", []edit{{"2", []string{"qos", "high", "user_limits", "jobs"}}},
			"default_qos: high\nqos:\n  high: {priority: 1, user_limits: {jobs: 2}}\n"},
		"null entry": {"users:\n", []edit{{"4", []string{"users", "bob", "limits", "jobs"}}},
			"users:\n  bob:\n    limits:\n      jobs: 4\n"},
		"appended in order": {"projects:\n  b: {}\n  a: {}\n", []edit{{"{}", []string{"projects", "c"}}},
			"projects:\n  b: {}\n  a: {}\n  c: {}\n"},
		"delete keeps the rest": {"qos:\n  normal: {}\n  # gone\n  high: {}\nusers: {}\n", []edit{{"", []string{"qos", "high"}}},
			"qos:\n  normal: {}\nusers: {}\n"},
		"delete the last leaves {}": {"projects:\n  ml:\n    users:\n      alice: {}\n", []edit{{"", []string{"projects", "ml", "users", "alice"}}},
			"projects:\n  ml:\n    users: {}\n"},
		"odd names quoted": {"", []edit{{"{}", []string{"projects", "a b"}}, {"{}", []string{"users", "yes"}}},
			"projects:\n  \"a b\": {}\nusers:\n  \"yes\": {}\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := ParseDoc("p.yml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.edits {
				if e.value == "" {
					if !d.Delete(e.path...) {
						t.Fatalf("delete %v: not found", e.path)
					}
				} else if err := d.Set(e.value, e.path...); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, string(d.Bytes())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if _, err := Parse("p.yml", d.Bytes()); err != nil {
				t.Errorf("the edited file does not parse: %v", err)
			}
		})
	}
	d, _ := ParseDoc("p.yml", []byte("qos: [a]\n"))
	if err := d.Set("1", "qos", "a", "priority"); err == nil {
		t.Error("a path through a list was accepted")
	}
}
