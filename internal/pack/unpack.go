package pack

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Unpack writes the gzip'd tar r under dest (made if missing), keeping
// modes and modification times. Nothing lands outside dest: a name that is
// absolute or climbs out with "..", or that leads through a symbolic link,
// is refused; an existing file is replaced, as a checkout replaces it.
func Unpack(r io.Reader, dest string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	tr := tar.NewReader(zr)
	type dirTime struct {
		path string
		h    *tar.Header
	}
	var dirs []dirTime // their times are set last: writing in them moves them
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		name := path.Clean(strings.TrimSuffix(h.Name, "/"))
		if name == "." || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("unpack: %q: outside the destination", h.Name)
		}
		p := filepath.Join(dest, filepath.FromSlash(name))
		if err := noLinkOnTheWay(dest, name); err != nil {
			return err
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, mode|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("unpack: %w", err)
			}
			if err := os.Chmod(p, mode|0o700); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
			dirs = append(dirs, dirTime{p, h})
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
			if err := writeFile(p, tr, mode); err != nil {
				return fmt.Errorf("unpack: %s: %w", name, err)
			}
			_ = os.Chtimes(p, h.ModTime, h.ModTime)
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("unpack: %w", err)
			}
			if err := os.Symlink(h.Linkname, p); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
		default:
			return fmt.Errorf("unpack: %q: entry type %q is not carried", h.Name, h.Typeflag)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Chmod(dirs[i].path, fs.FileMode(dirs[i].h.Mode).Perm())
		_ = os.Chtimes(dirs[i].path, dirs[i].h.ModTime, dirs[i].h.ModTime)
	}
	return nil
}

// writeFile replaces p with the file's content, never following a link
// at p.
func writeFile(p string, r io.Reader, mode fs.FileMode) error {
	if info, err := os.Lstat(p); err == nil && !info.Mode().IsRegular() {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil { // the umask took bits away
		f.Close()
		return err
	}
	return f.Close()
}

// noLinkOnTheWay refuses a name whose parent directories, under dest,
// include a symbolic link (one the archive made, or one that was there):
// writing through it would land outside dest.
func noLinkOnTheWay(dest, name string) error {
	p := dest
	parts := strings.Split(name, "/")
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("unpack: %q leads through the symbolic link %s", name, p)
		}
	}
	return nil
}
