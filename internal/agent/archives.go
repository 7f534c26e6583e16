package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/pack"
	"github.com/berth-hq/berth/internal/spec"
)

// A job's code and files (issue 16): the assignment lists the archives
// berth apply packed from the run's `repos` and `files`; before the
// commands run, the shim fetches each from the server, through the run
// and with the run's own credential, and unpacks it where it goes, as the
// job's user. A job of the agent's own user is unpacked by the shim
// (pack.Unpack); another user's by `tar` run with the user's credentials,
// fed the archive on its stdin, so that nothing the user could not write
// is written and no link of theirs is followed with root's rights. A job
// that cannot get its code does not start, and says why.

// fetchTimeout bounds the fetch of one archive.
const fetchTimeout = 10 * time.Minute

// archiveDest is where an archive of the job goes: Dest under the job's
// working directory, "~" the user's home, or absolute.
func archiveDest(dest, work string, env []string) (string, error) {
	switch {
	case dest == "~" || strings.HasPrefix(dest, "~/"):
		home := ""
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "HOME="); ok {
				home = v // the last wins, as in the job's environment
			}
		}
		if home == "" {
			return "", fmt.Errorf("%s: the job's user has no home directory (HOME)", dest)
		}
		return filepath.Join(home, strings.TrimPrefix(dest, "~")), nil
	case strings.HasPrefix(dest, "~"):
		return "", fmt.Errorf("%s: only the job user's own home (~) may be named", dest)
	case filepath.IsAbs(dest):
		return filepath.Clean(dest), nil
	}
	return filepath.Join(work, dest), nil
}

// destFunc says where on the node a destination of the job's (an
// archive's or a clone's) goes: hostDest for a process job,
// containerCarry.dest for a container's (carry_container.go).
type destFunc func(dest string, whole bool) (string, error)

// hostDest is where a process job's destination is on its node.
func hostDest(sp *shimSpec) destFunc {
	return func(dest string, _ bool) (string, error) { return archiveDest(dest, sp.Dir, sp.Env) }
}

// carryArchives fetches and unpacks the job's archives before it starts.
func carryArchives(sp *shimSpec, where destFunc) error {
	asg := sp.Assignment
	if len(asg.Archives) == 0 {
		return nil
	}
	if sp.Server == "" {
		return errors.New("the agent named no server to fetch the run's code from")
	}
	c := client.New(sp.Server, asg.JobToken)
	for _, a := range asg.Archives {
		if err := carryOne(c, sp, a, where); err != nil {
			return err
		}
	}
	return nil
}

func carryOne(c *client.Client, sp *shimSpec, a spec.Archive, where destFunc) error {
	dest, err := where(a.Dest, false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	var buf bytes.Buffer
	buf.Grow(int(a.Size))
	if err := c.RunBlob(ctx, strconv.FormatInt(sp.Assignment.RunID, 10), a.Digest, &buf); err != nil {
		return fmt.Errorf("fetch the run's archive %.12s: %w", a.Digest, err)
	}
	if sp.Cred == nil || os.Geteuid() != 0 {
		if err := pack.Unpack(&buf, dest); err != nil {
			return fmt.Errorf("%s: %w", dest, err)
		}
		return nil
	}
	// tar (GNU's or busybox's: every node has one), not this binary,
	// which the user may not be allowed to execute (a build directory
	// of root's, a 0700 install).
	cmd := exec.CommandContext(ctx, "sh", "-c", `mkdir -p -- "$1" && exec tar -x -z -p -f - -C "$1"`, "sh", dest)
	cmd.Stdin = &buf
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = sp.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sp.Cred.UID, Gid: sp.Cred.GID, Groups: sp.Cred.Groups}}
	cmd.Dir = "/"
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("unpack into %s as %s: %v: %s", dest, sp.Cred.Login, err, strings.TrimSpace(out.String()))
	}
	return nil
}
