package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/agent/container"
)

// A container job's code, files and disk (issue 16). The job's working
// directory on the node (DIR/work) is bind-mounted at ContainerWorkdir,
// the container's working directory unless the run names one (a relative
// working_dir is under it): what goes to a relative destination (the
// repo's default ".", `files: [a:b]`) is unpacked or cloned there before
// the container is created. What goes to an absolute destination, or
// under "~" (the container user's HOME, /root for root), is unpacked on
// the node under DIR/carry/N and bind-mounted at its place in the
// container: a clone as one directory; an archive entry by entry, so
// that what the image has beside them stays. resources.disk makes
// DIR/work a file system of its own as for a process job (jobdisk.go), so
// the size holds for the working directory, not for the image's own
// layers. Everything is unpacked by the agent's user in directories only
// it can reach, then handed to the job's user (chown), whom the
// container runs as.

// ContainerWorkdir is where a container job's working directory on its
// node is mounted (dstack's /workflow).
const ContainerWorkdir = "/workflow"

// carriesInContainer reports whether a container job needs its working
// directory mounted: it carries a repo, files, or a disk size.
func carriesInContainer(sp *shimSpec) bool {
	a := sp.Assignment
	return len(a.Archives) > 0 || len(a.Clones) > 0 || a.Disk > 0
}

// containerCarry places a container job's destinations on its node.
type containerCarry struct {
	dir    string // the job's directory
	work   string // its working directory on the node (mounted at ContainerWorkdir)
	home   string // the container user's home, for "~"
	staged []staging
}

// staging is a directory on the node that appears at target in the
// container: whole (a clone), or entry by entry (an archive).
type staging struct {
	host, target string
	whole        bool
}

// dest is the destFunc of a container job.
func (cc *containerCarry) dest(d string, whole bool) (string, error) {
	switch {
	case d == "~" || strings.HasPrefix(d, "~/"):
		if cc.home == "" {
			return "", fmt.Errorf("%s: the container's user has no known home directory: give an absolute path", d)
		}
		d = path.Join(cc.home, strings.TrimPrefix(d, "~"))
	case strings.HasPrefix(d, "~"):
		return "", fmt.Errorf("%s: only the job user's own home (~) may be named", d)
	case !path.IsAbs(d):
		return filepath.Join(cc.work, filepath.FromSlash(d)), nil
	}
	d = path.Clean(d)
	if d == ContainerWorkdir || strings.HasPrefix(d, ContainerWorkdir+"/") {
		return filepath.Join(cc.work, filepath.FromSlash(strings.TrimPrefix(d, ContainerWorkdir))), nil
	}
	if d == "/" {
		return "", errors.New("/: a container's root cannot be replaced: give a directory")
	}
	// Under a directory already staged: in it (a file over a clone, a
	// directory in an archive's).
	for _, s := range cc.staged {
		if d == s.target || strings.HasPrefix(d, s.target+"/") {
			return filepath.Join(s.host, filepath.FromSlash(strings.TrimPrefix(d, s.target))), nil
		}
	}
	host := filepath.Join(cc.dir, "carry", strconv.Itoa(len(cc.staged)))
	if err := os.MkdirAll(host, 0o700); err != nil {
		return "", err
	}
	cc.staged = append(cc.staged, staging{host: host, target: d, whole: whole})
	return host, nil
}

// mounts are the bind mounts of what was staged, and of the working
// directory.
func (cc *containerCarry) mounts() ([]container.Mount, error) {
	ms := []container.Mount{{Source: cc.work, Target: ContainerWorkdir}}
	for _, s := range cc.staged {
		if s.whole {
			ms = append(ms, container.Mount{Source: s.host, Target: s.target})
			continue
		}
		entries, err := os.ReadDir(s.host)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ms = append(ms, container.Mount{Source: filepath.Join(s.host, e.Name()), Target: path.Join(s.target, e.Name())})
		}
	}
	return ms, nil
}

// chown gives everything carried to uid:gid (links themselves, not what
// they point at).
func (cc *containerCarry) chown(uid, gid int) error {
	roots := []string{cc.work}
	for _, s := range cc.staged {
		roots = append(roots, s.host)
	}
	for _, r := range roots {
		err := filepath.WalkDir(r, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// carryIntoContainer readies a container job's working directory and
// what it carries, before its container is created: the disk (jobdisk.go),
// the clones, the archives. It returns the mounts and working directory
// to give the container, and what undoes the disk once the job is over.
func carryIntoContainer(dir string, sp *shimSpec, note func(string)) (mounts []container.Mount, workdir string, unmount func(), err error) {
	unmount = func() {}
	asg := sp.Assignment
	// The agent's user unpacks, in directories only it can reach (the
	// job's), then hands the result over: the job's user could not reach
	// them to unpack.
	host := *sp
	host.Cred = nil
	var diskNote string
	if unmount, diskNote, err = mountJobDisk(dir, &host); err != nil {
		return nil, "", unmount, err
	}
	if diskNote != "" {
		note("resources.disk is not enforced: " + diskNote)
	}
	cc := &containerCarry{dir: dir, work: sp.Dir, home: containerHome(sp)}
	if err = cloneRepos(&host, cc.dest, note); err == nil {
		err = carryArchives(&host, cc.dest)
	}
	if err == nil && sp.Cred != nil && os.Geteuid() == 0 {
		err = cc.chown(int(sp.Cred.UID), int(sp.Cred.GID))
	} else if err == nil {
		err = os.Chmod(sp.Dir, 0o755) // an image's own user may read it
	}
	if err == nil {
		mounts, err = cc.mounts()
	}
	if err != nil {
		unmount()
		return nil, "", func() {}, err
	}
	workdir = ContainerWorkdir
	if wd := asg.WorkingDir; wd != "" {
		workdir = wd
		if !path.IsAbs(wd) {
			workdir = path.Join(ContainerWorkdir, wd)
		}
	}
	return mounts, workdir, unmount, nil
}

// containerHome is the container user's home for "~": HOME in the job's
// environment, else /root where the container runs as root (no user
// named), else unknown.
func containerHome(sp *shimSpec) string {
	if h := envValue(sp.Assignment.Env, "HOME"); h != "" {
		return h
	}
	ct := sp.Assignment.Container
	if sp.Cred == nil && ct != nil && slices.Contains([]string{"", "root", "0", "0:0"}, ct.User) {
		return "/root"
	}
	return ""
}
