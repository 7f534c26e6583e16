package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/pack"
	"github.com/berth-hq/berth/internal/spec"
)

// A container job gets its repo, files and clones: what goes to a
// relative place is in its working directory (/workflow, mounted from the
// node), what goes to an absolute place or under ~ is mounted there, entry
// by entry for an archive (the image's files beside them stay), as one
// directory for a clone.
func TestContainerCarriesReposAndFiles(t *testing.T) {
	e := containertest.Engine(t)
	url, _ := testGitServer(t, "oauth2", "tok-c0ntainer")

	repoSrc, confSrc := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(repoSrc, "train.sh"), []byte("echo train ran in $(pwd)\n"), 0o755)
	os.WriteFile(filepath.Join(confSrc, "berth-test.conf"), []byte("conf\n"), 0o600)
	repo, err := pack.Path(repoSrc, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := pack.Path(filepath.Join(confSrc, "berth-test.conf"), "berth-test.conf", 0)
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{repo.Digest: repo.Data, conf.Digest: conf.Data}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := filepath.Base(r.URL.Path)
		if b, ok := blobs[d]; ok && r.Header.Get("Authorization") == "Bearer jt" {
			w.Write(b)
			return
		}
		http.Error(w, `{"error":"no"}`, http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)

	sp := containerJob("sh train.sh", "cat src/hello.txt /opt/code/hello.txt /etc/berth-test.conf ~/cfg/berth-test.conf",
		"test -s /etc/passwd && echo the image keeps its /etc", "ls -d /opt/code/.git")
	sp.Server = srv.URL
	sp.Assignment.JobToken = "jt"
	sp.Assignment.Archives = []spec.Archive{
		{Digest: repo.Digest, Size: int64(len(repo.Data)), Dest: "."},
		{Digest: conf.Digest, Size: int64(len(conf.Data)), Dest: "/etc"},
		{Digest: conf.Digest, Size: int64(len(conf.Data)), Dest: "~/cfg"},
	}
	sp.Assignment.Clones = []api.Clone{
		{URL: url, Dest: "src", Username: "oauth2", Token: "tok-c0ntainer"},
		{URL: url, Dest: "/opt/code", Username: "oauth2", Token: "tok-c0ntainer"},
	}
	dir := t.TempDir()
	sp.Dir = filepath.Join(dir, "work")
	if err := os.Mkdir(sp.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sp)
	if err := os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left, _ := e.Find(context.Background(), map[string]string{container.LabelDir: dir})
		for _, c := range left {
			t.Errorf("container %s outlived its shim", c.Name)
			_ = c.Remove(context.Background())
		}
	})
	ex, out, errs := finishShim(t, dir, execShimIn(t, dir))
	want := "train ran in /workflow\nv2\nv2\nconf\nconf\nthe image keeps its /etc\n/opt/code/.git\n"
	if ex.ExitCode != 0 || out != want {
		t.Errorf("exit %+v\nstdout %q\nwant   %q\nstderr %q", ex, out, want, errs)
	}
	if !strings.Contains(errs, "berth: cloned "+url) {
		t.Errorf("stderr does not say what was cloned: %q", errs)
	}
}
