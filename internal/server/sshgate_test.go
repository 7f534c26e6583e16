package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

func newSSHKey(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return signer, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " me@laptop\n"
}

// The keys' API: bad input is 400 and changes nothing, a key is one
// user's, a user lists and removes their own only.
func TestSSHKeysAPI(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	tok, err := h.c.CreateToken(ctx, api.TokenRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	bob := client.New(h.http.URL, tok.Secret)
	signer, pub := newSSHKey(t)
	for name, bad := range map[string]string{
		"garbage":     "not a key",
		"private":     "-----BEGIN OPENSSH PRIVATE KEY-----\nxx\n-----END OPENSSH PRIVATE KEY-----\n",
		"two keys":    pub + pub,
		"empty":       "",
		"broken body": "ssh-ed25519 AAAAnotbase64!! me",
	} {
		if _, err := bob.AddSSHKey(ctx, bad); httpStatus(err) != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", name, err)
		}
	}
	if ks, err := bob.SSHKeys(ctx, ""); err != nil || len(ks) != 0 {
		t.Fatalf("after refusals: %+v, %v; want none", ks, err)
	}
	k, err := bob.AddSSHKey(ctx, pub)
	fp := ssh.FingerprintSHA256(signer.PublicKey())
	if err != nil || k.Fingerprint != fp || k.User != "bob" || k.Type != "ssh-ed25519" || k.Comment != "me@laptop" {
		t.Fatalf("added: %+v, %v", k, err)
	}
	if _, err := h.c.AddSSHKey(ctx, pub); httpStatus(err) != http.StatusConflict {
		t.Errorf("bob's key again, by the admin: %v, want 409", err)
	}
	if err := h.c.RemoveSSHKey(ctx, "SHA256:nope"); httpStatus(err) != http.StatusNotFound {
		t.Errorf("an unknown key removed: %v, want 404", err)
	}
	if ks, err := h.c.SSHKeys(ctx, "bob"); err != nil || len(ks) != 1 || ks[0].Fingerprint != fp {
		t.Errorf("the admin lists bob's keys: %+v, %v", ks, err)
	}
	// Another user neither sees nor removes it.
	if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: "eve"}); err != nil {
		t.Fatal(err)
	}
	etok, err := h.c.CreateToken(ctx, api.TokenRequest{User: "eve"})
	if err != nil {
		t.Fatal(err)
	}
	eve := client.New(h.http.URL, etok.Secret)
	if ks, err := eve.SSHKeys(ctx, ""); err != nil || len(ks) != 0 {
		t.Errorf("eve sees keys: %+v, %v", ks, err)
	}
	if err := eve.RemoveSSHKey(ctx, fp); httpStatus(err) != http.StatusNotFound {
		t.Errorf("eve removes bob's key: %v, want 404", err)
	}

	// The gateway: bob's key is let in, as bob; a jump to a run bob has
	// not is refused; a session channel is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := LoadSSHHostKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = h.srv.ServeSSH(gctx, ln, hostKey) }()
	dial := func(s ssh.Signer) (*ssh.Client, error) {
		return ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: "anyone", Auth: []ssh.AuthMethod{ssh.PublicKeys(s)},
			HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey())})
	}
	stranger, _ := newSSHKey(t)
	if _, err := dial(stranger); err == nil {
		t.Error("an unregistered key was let in")
	}
	cl, err := dial(signer)
	if err != nil {
		t.Fatalf("bob's key: %v", err)
	}
	defer cl.Close()
	if _, err := cl.Dial("tcp", "nosuchrun:22"); err == nil || !strings.Contains(err.Error(), "you have no active run nosuchrun") {
		t.Errorf("a jump to a run bob has not: %v", err)
	}
	if _, err := cl.NewSession(); err == nil || !strings.Contains(err.Error(), "ssh -J") {
		t.Errorf("a session on the gateway: %v, want refused with how to jump", err)
	}
	if err := bob.RemoveSSHKey(ctx, fp); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(signer); err == nil {
		t.Error("a removed key was let in")
	}
}
