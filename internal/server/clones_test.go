package server

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
)

// A job's clones get their project's Git secrets as it leaves for its
// agent: the token for HTTP(S), the key and the trusted host keys for SSH,
// nothing for a URL of another kind, and the cluster's copy keeps none.
func TestGitCredentialsForClones(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.SecretsKey = testKey(t) })
	ctx := context.Background()
	for name, v := range map[string]string{SecretGitToken: "tok", SecretGitSSHKey: "KEY", SecretGitKnownHosts: "host ssh-ed25519 AAAA"} {
		if err := h.c.SetSecret(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}
	in := []api.Clone{{URL: "https://git.example.com/r.git"}, {URL: "git@git.example.com:r.git"}, {URL: "git://git.example.com/r.git"}}
	a := h.srv.putGitCredentials(api.Assignment{RunID: 1, ProjectID: h.srv.projectID, Clones: in})
	want := []api.Clone{
		{URL: "https://git.example.com/r.git", Username: "oauth2", Token: "tok"},
		{URL: "git@git.example.com:r.git", SSHKey: "KEY", KnownHosts: "host ssh-ed25519 AAAA"},
		{URL: "git://git.example.com/r.git"},
	}
	if d := cmp.Diff(want, a.Clones); d != "" {
		t.Errorf("clones (-want +got):\n%s", d)
	}
	if in[0].Token != "" || in[1].SSHKey != "" {
		t.Errorf("the cluster's clones got credentials: %+v", in)
	}
}
