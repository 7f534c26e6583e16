package agent

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
)

// Whose a job is: its user's account when the agent is root; the agent's
// own user for an assignment that names none (an older server), and, only
// with --run-as-agent, for a login with no account here.
func TestAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip(err)
	}
	for name, tc := range map[string]struct {
		user       string
		runAsAgent bool
		uid        int // -1: the agent's own
		home, err  string
	}{
		"no user named":            {user: "", uid: -1},
		"root":                     {user: "root", uid: -1, home: "/root"},
		"another user":             {user: "nobody", uid: 65534, home: nobody.HomeDir},
		"no account":               {user: "berth-no-such-login", err: "user berth-no-such-login has no account on node n1"},
		"no account, as the agent": {user: "berth-no-such-login", runAsAgent: true, uid: -1},
	} {
		t.Run(name, func(t *testing.T) {
			a := &Agent{cfg: Config{Name: "n1", RunAsAgent: tc.runAsAgent}}
			acct, err := a.account(api.Assignment{User: tc.user})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, errNoAccount) {
					t.Fatalf("account = %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := -1; acct.cred != nil {
				got = int(acct.cred.UID)
				if got != tc.uid {
					t.Errorf("runs as uid %d, want %d", got, tc.uid)
				}
			} else if tc.uid != -1 {
				t.Errorf("runs as the agent, want uid %d", tc.uid)
			}
			if tc.home != "" && !slicesContains(acct.env, "HOME="+tc.home) || tc.home == "" && len(acct.env) > 0 {
				t.Errorf("env %v, want HOME=%s", acct.env, tc.home)
			}
		})
	}
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A job of another user runs as them (uid, gid, HOME, USER), in its cgroup
// where there are cgroups, working in a directory of theirs in the spool;
// the job directory and its files stay root's; both go with the job.
func TestJobRunsAsItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip(err)
	}
	a := testAgent(t)
	if h, err := cgroup.Detect(); err == nil && h.Version() == 1 {
		a.cg = h // the v1 self-move as the user, through the shim
	}
	spool, err := os.MkdirTemp("", "berth-spool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(spool) })
	if err := os.Chmod(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	a.cfg.SpoolDir = filepath.Join(spool, "spool") // made by the agent
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 7, User: "nobody", Alloc: api.Alloc{CPUs: 1, Memory: 64 << 20},
		Commands: []string{`id -u; id -g; echo "$HOME $USER $LOGNAME"; pwd; echo "$BERTH_JOB_DIR"; grep -c ':/.*berth' /proc/self/cgroup; touch made`},
		Env:      []string{"PATH=" + os.Getenv("PATH")}})
	j := a.jobs[7]
	a.mu.Unlock()
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.ExitCode != 0 {
		t.Fatalf("exit %+v", j.exit)
	}
	out, _ := jobOutput(t, j.dir)
	userDir := a.userJobDir(7)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"65534", nobody.Gid, nobody.HomeDir + " nobody nobody", filepath.Join(userDir, "work"), userDir}
	if len(lines) < len(want)+1 {
		t.Fatalf("output %q", out)
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: %q, want %q (output %q)", i, lines[i], w, out)
		}
	}
	if a.cg != nil && lines[len(want)] == "0" {
		t.Errorf("the job ran outside its cgroup: %q", out)
	}
	owner := func(p string) (uint32, os.FileMode) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid, os.FileMode(st.Mode & 0o7777)
	}
	for p, w := range map[string][2]uint32{
		userDir:                                {65534, 0o700},
		filepath.Join(userDir, "work"):         {65534, 0o700},
		filepath.Join(userDir, "work", "made"): {65534, 0},
		filepath.Join(userDir, fileScript):     {65534, 0o600},
		j.dir:                                  {0, 0o700},
		filepath.Join(j.dir, fileSpec):         {0, 0o600},
		filepath.Join(j.dir, fileExit):         {0, 0o600},
		filepath.Join(j.dir, fileOutput):       {0, 0o600},
		a.spool():                              {0, 0o711},
	} {
		uid, mode := owner(p)
		if uid != w[0] || w[1] != 0 && uint32(mode) != w[1] {
			t.Errorf("%s: uid %d mode %o, want uid %d mode %o", p, uid, mode, w[0], w[1])
		}
	}
	a.mu.Lock()
	a.removeLocked(j)
	a.mu.Unlock()
	for _, d := range []string{j.dir, userDir} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", d, err)
		}
	}
}

// A job whose user has no account on the node fails to start, saying so.
func TestJobOfUnknownUserFails(t *testing.T) {
	a := testAgent(t)
	a.mu.Lock()
	a.startLocked(api.Assignment{JobID: 8, User: "berth-no-such-login", Commands: []string{"true"}})
	j := a.jobs[8]
	a.mu.Unlock()
	waitFor(t, a, "the job's end", func() bool { return j.exit != nil })
	if j.exit.Reason != exitStartFailed || !strings.Contains(j.exit.Message, "user berth-no-such-login has no account on node n1") {
		t.Errorf("exit %+v, want start_failed: no account", j.exit)
	}
}

// A container job of a user runs as them (--user UID:GID, their groups),
// whatever its `user:`; `privileged:` is refused for it.
func TestContainerRunsAsItsUser(t *testing.T) {
	asg := api.Assignment{JobID: 9, Container: &api.Container{Image: "img", User: "root"}}
	sp := &shimSpec{Assignment: asg, Cred: &jobCred{UID: 1001, GID: 1002, Groups: []uint32{1002, 27}, Login: "alice"}}
	s, err := containerSpec(t.TempDir(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if s.User != "1001:1002" || strings.Join(s.GroupAdd, ",") != "1002,27" {
		t.Errorf("user %q groups %v, want 1001:1002 and 1002,27", s.User, s.GroupAdd)
	}
	sp.Assignment.Container = &api.Container{Image: "img", Privileged: true}
	if _, err := containerSpec(t.TempDir(), sp); err == nil || !strings.Contains(err.Error(), "privileged") {
		t.Errorf("a privileged container for alice: %v, want refused", err)
	}
}
