package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const secretsYAML = `type: task
image: ubuntu
registry_auth:
  username: $oauthtoken
  password: ${{ secrets.ngc_key }}
env:
  - A=${{ secrets.tok }}
  - B=x${{secrets.tok}}y${{ secrets.tok }}
  - C=$${{ secrets.escaped }}
commands:
  - echo ${{ secrets.tok }} ${{ secrets.other }}
`

// References are found in env values, commands and registry_auth, with
// the field each is in; escaped ones are not references; a configuration
// keeps them as written (the server puts values in at hand-off).
func TestSecretRefs(t *testing.T) {
	tk, err := Parse("f.yml", []byte(secretsYAML))
	if err != nil {
		t.Fatal(err)
	}
	want := []SecretRef{{"tok", "env[0]"}, {"tok", "env[1]"}, {"tok", "commands[0]"}, {"other", "commands[0]"}, {"ngc_key", "registry_auth.password"}}
	if d := cmp.Diff(want, tk.SecretRefs()); d != "" {
		t.Errorf("SecretRefs (-want +got):\n%s", d)
	}
	if tk.Env[0].Value != "${{ secrets.tok }}" || tk.RegistryAuth.Password != "${{ secrets.ngc_key }}" {
		t.Errorf("references not kept as written: %+v %+v", tk.Env, tk.RegistryAuth)
	}
}

func TestExpandSecrets(t *testing.T) {
	vals := map[string]string{"tok": "s3cr3t", "empty": ""}
	tests := map[string]struct {
		in, want string
		missing  []string
	}{
		"plain":           {"echo ${{ secrets.tok }}", "echo s3cr3t", nil},
		"no spaces, many": {"x${{secrets.tok}}y${{ secrets.tok }}", "xs3cr3tys3cr3t", nil},
		"escaped":         {"$${{ secrets.tok }}", "$${{ secrets.tok }}", nil},
		"other namespace": {"${{ array.index }} ${{ secrets.tok }}", "${{ array.index }} s3cr3t", nil},
		"empty value":     {"[${{ secrets.empty }}]", "[]", nil},
		"missing":         {"${{ secrets.nope }} ${{ secrets.tok }}", "${{ secrets.nope }} s3cr3t", []string{"nope"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, missing := ExpandSecrets(tc.in, vals)
			if got != tc.want || !cmp.Equal(missing, tc.missing) {
				t.Errorf("ExpandSecrets(%q) = %q, %v; want %q, %v", tc.in, got, missing, tc.want, tc.missing)
			}
		})
	}
}

// What cannot work is refused with its line: a literal registry password
// (it would be stored with the run), a reference where nothing puts it
// in, a bad name.
func TestSecretProblems(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"literal password": {
			"type: task\nimage: ubuntu\nregistry_auth:\n  username: me\n  password: hunter22\n",
			"f.yml:5:13: registry_auth.password: give a secret, not the password itself",
		},
		"in the image": {
			"type: task\nimage: reg/${{ secrets.tok }}\n",
			"f.yml:2:8: image: ${{ secrets.tok }}: secrets are put in only in env values, commands",
		},
		"bad name": {
			"type: task\ncommands:\n  - echo ${{ secrets.a.b }}\n",
			`f.yml:3:5: commands[0]: ${{ secrets.a.b }}: invalid secret name "a.b"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("f.yml", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLocate(t *testing.T) {
	for field, want := range map[string][2]int{"env[1]": {8, 5}, "commands[0]": {11, 5}, "registry_auth.password": {5, 13}} {
		line, col, ok := Locate([]byte(secretsYAML), field)
		if !ok || line != want[0] || col != want[1] {
			t.Errorf("Locate(%s) = %d:%d %v, want %d:%d", field, line, col, ok, want[0], want[1])
		}
	}
	if _, _, ok := Locate([]byte(secretsYAML), "env[9]"); ok {
		t.Error("Locate found a field that is not there")
	}
}
