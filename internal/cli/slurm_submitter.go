package cli

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// The Slurm commands' side of the translation's Submitter: who this
// process is and where it runs (internal/slurmconv takes it as a value and
// does no I/O).

// currentSubmitter is this process's user, group, host, directory and
// environment.
func currentSubmitter(e *slurmEnv) submitter {
	s := submitter{user: e.getenv("USER"), uid: os.Getuid(), gid: os.Getgid(), cwd: e.cwd, env: e.environ(), now: e.now()}
	if u, err := user.Current(); err == nil {
		s.user = u.Username
	}
	if g, err := user.LookupGroupId(strconv.Itoa(s.gid)); err == nil {
		s.group = g.Name
	}
	if s.user == "" {
		s.user = strconv.Itoa(s.uid)
	}
	if s.group == "" {
		s.group = s.user
	}
	s.exe, _ = os.Executable()
	s.links = slurmLinksDir(s.exe)
	s.host, _ = os.Hostname()
	if i := strings.IndexByte(s.host, '.'); i > 0 {
		s.host = s.host[:i]
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shQuote quotes s for bash.
func shQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// slurmLinksDir is the directory on PATH whose srun is a link to exe (the
// Slurm-named links, berth install-slurm-shims DIR), "" when there is none.
func slurmLinksDir(exe string) string {
	p, err := exec.LookPath("srun")
	if err != nil || exe == "" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	target, err1 := filepath.EvalSymlinks(abs)
	self, err2 := filepath.EvalSymlinks(exe)
	if err1 != nil || err2 != nil {
		return ""
	}
	if target != self {
		// The links may point to the lean binary, which hands the rest
		// to this one beside it (install-slurm-shims).
		if full, err := filepath.EvalSymlinks(target + ".full"); err != nil || full != self {
			return ""
		}
	}
	return filepath.Dir(abs)
}
