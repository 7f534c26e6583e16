package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// A native job's volumes and /dev/shm (issue 16). Containers get theirs
// from the engine; a job on the host gets them in a mount namespace of its
// own, so that nothing it mounts is seen by the host or by another job.
//
// The shim cannot mount inside the job's namespace itself: Go gives no
// hook between the clone and the exec of the job's shell. So the job is
// started as a short-lived copy of the shim (`berth shim @ns:DIR`) in a new
// mount namespace (CLONE_NEWNS; Go's fork makes / recursively private in
// it, so no mount leaks back to the host). That copy, still root, makes
// the bind mounts and the tmpfs, drops to the job's user and execs the
// job's shell: same pid, so the job's cgroup, process group and
// signalling are those the shim set up for the shell itself.

// nsArgPrefix starts the shim's argument that asks for the mounting copy.
const nsArgPrefix = "@ns:"

// fileNS is what the mounting copy does, written by the shim.
const fileNS = "mountns.json"

// nsSpec is the mounting copy's work.
type nsSpec struct {
	Argv   []string      `json:"argv"` // the job's shell and script
	Dir    string        `json:"dir"`  // its working directory
	Cred   *jobCred      `json:"cred,omitempty"`
	Mounts []spec.Volume `json:"mounts,omitempty"`
	Shm    int64         `json:"shm,omitempty"` // bytes of a private /dev/shm; 0: the host's
}

// needsMountNS says whether the job asks for anything only a mount
// namespace gives.
func needsMountNS(sp *shimSpec) bool {
	return len(sp.Assignment.Mounts) > 0 || sp.Assignment.ShmSize > 0
}

// mountNamespaces says whether this agent can give a job a mount
// namespace (api.NodeInfo.Mounts): it tries,
// on a thread of its own that is thrown away after (a Go thread locked
// and never unlocked ends with its goroutine).
func mountNamespaces() string {
	if os.Geteuid() != 0 {
		return "none (the agent is not root)"
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- err
			return
		}
		done <- unix.Mount("tmpfs", os.TempDir(), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4096")
	}()
	if err := <-done; err != nil {
		return fmt.Sprintf("none (%v: no CAP_SYS_ADMIN?)", err)
	}
	return api.MountsNamespaces
}

