package agent

import (
	"os"
	"testing"
)

// A host job's `shell:` runs its script (issue 17: images such as busybox
// have sh and no bash); without it, bash does.
func TestHostJobShell(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH")}
	// BASH_VERSION is set by bash only.
	script := `echo "bash=${BASH_VERSION:+yes}"`
	for name, tc := range map[string]struct{ shell, want string }{
		"default bash": {"", "[stdout]bash=yes\n"},
		"sh":           {"sh", "[stdout]bash=\n"},
		"absolute":     {"/bin/sh", "[stdout]bash=\n"},
	} {
		t.Run(name, func(t *testing.T) {
			ex, out := shimRun(t, shimSpec{Script: script, Shell: tc.shell, Env: env, Dir: t.TempDir()}, nil)
			if ex.ExitCode != 0 || out != tc.want {
				t.Errorf("shell %q: exit %d, output %q, want %q", tc.shell, ex.ExitCode, out, tc.want)
			}
		})
	}
}
