package roles

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/cli"
)

// TestJobsRunAsTheirUsers: two Unix users of the host, each submitting
// with sbatch through the local agent's socket with no token, get jobs
// that run as them: `id -u`, HOME and USER are theirs, the -o file in the
// submit directory and the job's own directory are theirs, and neither
// job can read the other's directory. A Berth user with no account on the
// node gets a job that fails to start, saying so.
func TestJobsRunAsTheirUsers(t *testing.T) {
	w := newSocketWorld(t)
	a, aUID, aGID := w.user, w.uid, w.gid
	b, bUID, bGID := newUnixUser(t)
	// Each submits from a directory of their own, as Slurm users do: the
	// job creates its -o file there as its user.
	dirs := map[uint32]string{}
	for _, u := range []struct{ uid, gid uint32 }{{aUID, aGID}, {bUID, bGID}} {
		d := filepath.Join(w.shared, "home-"+strconv.Itoa(int(u.uid)))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, int(u.uid), int(u.gid)); err != nil {
			t.Fatal(err)
		}
		dirs[u.uid] = d
	}
	// The handshake goes through a directory both reach.
	meet := filepath.Join(w.shared, "meet")
	if err := os.Mkdir(meet, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(meet, 0o777); err != nil {
		t.Fatal(err)
	}
	sbatch := func(uid, gid uint32, script string, flags ...string) string {
		t.Helper()
		out, err := w.runIn(t, dirs[uid], uid, gid, append(append([]string{"sbatch", "--parsable", "-o", "out-%j.txt"}, flags...), "--wrap", script)...)
		if err != nil {
			t.Fatalf("sbatch as uid %d: %v\n%s", uid, err, out)
		}
		return strings.TrimSpace(out)
	}
	// A's job says who it is, leaves a file in its own directory, tells
	// where that is, and waits for B's job to have looked.
	aJob := sbatch(aUID, aGID, `id -u; echo "home=$HOME user=$USER logname=$LOGNAME"; touch "$BERTH_JOB_DIR/mine"; `+
		`echo "$BERTH_JOB_DIR" >`+meet+`/a.dir; n=0; while [ ! -e `+meet+`/b.done ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done`,
		"--export=NONE") // HOME, USER, LOGNAME then come from the account, not from the submitter's environment
	var aDir string
	for deadline := time.Now().Add(30 * time.Second); aDir == ""; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(meet, "a.dir")); err == nil && strings.HasSuffix(string(b), "\n") {
			aDir = strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatal("A's job did not start")
		}
	}
	for _, p := range []string{aDir, filepath.Join(aDir, "mine")} {
		if uid, mode := statOwner(t, p); uid != aUID || p != filepath.Join(aDir, "mine") && mode != 0o700 {
			t.Errorf("%s: uid %d mode %o, want %s's (uid %d), 0700", p, uid, mode, a.Username, aUID)
		}
	}
	// B's job tries A's directory, its script, and the list of all jobs'.
	bJob := sbatch(bUID, bGID, `id -u; echo "home=$HOME user=$USER"; ls "$(cat `+meet+`/a.dir)" && echo READ-A-DIR; `+
		`cat "$(cat `+meet+`/a.dir)/script" && echo READ-A-SCRIPT; ls "$(dirname "$BERTH_JOB_DIR")" && echo LISTED-JOBS; touch `+meet+`/b.done`)
	for _, j := range []struct {
		id       string
		uid, gid uint32
	}{{bJob, bUID, bGID}, {aJob, aUID, aGID}} {
		if out, err := w.run(t, j.uid, j.gid, "logs", "-f", j.id); err != nil {
			t.Fatalf("logs -f %s: %v\n%s", j.id, err, out)
		}
	}
	read := func(uid uint32, id string) string {
		t.Helper()
		p := filepath.Join(dirs[uid], "out-"+id+".txt")
		if owner, mode := statOwner(t, p); owner != uid {
			t.Errorf("%s: uid %d mode %o, want uid %d (made by the job, as its user)", p, owner, mode, uid)
		}
		out, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	aOut, bOut := read(aUID, aJob), read(bUID, bJob)
	if want := strconv.Itoa(int(aUID)) + "\nhome=" + a.HomeDir + " user=" + a.Username + " logname=" + a.Username + "\n"; !strings.HasPrefix(aOut, want) {
		t.Errorf("A's job printed %q, want %q first", aOut, want)
	}
	if want := strconv.Itoa(int(bUID)) + "\nhome=" + dirs[bUID] + " user=" + b.Username + "\n"; !strings.HasPrefix(bOut, want) {
		t.Errorf("B's job printed %q, want %q first", bOut, want)
	}
	for _, leak := range []string{"READ-A-DIR", "READ-A-SCRIPT", "LISTED-JOBS", "touch"} {
		if strings.Contains(bOut, leak) {
			t.Errorf("B's job could read A's files (%s):\n%s", leak, bOut)
		}
	}
	if strings.Count(bOut, "Permission denied") < 3 {
		t.Errorf("B's job was not refused A's directory, A's script and the jobs' list:\n%s", bOut)
	}
	// Both directories went with their jobs.
	if _, err := os.Stat(aDir); !os.IsNotExist(err) {
		t.Errorf("A's job directory %s is still there (%v)", aDir, err)
	}

	// A Berth user with no account on the node: made by the admin (root
	// through the socket), submitting with a token.
	if out, err := w.run(t, 0, 0, "user", "create", "berthghost"); err != nil {
		t.Fatalf("user create: %v\n%s", err, out)
	}
	tok, err := w.run(t, 0, 0, "token", "create", "--user", "berthghost")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, tok)
	}
	cfg, err := cli.ReadClientConfig(filepath.Join(w.home, "config.yml"))
	if err != nil {
		t.Fatal(err)
	}
	ghost := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(w.bin, args...)
		cmd.Env = append(baseEnv(), "HOME="+w.shared, "BERTH_URL="+cfg.URL, "BERTH_TOKEN="+lastLine(tok), "BERTH_SOCKET=none")
		cmd.Dir = meet
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run()
		return out.String()
	}
	id := strings.TrimSpace(ghost("sbatch", "--parsable", "--wrap", "echo ran"))
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch as berthghost: %s", id)
	}
	ghost("logs", "-f", id)
	// The reason is the run's history (GET /runs/{ref}).
	req, _ := http.NewRequest(http.MethodGet, cfg.URL+"/api/v1/runs/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+lastLine(tok))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "failed_to_start") || !strings.Contains(string(body), "user berthghost has no account on node sock-node") {
		t.Errorf("the run of a user with no account here does not say so:\n%s", body)
	}
	if out := ghost("fleet"); !strings.Contains(out, "RUN AS") || !strings.Contains(out, "  user  ") {
		t.Errorf("berth fleet does not say the node runs jobs as their users:\n%s", out)
	}
}

// runIn is run with the client working in dir.
func (w *socketWorld) runIn(t *testing.T, dir string, uid, gid uint32, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Env = append(baseEnv(), "HOME="+dir, "BERTH_SOCKET="+w.sock)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func statOwner(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Mode & 0o7777
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
