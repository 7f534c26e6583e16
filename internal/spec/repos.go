package spec

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Repos by URL (issue 16): a repo given by `url` (or the shorthand
// `https://…`, `git@host:path`, optionally followed by `:dir`) is cloned
// by each node before the commands run, shallow where it can be; the
// credentials come from the project's secrets GIT_TOKEN (GIT_USERNAME)
// and GIT_SSH_KEY, never from the configuration.

// URLRepo is a repo given by URL, as a node clones it: the URL, the
// branch and hash (none: the remote's default branch), where it goes
// (Path; "." by default) and what to do when that is not empty.
type URLRepo struct {
	URL, Branch, Hash, Dest, IfExists string
}

// URLRepos lists the repos t gives by URL, in order.
func (t *Task) URLRepos() []URLRepo {
	var out []URLRepo
	for _, r := range t.Repos {
		if r.URL == "" {
			continue
		}
		dest := r.Path
		if dest == "" {
			dest = "."
		}
		out = append(out, URLRepo{URL: r.URL, Branch: r.Branch, Hash: r.Hash, Dest: dest, IfExists: r.IfExists})
	}
	return out
}

var (
	scpURL  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/]?`) })
	gitHash = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{4,64}$`) })
)

// checkRepoURL reports what is wrong with a repo's url, branch and hash.
func (r *Repo) checkURL(p string, add func(path, format string, args ...any)) {
	if r.URL == "" {
		return // a local repo's branch and hash: berth apply checks them against the work tree
	}
	switch u, err := url.Parse(r.URL); {
	case scpURL().MatchString(r.URL) && !strings.Contains(r.URL, "://"):
		// git@github.com:org/repo.git: SSH, with GIT_SSH_KEY
	case err != nil:
		add(p+".url", "not a URL: %v", err)
	case u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git" && u.Scheme != "file":
		add(p+".url", "must be https://, http://, ssh://, git://, file:// or user@host:path, got %q", r.URL)
	case u.User != nil && func() bool { _, has := u.User.Password(); return has }():
		add(p+".url", "must not hold a password or token: set the project's secret GIT_TOKEN (berth secret set GIT_TOKEN) and it is used for the clone")
	case u.Scheme != "file" && u.Host == "":
		add(p+".url", "names no host: %q", r.URL)
	}
	if r.Branch != "" && (strings.HasPrefix(r.Branch, "-") || strings.ContainsAny(r.Branch, " \t\n~^:?*[\\") || strings.Contains(r.Branch, "..")) {
		add(p+".branch", "not a valid branch name: %q", r.Branch)
	}
	if r.Hash != "" && !gitHash().MatchString(r.Hash) {
		add(p+".hash", "must be a commit hash (4 to 64 lowercase hex digits), got %q", r.Hash)
	}
}

// cutURLRepo splits the shorthand of a repo given by a URL with a scheme
// (https://host:8443/org/repo.git:dir) into the URL and the directory:
// a colon splits them only past the URL's host (and port). ok is false
// for anything else (a path, user@host:path).
func cutURLRepo(s string) (u, dir string, ok bool) {
	i := strings.Index(s, "://")
	if i <= 0 || strings.ContainsAny(s[:i], "/:@") {
		return "", "", false
	}
	rest := s[i+3:]
	slash := strings.Index(rest, "/")
	if slash < 0 {
		return s, "", true
	}
	u = s
	if j := strings.Index(rest[slash:], ":"); j >= 0 {
		u, dir = s[:i+3+slash+j], rest[slash+j+1:]
	}
	return u, dir, true
}
