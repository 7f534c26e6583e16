package server

import (
	"strings"

	"github.com/berth-hq/berth/internal/api"
)

// Git credentials for repos given by URL (issue 16): as a job leaves for
// its agent, each clone gets its project's secret GIT_TOKEN (the password
// of an HTTP(S) clone; the user name is GIT_USERNAME, else "oauth2",
// which GitHub, GitLab and Gitea accept with a token) or GIT_SSH_KEY (a
// private key, for ssh:// and user@host:path URLs) with GIT_KNOWN_HOSTS
// (the host keys to trust, else the first one seen). Like every secret,
// they are never stored with the run, and masked in its logs.

// Names of the secrets a clone uses.
const (
	SecretGitToken    = "GIT_TOKEN"
	SecretGitUsername = "GIT_USERNAME"
	SecretGitSSHKey   = "GIT_SSH_KEY"
	// SecretGitKnownHosts, when set, are the only SSH host keys a clone
	// trusts (known_hosts lines); unset, a host's key is taken on first
	// sight, for that clone only.
	SecretGitKnownHosts = "GIT_KNOWN_HOSTS"
)

// putGitCredentials gives a's clones their credentials (a copy: the
// slice is the cluster's).
func (s *Server) putGitCredentials(a api.Assignment) api.Assignment {
	if len(a.Clones) == 0 {
		return a
	}
	vals := s.secrets.values(a.ProjectID)
	clones := make([]api.Clone, len(a.Clones))
	var used []string
	for i, c := range a.Clones {
		if isHTTPGit(c.URL) {
			if tok := vals[SecretGitToken]; tok != "" {
				c.Token, c.Username = tok, vals[SecretGitUsername]
				if c.Username == "" {
					c.Username = "oauth2"
				}
				used = append(used, tok)
			}
		} else if isSSHGit(c.URL) {
			c.SSHKey, c.KnownHosts = vals[SecretGitSSHKey], vals[SecretGitKnownHosts]
		}
		clones[i] = c
	}
	a.Clones = clones
	s.secrets.mask.addRun(a.RunID, used)
	return a
}

func isHTTPGit(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
}

func isSSHGit(u string) bool {
	return strings.HasPrefix(u, "ssh://") || !strings.Contains(u, "://")
}
