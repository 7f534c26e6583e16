package pack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@x"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// A repository packs as Git sees its work tree: a committed file with its
// uncommitted change, an untracked file, the executable bit; not an
// ignored file, a deleted one, nor .git. Unpacked, the tree is the same;
// packed again unchanged, the digest is the same; changed, it differs.
func TestGitTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	src := t.TempDir()
	git(t, src, "init", "-q")
	write(t, filepath.Join(src, "train.py"), "print('v1')\n", 0o644)
	write(t, filepath.Join(src, "run.sh"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(src, ".gitignore"), "data/\n*.ckpt\n", 0o644)
	write(t, filepath.Join(src, "gone.txt"), "x", 0o644)
	write(t, filepath.Join(src, "lib", "util.py"), "X = 1\n", 0o600)
	git(t, src, "add", "-A")
	git(t, src, "commit", "-qm", "one")
	write(t, filepath.Join(src, "train.py"), "print('v2, uncommitted')\n", 0o644)
	write(t, filepath.Join(src, "new.py"), "untracked\n", 0o644)
	write(t, filepath.Join(src, "data", "big.bin"), "ignored", 0o644)
	write(t, filepath.Join(src, "model.ckpt"), "ignored", 0o644)
	if err := os.Remove(filepath.Join(src, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("train.py", filepath.Join(src, "link.py")); err != nil {
		t.Fatal(err)
	}

	a, err := GitTree(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "work")
	if err := Unpack(bytes.NewReader(a.Data), dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = filepath.Walk(dst, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dst {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		got = append(got, rel+" "+info.Mode().String())
		return nil
	})
	want := []string{".gitignore -rw-r--r--", "lib drwxr-xr-x", "lib/util.py -rw-------", "link.py Lrwxrwxrwx", "new.py -rw-r--r--", "run.sh -rwxr-xr-x", "train.py -rw-r--r--"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unpacked:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "train.py")); string(b) != "print('v2, uncommitted')\n" {
		t.Errorf("train.py = %q, want the uncommitted change", b)
	}
	if a.Files != 6 {
		t.Errorf("Files = %d, want 6", a.Files)
	}

	again, err := GitTree(src, 0)
	if err != nil || again.Digest != a.Digest {
		t.Fatalf("unchanged tree packed to %s (%v), first %s", again.Digest, err, a.Digest)
	}
	write(t, filepath.Join(src, "new.py"), "changed\n", 0o644)
	if changed, err := GitTree(src, 0); err != nil || changed.Digest == a.Digest {
		t.Fatalf("changed tree: digest %s (%v), the same as before", changed.Digest, err)
	}

	_, err = GitTree(src, 10)
	if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "the largest: train.py (25B), .gitignore (13B)") {
		t.Errorf("over the limit: %v, want ErrTooBig naming train.py (25B) first", err)
	}
	if _, err := GitTree(t.TempDir(), 0); err == nil || !strings.Contains(err.Error(), "not a Git work tree") {
		t.Errorf("plain directory: %v", err)
	}
}

// Path packs a file under another name, or a directory's content.
func TestPath(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "d", "x.sh"), "x", 0o750)
	write(t, filepath.Join(src, "d", "sub", "y"), "y", 0o640)
	a, err := Path(filepath.Join(src, "d"), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Unpack(bytes.NewReader(a.Data), dst); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"x.sh": 0o750, "sub/y": 0o640} {
		if info, err := os.Stat(filepath.Join(dst, p)); err != nil || info.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %v", p, info, err, mode)
		}
	}
	f, err := Path(filepath.Join(src, "d", "x.sh"), "renamed.sh", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unpack(bytes.NewReader(f.Data), dst); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(dst, "renamed.sh")); err != nil || info.Mode().Perm() != 0o750 {
		t.Errorf("renamed.sh: %v, %v", info, err)
	}
}

// An archive cannot write outside its destination: by "..", by an
// absolute name, or through a symbolic link it made first.
func TestUnpackStaysInside(t *testing.T) {
	for name, entries := range map[string][]tar.Header{
		"dotdot":   {{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"absolute": {{Name: "/tmp/escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"via link": {{Name: "l", Typeflag: tar.TypeSymlink, Linkname: ".."}, {Name: "l/escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"hardlink": {{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			for _, h := range entries {
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			tw.Close()
			zw.Close()
			root := t.TempDir()
			dst := filepath.Join(root, "in")
			if err := Unpack(&buf, dst); err == nil {
				t.Fatal("unpacked, want an error")
			}
			if _, err := os.Lstat(filepath.Join(root, "escape")); err == nil {
				t.Fatal("a file landed outside the destination")
			}
		})
	}
}