// wrapInMountNS turns cmd (the job's shell) into the mounting copy of the
// shim that runs it; the caller starts cmd as before. On an agent that is
// not root, optional volumes are left out (said on stderr) and anything
// else refused.
func wrapInMountNS(cmd *exec.Cmd, dir string, sp *shimSpec, stderr func(string)) error {
	if uid := os.Geteuid(); uid != 0 && sp.Assignment.ShmSize == 0 &&
		!slices.ContainsFunc(sp.Assignment.Mounts, func(v spec.Volume) bool { return !v.Optional }) {
		for _, v := range sp.Assignment.Mounts {
			stderr(fmt.Sprintf("berth: optional volume %s not mounted: the agent is not root\n", v.InstancePath))
		}
		return nil
	} else if uid != 0 {
		return fmt.Errorf("volumes and resources.shm_size on a run without an image need an agent running as root (this one runs as uid %d): run it in a container (`image:`) or drop them", uid)
	}
	for _, m := range sp.Assignment.Mounts {
		if m.InstancePath == "" {
			return fmt.Errorf("volume %q: this node cannot attach it (no path for it here)", strings.Join(m.NetworkNames(), "|"))
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	ns := nsSpec{Argv: cmd.Args, Dir: cmd.Dir, Cred: sp.Cred, Mounts: sp.Assignment.Mounts, Shm: sp.Assignment.ShmSize}
	ns.Argv = append([]string{cmd.Path}, cmd.Args[1:]...)
	if err := writeJSONAtomic(filepath.Join(abs, fileNS), ns); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the shim's binary: %w", err)
	}
	// The shim's own command line less its argument: `berth shim` (or a
	// test binary's equivalent).
	args := append([]string{}, os.Args[:len(os.Args)-1]...)
	cmd.Path, cmd.Args = self, append(args, nsArgPrefix+abs)
	cmd.SysProcAttr.Credential = nil // the copy drops to the user itself
	cmd.SysProcAttr.Unshareflags |= syscall.CLONE_NEWNS
	return nil
}

// runMountNS is the mounting copy: it never returns on success (the job's
// shell replaces it). What fails is said on stderr, which is the job's
// output.
func runMountNS(dir string) int {
	var ns nsSpec
	if err := readJSON(filepath.Join(dir, fileNS), &ns); err != nil {
		fmt.Fprintf(os.Stderr, "berth: cannot start the job: %v\n", err)
		return 127
	}
	if err := ns.mount(); err != nil {
		fmt.Fprintf(os.Stderr, "berth: cannot start the job: %v\n", err)
		return 127
	}
	if err := ns.exec(); err != nil {
		fmt.Fprintf(os.Stderr, "berth: cannot start the job: %v\n", err)
		return 127
	}
	return 0 // not reached
}

func (ns *nsSpec) mount() error {
	// Go's fork made / recursively private already; saying it again costs
	// nothing and does not depend on that.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the job's mounts private: %w", err)
	}
	home := os.Getenv("HOME")
	for i, m := range ns.Mounts {
		if err := ns.bind(m, home); err != nil {
			if m.Optional {
				fmt.Fprintf(os.Stderr, "berth: optional volume %s not mounted: %v\n", m.InstancePath, err)
				continue
			}
			return fmt.Errorf("volumes[%d] (%s:%s): %w", i, m.InstancePath, m.Path, err)
		}
	}
	if ns.Shm > 0 {
		if err := os.MkdirAll("/dev/shm", 0o1777); err != nil {
			return fmt.Errorf("/dev/shm: %w", err)
		}
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=1777", ns.Shm)); err != nil {
			return fmt.Errorf("resources.shm_size: mount a tmpfs of %d bytes at /dev/shm: %w", ns.Shm, err)
		}
	}
	return nil
}

// bind mounts the host directory of m at its path. A host directory that
// does not exist is made (owned by the job's user, as Docker makes a
// missing bind source); so is the mount point, which is left on the host as
// an empty directory.
func (ns *nsSpec) bind(m spec.Volume, home string) error {
	src := m.InstancePath
	if src == "~" || strings.HasPrefix(src, "~/") {
		if home == "" {
			return errors.New("~: the job has no HOME")
		}
		src = filepath.Join(home, strings.TrimPrefix(src, "~"))
	}
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		if c := ns.Cred; c != nil {
			if err := os.Chown(src, int(c.UID), int(c.GID)); err != nil {
				return err
			}
		}
	} else if err != nil {
		return err
	}
	if err := os.MkdirAll(m.Path, 0o755); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if err := unix.Mount(src, m.Path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind mount: %w", err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", m.Path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("read-only: %w", err)
		}
	}
	return nil
}

// exec drops to the job's user and becomes its shell.
func (ns *nsSpec) exec() error {
	if c := ns.Cred; c != nil {
		groups := make([]int, len(c.Groups))
		for i, g := range c.Groups {
			groups[i] = int(g)
		}
		// Go applies these to every thread of the process.
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(int(c.GID)); err != nil {
			return fmt.Errorf("setgid: %w", err)
		}
		if err := syscall.Setuid(int(c.UID)); err != nil {
			return fmt.Errorf("setuid: %w", err)
		}
	}
	if ns.Dir != "" {
		// Again, in the namespace: a volume may be mounted over it.
		if err := os.Chdir(ns.Dir); err != nil {
			return err
		}
	}
	if len(ns.Argv) == 0 {
		return errors.New("no command")
	}
	return syscall.Exec(ns.Argv[0], ns.Argv, os.Environ())
}
