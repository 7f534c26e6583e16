package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/pack"
	"github.com/berth-hq/berth/internal/spec"
)

// What a run carries (issue 16): berth apply packs the configuration's
// `repos` (a local Git work tree, as Git sees it) and `files` into
// archives, names them in the configuration it sends (spec.Archive), and
// uploads those the server does not hold yet; the node unpacks them
// before the commands run (internal/agent/archives.go).

// defaultMaxUpload bounds one archive's content unless --max-upload says
// otherwise (the server has its own bound too).
const defaultMaxUpload = 100 << 20

// carried is one packed archive, and what it was packed from.
type carried struct {
	what string // "repo .", "files[0] data.csv"
	arc  *pack.Archive
}

// packRun packs t's local repos and files (paths relative to the
// configuration file's directory) and sets their Archive.
func packRun(t *spec.Task, file string, limit int64) ([]carried, error) {
	base := filepath.Dir(file)
	local := func(p string) string {
		if p == "~" || strings.HasPrefix(p, "~/") {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, strings.TrimPrefix(p, "~"))
			}
		}
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	var out []carried
	for i := range t.Repos {
		r := &t.Repos[i]
		if r.LocalPath == "" {
			continue // a URL: cloned on the node (internal/agent/clones.go)
		}
		if err := checkLocalRef(local(r.LocalPath), r.Branch, r.Hash); err != nil { // apply_clone.go
			return nil, fmt.Errorf("%s: repos[%d]: %w", file, i, err)
		}
		a, err := pack.GitTree(local(r.LocalPath), limit)
		if err != nil {
			return nil, fmt.Errorf("%s: repos[%d]: %w", file, i, err)
		}
		r.Archive = &spec.Archive{Digest: a.Digest, Size: int64(len(a.Data)), Dest: cmpOr(r.Path, ".")}
		out = append(out, carried{what: "repo " + r.LocalPath, arc: a})
	}
	for i := range t.Files {
		f := &t.Files[i]
		src := local(f.LocalPath)
		info, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("%s: files[%d]: %w", file, i, err)
		}
		remote := strings.TrimRight(f.Path, "/")
		if remote == "" {
			remote = "/"
		}
		dest, name := remote, ""
		if !info.IsDir() {
			dest, name = path.Dir(remote), path.Base(remote)
		}
		a, err := pack.Path(src, name, limit)
		if err != nil {
			return nil, fmt.Errorf("%s: files[%d]: %w", file, i, err)
		}
		f.Archive = &spec.Archive{Digest: a.Digest, Size: int64(len(a.Data)), Dest: dest}
		out = append(out, carried{what: "files " + f.LocalPath, arc: a})
	}
	return out, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// upload sends the archives the server does not hold, saying for each
// what it did, and returns how many bytes it sent.
func upload(ctx context.Context, c *client.Client, cs []carried, w io.Writer) (int64, error) {
	var sent int64
	seen := map[string]bool{}
	for _, x := range cs {
		if seen[x.arc.Digest] {
			continue
		}
		seen[x.arc.Digest] = true
		size := pack.Size(int64(len(x.arc.Data)))
		_, ok, err := c.HasBlob(ctx, x.arc.Digest)
		if err != nil {
			return sent, fmt.Errorf("upload %s: %w", x.what, err)
		}
		if ok {
			fmt.Fprintf(w, "%s: %d files, %s; unchanged, the server has it (%.12s)\n", x.what, x.arc.Files, size, x.arc.Digest)
			continue
		}
		fmt.Fprintf(w, "%s: %d files, %s; uploading (%.12s)\n", x.what, x.arc.Files, size, x.arc.Digest)
		progress, done := uploadProgress(w, x.what, int64(len(x.arc.Data))) // progress.go: on a terminal only
		err = c.PutBlobProgress(ctx, x.arc.Digest, x.arc.Data, progress)
		done()
		if err != nil {
			return sent, fmt.Errorf("upload %s: %w", x.what, err)
		}
		sent += int64(len(x.arc.Data))
	}
	return sent, nil
}
