package cli

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/server"
)

// berth secret set (VALUE, --from-file, stdin), list, get and delete
// against a real server; apply refuses a configuration that names a
// secret the project lacks, at its line, and submits nothing.
func TestSecretCommands(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	testServerWith(t, 2, func(c *server.Config) { c.SecretsKey = key }, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "v")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	berth(t, "secret", "set", "a", "from-arg")
	berth(t, "secret", "set", "b", "--from-file", file)
	var out, errw bytes.Buffer
	if code := Main([]string{"secret", "set", "c"}, strings.NewReader("from-stdin\n"), &out, &errw); code != 0 {
		t.Fatalf("set from stdin: %d %s", code, errw.String())
	}
	for name, want := range map[string]string{"a": "from-arg\n", "b": "from-file\n\n", "c": "from-stdin\n"} {
		if got := berth(t, "secret", "get", name); got != want {
			t.Errorf("get %s = %q, want %q", name, got, want)
		}
	}
	list := berth(t, "secret", "list")
	if lines := strings.Split(strings.TrimSpace(list), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[1], "a ") || strings.Contains(list, "from-") {
		t.Errorf("list:\n%s", list)
	}
	berth(t, "secret", "delete", "c")
	out.Reset()
	errw.Reset()
	if code := Main([]string{"secret", "get", "c"}, strings.NewReader(""), &out, &errw); code == 0 || !strings.Contains(errw.String(), "not found") {
		t.Errorf("get of a deleted secret: %d %q", code, errw.String())
	}

	conf := filepath.Join(dir, "job.yml")
	if err := os.WriteFile(conf, []byte("type: task\nenv:\n  - A=${{ secrets.a }}\ncommands:\n  - echo ${{ secrets.missing }}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply", "--dry-run", "-f", conf}, {"apply", "-y", "-d", "-f", conf}} {
		errw.Reset()
		code := Main(args, strings.NewReader(""), &out, &errw)
		if want := conf + `:5:5: commands[0]: unknown secret "missing" in project main (known: a, b)`; code == 0 || !strings.Contains(errw.String(), want) {
			t.Errorf("%v: exit %d, %q; want %q", args, code, errw.String(), want)
		}
	}
	if ps := berth(t, "ps", "-a"); strings.Count(strings.TrimSpace(ps), "\n") != 0 {
		t.Errorf("a run was stored:\n%s", ps)
	}
}
