package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A local repo's branch and hash must be what its work tree is on: berth
// apply packs the work tree, and says so rather than carry other code.
func TestCheckLocalRef(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	run("add", ".")
	run("commit", "-qm", "one")
	head := run("rev-parse", "HEAD")
	for _, ok := range [][2]string{{"", ""}, {"main", ""}, {"", head}, {"main", head[:8]}} {
		if err := checkLocalRef(dir, ok[0], ok[1]); err != nil {
			t.Errorf("branch %q hash %q: %v", ok[0], ok[1], err)
		}
	}
	if err := checkLocalRef(dir, "dev", ""); err == nil || !strings.Contains(err.Error(), `is on "main", not "dev"`) {
		t.Errorf("another branch: %v", err)
	}
	if err := checkLocalRef(dir, "", "0123456789ab"); err == nil || !strings.Contains(err.Error(), "is at "+head[:12]+", not 0123456789ab") {
		t.Errorf("another commit: %v", err)
	}
}
