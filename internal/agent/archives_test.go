package agent

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/pack"
	"github.com/berth-hq/berth/internal/spec"
)

// A job's archives are fetched with the run's credential and unpacked as
// the job's user before the commands run: the files are the user's, the
// commands see them; an archive bound for a directory the user may not
// write fails the job at start, saying why (root could have written it).
func TestArchivesUnpackAsTheJobUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "train.sh"), []byte("echo train ran\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	arc, err := pack.Path(src, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		if r.URL.Path != api.Version+"/runs/70/blobs/"+arc.Digest || r.Header.Get("Authorization") != "Bearer job-token" {
			http.Error(w, `{"error":"no"}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write(arc.Data)
	}))
	t.Cleanup(srv.Close)

	a := testAgent(t)
	a.cfg.Server = srv.URL
	spool, err := os.MkdirTemp("", "berth-spool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(spool) })
	if err := os.Chmod(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	a.cfg.SpoolDir = filepath.Join(spool, "spool")
	rootOnly := filepath.Join(spool, "root-only")
	if err := os.Mkdir(rootOnly, 0o755); err != nil {
		t.Fatal(err)
	}

	start := func(id int64, dest string) *localJob {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.startLocked(api.Assignment{JobID: id, RunID: 70, User: "nobody", JobToken: "job-token", Alloc: api.Alloc{CPUs: 1},
			Commands: []string{"bash train.sh", "stat -c '%u %a' train.sh"}, Env: []string{"PATH=" + os.Getenv("PATH")},
			Archives: []spec.Archive{{Digest: arc.Digest, Size: int64(len(arc.Data)), Dest: dest}}})
		return a.jobs[id]
	}
	j := start(71, ".")
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	out, _ := jobOutput(t, j.dir)
	if j.exit.ExitCode != 0 || out != "train ran\n65534 750\n" {
		t.Errorf("job with its repo: exit %+v, output %q (asked %v)", j.exit, out, asked)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(a.userJobDir(71), "work", "train.sh"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("train.sh: uid %d, %v; want nobody's", st.Uid, err)
	}

	j = start(72, rootOnly)
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if msg := j.exit.Message; j.exit.ExitCode == 0 || !strings.Contains(msg, "as nobody") || !strings.Contains(msg, "Permission denied") {
		t.Errorf("archive into a directory nobody may not write: exit %+v", j.exit)
	}
	if _, err := os.Stat(filepath.Join(rootOnly, "train.sh")); err == nil {
		t.Error("the archive was written where its user may not write")
	}
}
