package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The SSH entries: one per run, replaced on a second attach, others kept;
// ~/.ssh/config includes Berth's file once, at its top, keeping its own.
func TestSSHEntries(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("BERTH_HOME", filepath.Join(home, "berth"))
	user := filepath.Join(home, ".ssh", "config")
	if err := os.MkdirAll(filepath.Dir(user), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(user, []byte("Host old\n  User me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, e := range [][2]string{{"box", "1"}, {"other", "2"}, {"box", "3"}} {
		if err := writeSSHEntry(e[0], e[1], 0); err != nil {
			t.Fatal(err)
		}
	}
	// Job 2 of run 3, by dstack's name for it.
	if err := writeSSHEntry(jobHost("box", 2), "3", 2); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sshConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.Count(text, "Host box\n") != 1 || strings.Count(text, "Host other\n") != 1 {
		t.Errorf("want one entry per run:\n%s", text)
	}
	if !strings.Contains(text, "Host box-2-0\n") || !strings.Contains(text, "ssh-proxy 3 --job 2\n") {
		t.Errorf("want an entry box-2-0 for job 2 of run 3:\n%s", text)
	}
	if !strings.Contains(text, "ssh-proxy 3\n") || strings.Contains(text, "ssh-proxy 1\n") || !strings.Contains(text, "ssh-proxy 2\n") {
		t.Errorf("box's entry is not its latest run's (3), or other's (2) went:\n%s", text)
	}
	u, err := os.ReadFile(user)
	if err != nil {
		t.Fatal(err)
	}
	want := "Include " + sshConfigPath() + "\n\nHost old\n  User me\n"
	if string(u) != want {
		t.Errorf("~/.ssh/config = %q, want %q", u, want)
	}
}
