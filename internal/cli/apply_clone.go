package cli

import (
	"fmt"
	"os/exec"
	"strings"
)

// checkLocalRef refuses a local repo whose configuration names a branch
// or a commit that its work tree is not on: berth apply packs the work
// tree as it is (dstack would check the branch out on the node and apply
// the local changes over it), so it says so rather than run other code.
func checkLocalRef(dir, branch, hash string) error {
	if branch == "" && hash == "" {
		return nil
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if branch != "" {
		if on := git("symbolic-ref", "--short", "-q", "HEAD"); on != branch {
			return fmt.Errorf("branch: the work tree %s is on %q, not %q (berth packs the work tree as it is: check the branch out, or give the repo by url)", dir, cmpOr(on, "a detached HEAD"), branch)
		}
	}
	if hash != "" {
		if head := git("rev-parse", "HEAD"); !strings.HasPrefix(head, hash) {
			return fmt.Errorf("hash: the work tree %s is at %.12s, not %s (berth packs the work tree as it is: check the commit out, or give the repo by url)", dir, cmpOr(head, "no commit"), hash)
		}
	}
	return nil
}
