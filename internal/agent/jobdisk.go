package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// resources.disk (issue 16): where the agent runs as root and the node has
// mkfs.ext4, the job's default working directory is an ext4 file system
// of that size of its own, in a sparse image file in the job's directory,
// loop-mounted (nosuid, nodev) and owned by the job's user; a job that
// writes past it gets ENOSPC, and nothing else on the node fills up. The
// shim mounts it before the job starts and detaches it when the job ends;
// a restarted agent detaches what a dead shim left (removeDir). Elsewhere
// (an agent not root, no mkfs.ext4, a working_dir the job names, a
// container) the size is not enforced, and the job's output says so.
// Project quotas would need the data directory's file system mounted with
// them, which is an administrator's choice; a loop device needs nothing.

const fileDiskImage = "disk.img"

// diskEnforced says why resources.disk cannot be enforced here ("": it
// can).
func diskEnforced() string {
	if os.Geteuid() != 0 {
		return "the agent does not run as root"
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return "mkfs.ext4 is not installed (Debian: e2fsprogs)"
	}
	return ""
}

// mountJobDisk makes the job's working directory a file system of its
// own of sp.Assignment.Disk bytes; unmount undoes it. note, when not
// empty, says why the size is not enforced.
func mountJobDisk(dir string, sp *shimSpec) (unmount func(), note string, err error) {
	unmount = func() {}
	size := sp.Assignment.Disk
	if size <= 0 {
		return unmount, "", nil
	}
	if sp.Assignment.WorkingDir != "" {
		return unmount, "the job names its own working_dir", nil
	}
	if why := diskEnforced(); why != "" {
		return unmount, why, nil
	}
	img := filepath.Join(dir, fileDiskImage)
	f, err := os.OpenFile(img, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return unmount, "", fmt.Errorf("disk image: %w", err)
	}
	err = f.Truncate(size) // sparse: the node's disk is used as the job writes
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(img)
		return unmount, "", fmt.Errorf("disk image: %w", err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if c := sp.Cred; c != nil {
		uid, gid = int(c.UID), int(c.GID)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-E", fmt.Sprintf("root_owner=%d:%d", uid, gid), img).CombinedOutput(); err != nil {
		os.Remove(img)
		return unmount, "", fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("mount", "-o", "loop,nosuid,nodev", img, sp.Dir).CombinedOutput(); err != nil {
		os.Remove(img)
		return unmount, "", fmt.Errorf("mount the job's disk: %v: %s", err, strings.TrimSpace(string(out)))
	}
	unmount = func() {
		_ = unix.Unmount(sp.Dir, unix.MNT_DETACH) // the loop device goes with it (autoclear)
		os.Remove(img)
	}
	if err := errors.Join(os.Remove(filepath.Join(sp.Dir, "lost+found")), os.Chmod(sp.Dir, 0o700)); err != nil {
		unmount()
		return func() {}, "", fmt.Errorf("the job's disk: %w", err)
	}
	return unmount, "", nil
}

// detachJobDisks detaches what a dead shim left mounted on the working
// directories of a job directory (no error: most have none).
func detachJobDisks(dirs ...string) {
	for _, d := range dirs {
		_ = unix.Unmount(filepath.Join(d, "work"), unix.MNT_DETACH)
	}
}

// diskLimit is what the node says of resources.disk (api.NodeInfo.Disk).
func diskLimit() string {
	if why := diskEnforced(); why != "" {
		return "not enforced: " + why
	}
	return "enforced (ext4 image)"
}
