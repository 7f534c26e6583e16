package api

// Clone is one of a run's `repos` given by a Git URL, which the node
// clones before the commands run (internal/agent/clones.go): Dest as an
// archive's (relative to the job's working directory, "~" the user's
// home, or absolute); Branch and Hash as the configuration says (none:
// the remote's default branch). The credentials are the run's project's
// secrets GIT_TOKEN (with GIT_USERNAME) for HTTP(S) and GIT_SSH_KEY for
// SSH URLs, put in by the server as it hands the job over and never
// stored (server/clones.go).
type Clone struct {
	URL      string `json:"url"`
	Branch   string `json:"branch,omitempty"`
	Hash     string `json:"hash,omitempty"`
	Dest     string `json:"dest"`
	IfExists string `json:"if_exists,omitempty"` // error (default) | skip
	Username string `json:"username,omitempty"`
	Token    string `json:"token,omitempty"`
	SSHKey   string `json:"ssh_key,omitempty"`
	// KnownHosts (the secret GIT_KNOWN_HOSTS) are the only host keys an
	// SSH clone trusts; empty: the first one seen, for this clone only.
	KnownHosts string `json:"known_hosts,omitempty"`
}
