package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-hq/berth/internal/api"
)

// Repos given by URL (issue 16): before the archives are unpacked (so
// that `files` land over the repo, as a local repo's do), the shim clones
// each with the node's `git`, as the job's user, into its destination:
// shallow (one commit) for a branch or the default branch; for a hash,
// one commit fetched by its hash where the server allows it, else the
// history that holds it. The credentials the server put in travel to git
// in its environment, never its arguments: a token as an HTTP
// Authorization header (git's http.extraHeader through GIT_CONFIG_*), an
// SSH key as a 0600 file of the user's for that one clone. The host keys
// of the project's secret GIT_KNOWN_HOSTS are the only ones trusted;
// without it an unknown host key is accepted and remembered for that
// clone only (nothing written to the user's known_hosts). A clone that fails fails the job
// at its start, with git's own words.

// cloneRepos clones the job's repos given by URL; note reports each
// clone (its commit) in the job's output.
func cloneRepos(sp *shimSpec, where destFunc, note func(string)) error {
	for _, c := range sp.Assignment.Clones {
		msg, err := cloneOne(sp, c, where)
		if err != nil {
			return fmt.Errorf("clone %s: %w", c.URL, err)
		}
		note(msg)
	}
	return nil
}

func cloneOne(sp *shimSpec, c api.Clone, where destFunc) (string, error) {
	dest, err := where(c.Dest, true)
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("git"); err != nil {
		return "", errors.New("git is not installed on this node (Debian: apt-get install git)")
	}
	if entries, err := os.ReadDir(dest); err == nil && len(entries) > 0 {
		if c.IfExists == "skip" {
			return fmt.Sprintf("%s is not empty: not cloned (if_exists: skip)", dest), nil
		}
		return "", fmt.Errorf("%s is not empty (`if_exists: skip` keeps what is there)", dest)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()

	env := append(append([]string(nil), sp.Env...), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
	var secrets []string
	if c.Token != "" {
		auth := base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Token))
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic "+auth)
		secrets = append(secrets, c.Token, auth)
	}
	// ssh: batch mode (no prompt), the key given (if any) and only it, a
	// host key of its own file.
	tmp, err := os.MkdirTemp("", "berth-git-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if sp.Cred != nil && os.Geteuid() == 0 {
		if err := os.Chown(tmp, int(sp.Cred.UID), int(sp.Cred.GID)); err != nil {
			return "", err
		}
	}
	// The host keys the project trusts (GIT_KNOWN_HOSTS), and only
	// them; else the first one seen, for this clone.
	checking := "accept-new"
	if c.KnownHosts != "" {
		checking = "yes"
		if err := os.WriteFile(filepath.Join(tmp, "known_hosts"), []byte(strings.TrimSpace(c.KnownHosts)+"\n"), 0o644); err != nil {
			return "", err
		}
	}
	ssh := fmt.Sprintf("ssh -o BatchMode=yes -o StrictHostKeyChecking=%s -o UserKnownHostsFile=%s", checking, filepath.Join(tmp, "known_hosts"))
	if c.SSHKey != "" {
		key := filepath.Join(tmp, "key")
		if err := os.WriteFile(key, []byte(strings.TrimSpace(c.SSHKey)+"\n"), 0o600); err != nil {
			return "", err
		}
		if sp.Cred != nil && os.Geteuid() == 0 {
			if err := os.Chown(key, int(sp.Cred.UID), int(sp.Cred.GID)); err != nil {
				return "", err
			}
		}
		ssh += fmt.Sprintf(" -o IdentitiesOnly=yes -i %s", key)
	}
	env = append(env, "GIT_SSH_COMMAND="+ssh)

	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Env, cmd.Dir = env, "/"
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if sp.Cred != nil && os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sp.Cred.UID, Gid: sp.Cred.GID, Groups: sp.Cred.Groups}}
		}
		err := cmd.Run()
		text := strings.TrimSpace(out.String())
		for _, s := range secrets {
			text = strings.ReplaceAll(text, s, "***")
		}
		if err != nil {
			if len(text) > 2000 {
				text = "…" + text[len(text)-2000:]
			}
			if text == "" {
				text = err.Error()
			}
			return "", errors.New(text)
		}
		return text, nil
	}

	clone := []string{"clone", "--quiet", "--depth", "1"}
	if c.Branch != "" {
		clone = append(clone, "--branch", c.Branch)
	}
	if c.Hash != "" {
		clone = append(clone, "--no-checkout")
	}
	if _, err := git(append(clone, "--", c.URL, dest)...); err != nil {
		return "", credentialHint(c, err)
	}
	if c.Hash != "" {
		if _, err := git("-C", dest, "fetch", "--quiet", "--depth", "1", "origin", c.Hash); err != nil {
			// Not fetchable by its hash (a short one, or a server that
			// allows only refs): the whole history, then the hash in it.
			if _, err := git("-C", dest, "fetch", "--quiet", "--unshallow", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"); err != nil {
				return "", err
			}
		}
		if _, err := git("-C", dest, "-c", "advice.detachedHead=false", "checkout", "--quiet", c.Hash); err != nil {
			return "", fmt.Errorf("commit %s: %w", c.Hash, err)
		}
	}
	head, err := git("-C", dest, "rev-parse", "--short=12", "HEAD")
	if err != nil {
		return "", err
	}
	ref := c.Branch
	if ref == "" {
		ref = "default branch"
	}
	if c.Hash != "" {
		ref = "commit"
	}
	return fmt.Sprintf("cloned %s (%s %s) into %s", c.URL, ref, head, dest), nil
}

// credentialHint adds to a clone's failure what to do when the server
// wanted credentials it was not given, or refused those it was.
func credentialHint(c api.Clone, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "could not read Username") || strings.Contains(msg, "Authentication failed"):
		if c.Token != "" {
			return fmt.Errorf("%w (the server refused the project's secret GIT_TOKEN as user %s)", err, c.Username)
		}
		return fmt.Errorf("%w (the repository wants credentials: berth secret set GIT_TOKEN)", err)
	case strings.Contains(msg, "Host key verification failed") && c.KnownHosts != "":
		return fmt.Errorf("%w (the host's key is not among the project's secret GIT_KNOWN_HOSTS: ssh-keyscan HOST shows it)", err)
	case strings.Contains(msg, "Permission denied (publickey") || strings.Contains(msg, "Host key verification failed"):
		if c.SSHKey != "" {
			return fmt.Errorf("%w (the server refused the project's secret GIT_SSH_KEY)", err)
		}
		return fmt.Errorf("%w (the repository wants an SSH key: berth secret set GIT_SSH_KEY --from-file KEY)", err)
	}
	return err
}
