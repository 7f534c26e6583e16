package pack

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrTooBig: the tree is over the size limit (the error names its largest
// files).
var ErrTooBig = errors.New("pack: too big")

// Archive is a packed tree: its bytes, their hex SHA-256, and what went
// in.
type Archive struct {
	Data   []byte
	Digest string
	Files  int   // regular files and symlinks
	Bytes  int64 // their content, before compression
}

// entry is one thing to pack: name in the archive (slash-separated,
// relative), path on disk.
type entry struct {
	name, path string
	info       fs.FileInfo
}

// GitTree packs the work tree of the Git repository at dir as Git sees
// it: the files under dir that are tracked (as they are now on disk, with
// uncommitted changes; deleted ones left out) or untracked and not
// ignored (.gitignore, .git/info/exclude, the global excludes). limit
// bounds the content's total bytes (0: none).
func GitTree(dir string, limit int64) (*Archive, error) {
	cmd := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("pack: %s is not a Git work tree (`repos` packs what Git tracks; use `files` for a plain directory): %s", dir, msg)
	}
	seen := map[string]bool{}
	var es []entry
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" || seen[name] {
			continue // a conflicted file is listed once per stage
		}
		seen[name] = true
		p := filepath.Join(dir, filepath.FromSlash(name))
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			return nil, fmt.Errorf("pack: %w", err)
		}
		if info.IsDir() {
			continue // a submodule: its files are its own repository's
		}
		es = append(es, entry{name: name, path: p, info: info})
	}
	return build(es, limit, dir)
}

// Path packs a file or a directory (all of it). A file is packed under
// the name as; a directory's entries are packed relative to it (as is
// ignored).
func Path(p, as string, limit int64) (*Archive, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	if !info.IsDir() {
		return build([]entry{{name: as, path: p, info: info}}, limit, p)
	}
	var es []entry
	err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if q == p {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p, q)
		if err != nil {
			return err
		}
		es = append(es, entry{name: filepath.ToSlash(rel), path: q, info: info})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	return build(es, limit, p)
}

// build writes the entries in name order, each directory before what is
// in it (made for the parents of files that name none).
func build(es []entry, limit int64, what string) (*Archive, error) {
	a := &Archive{}
	for _, e := range es {
		if e.info.Mode().IsRegular() {
			a.Bytes += e.info.Size()
		}
	}
	if limit > 0 && a.Bytes > limit {
		return nil, tooBig(es, a.Bytes, limit, what)
	}
	dirs := map[string]bool{}
	for _, e := range es {
		if e.info.IsDir() {
			dirs[e.name] = true
		}
	}
	var extra []entry
	for _, e := range es {
		for d := path.Dir(e.name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			extra = append(extra, entry{name: d})
		}
	}
	es = append(es, extra...)
	slices.SortFunc(es, func(x, y entry) int { return cmp.Compare(x.name, y.name) })

	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // no name, no time: the same tree, the same bytes
	tw := tar.NewWriter(zw)
	for _, e := range es {
		if err := add(tw, e, a); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	a.Data = buf.Bytes()
	sum := sha256.Sum256(a.Data)
	a.Digest = hex.EncodeToString(sum[:])
	return a, nil
}

func add(tw *tar.Writer, e entry, a *Archive) error {
	h := &tar.Header{Name: e.name, Format: tar.FormatPAX}
	switch {
	case e.info == nil: // a parent made for its files
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.name+"/", 0o755
	case e.info.IsDir():
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.name+"/", int64(e.info.Mode().Perm())
	case e.info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(e.path)
		if err != nil {
			return fmt.Errorf("pack: %w", err)
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
		a.Files++
	case e.info.Mode().IsRegular():
		h.Typeflag, h.Size, h.Mode = tar.TypeReg, e.info.Size(), int64(e.info.Mode().Perm())
		a.Files++
	default:
		return nil // sockets, devices, pipes: nothing to carry
	}
	if e.info != nil {
		h.ModTime = e.info.ModTime().Truncate(time.Second)
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("pack: %s: %w", e.name, err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil
	}
	data, err := os.ReadFile(e.path)
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	if int64(len(data)) != h.Size {
		return fmt.Errorf("pack: %s changed while it was packed", e.path)
	}
	_, err = tw.Write(data)
	return err
}

// tooBig says how big the tree is and which files make it so.
func tooBig(es []entry, total, limit int64, what string) error {
	files := slices.DeleteFunc(slices.Clone(es), func(e entry) bool { return !e.info.Mode().IsRegular() })
	slices.SortFunc(files, func(x, y entry) int {
		return cmp.Or(cmp.Compare(y.info.Size(), x.info.Size()), cmp.Compare(x.name, y.name))
	})
	var big []string
	for _, e := range files[:min(5, len(files))] {
		big = append(big, fmt.Sprintf("%s (%s)", e.name, Size(e.info.Size())))
	}
	return fmt.Errorf("%w: %s holds %s in %d files, over the limit of %s; the largest: %s (ignore them in .gitignore, or raise the limit with berth apply --max-upload)",
		ErrTooBig, what, Size(total), len(files), Size(limit), strings.Join(big, ", "))
}

// Size writes a byte count for people: 1.5MB, 320KB, 12B.
func Size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fGB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fKB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%dB", b)
}
