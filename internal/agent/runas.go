package agent

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/berth-hq/berth/internal/api"
)

// Jobs run as their user, as slurmd runs them: the server names the run's
// Unix login in the assignment, the agent looks it up on its own host (the
// passwd and group files, as os/user reads them) and the shim starts the
// job's bash with that UID, primary GID and supplementary groups, HOME,
// USER and LOGNAME from the account. That needs an agent running as root;
// an agent that is not, or a login with no account on the node, runs the
// job as the agent's user only where its administrator allows it
// (--run-as-agent), else the job fails to start and says why.
//
// What is the user's and what is not: the job directory (job.json with
// the job's credential, output.log, exit.json, shim.pid) stays the
// agent's, 0700, so the job can neither read another job's files nor
// forge its own status. The job's own files go into a directory of the
// user's, 0700, in the agent's spool (spoolDir/<agent prefix>/<job id>):
// its script, its MPI hostfile, and work/, the default working directory.
// BERTH_JOB_DIR names it. The spool is root's, 0711: a user reaches their
// own directory there and lists nothing. It is apart from the data
// directory because that one is usually under root's or the server's home,
// which no other user may enter.

// defaultSpool is where an agent running as root keeps its users' job
// directories, unless --spool-dir says otherwise.
const defaultSpool = "/var/spool/berth"

// jobCred is the account a job's processes run as.
type jobCred struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// Login names the account in messages.
	Login string `json:"login"`
}

// jobAccount is what the agent decided for a job: cred nil runs it as the
// agent's own user; env sets HOME, USER and LOGNAME from the account it
// runs as (none when that is the agent's own user standing in for another).
type jobAccount struct {
	cred *jobCred
	env  []string
}

// errNoAccount: the job's user has no account on this node.
var errNoAccount = errors.New("no account")

// runAsMode is what the node says of how it runs jobs (api.NodeInfo.RunAs).
func (a *Agent) runAsMode() string {
	if os.Geteuid() == 0 {
		if a.cfg.RunAsAgent {
			return api.RunAsUserElseAgent
		}
		return api.RunAsUser
	}
	me := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	if a.cfg.RunAsAgent {
		return "agent (" + me + ")"
	}
	return "only " + me
}

// account decides whose the job's processes are.
func (a *Agent) account(asg api.Assignment) (jobAccount, error) {
	login := asg.User
	if login == "" {
		// A server older than run-as names no user: its jobs ran as the
		// agent, as they always did.
		return jobAccount{}, nil
	}
	u, err := user.Lookup(login)
	if err != nil {
		if a.cfg.RunAsAgent {
			return jobAccount{}, nil
		}
		if errors.As(err, new(user.UnknownUserError)) {
			return jobAccount{}, fmt.Errorf("user %s has no account on node %s (%w; berth agent --run-as-agent runs such jobs as the agent's user)", login, a.cfg.Name, errNoAccount)
		}
		return jobAccount{}, fmt.Errorf("user %s on node %s: %w", login, a.cfg.Name, err)
	}
	env := []string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return jobAccount{}, fmt.Errorf("user %s on node %s: %w", login, a.cfg.Name, err)
	}
	euid := os.Geteuid()
	switch {
	case int(uid) == euid:
		return jobAccount{env: env}, nil
	case euid != 0 && a.cfg.RunAsAgent:
		return jobAccount{}, nil
	case euid != 0:
		return jobAccount{}, fmt.Errorf("the agent of node %s does not run as root: it cannot run %s's job as %s (berth agent --run-as-agent runs it as the agent's user)", a.cfg.Name, login, login)
	}
	cred := &jobCred{UID: uint32(uid), GID: uint32(gid), Login: login}
	gids, err := u.GroupIds()
	if err != nil {
		return jobAccount{}, fmt.Errorf("user %s on node %s: groups: %w", login, a.cfg.Name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	return jobAccount{cred: cred, env: env}, nil
}

// spool is this agent's part of the spool: its users' job directories.
func (a *Agent) spool() string {
	root := a.cfg.SpoolDir
	if root == "" {
		root = defaultSpool
	}
	return filepath.Join(root, a.prefix)
}

// userJobDir is the directory of the user's own for job id (see above).
func (a *Agent) userJobDir(id int64) string {
	return filepath.Join(a.spool(), strconv.FormatInt(id, 10))
}

// makeUserDir makes the user's directory of a job afresh, with its script,
// its hostfile and, when the job names no working directory, work/; all
// of it theirs. Everything is made while the directory is still root's
// and given to the user last: the user, whose other jobs may be running,
// can plant nothing in it for root to follow.
func (a *Agent) makeUserDir(asg api.Assignment, cred *jobCred, commands string) (dir, work string, env []string, err error) {
	// The spool's directories are made 0711 whatever the umask; one that
	// exists (an administrator's --spool-dir) is left as it is, but this
	// agent's own.
	spool := a.spool()
	for _, d := range []string{filepath.Dir(spool), spool} {
		if err := os.Mkdir(d, 0o711); err == nil || d == spool {
			if err := os.Chmod(d, 0o711); err != nil {
				return "", "", nil, err
			}
		}
	}
	dir = a.userJobDir(asg.JobID)
	if err := os.RemoveAll(dir); err != nil {
		return "", "", nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", "", nil, err
	}
	uid, gid := int(cred.UID), int(cred.GID)
	var mine []string // what becomes the user's, dir last
	work = asg.WorkingDir
	if work == "" {
		work = filepath.Join(dir, "work")
		if err := os.Mkdir(work, 0o700); err != nil {
			return "", "", nil, err
		}
		mine = append(mine, work)
	}
	script := filepath.Join(dir, scriptFile(asg))
	if err := os.WriteFile(script, []byte(commands), 0o600); err != nil {
		return "", "", nil, err
	}
	mine = append(mine, script)
	env, err = writeHostfile(dir, asg) // dist.go
	if err != nil {
		return "", "", nil, err
	}
	if len(env) > 0 {
		mine = append(mine, filepath.Join(dir, fileHostfile))
	}
	for _, p := range append(mine, dir) {
		if err := os.Lchown(p, uid, gid); err != nil {
			return "", "", nil, err
		}
	}
	return dir, work, append(env, "BERTH_JOB_DIR="+dir), nil
}
