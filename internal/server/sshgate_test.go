package server

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	hostKey, err := LoadSSHHostKey(t.TempDir(), bytes.Repeat([]byte{7}, 32))
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

// The gateway's host key is derived from the secrets key, so replicas that
// share it (as they must) show one host key; a key file a server made
// before keys were derived goes on being used.
func TestSSHHostKeyIsSharedByReplicas(t *testing.T) {
	secrets := bytes.Repeat([]byte{1}, 32)
	fp := func(dir string, key []byte) string {
		t.Helper()
		s, err := LoadSSHHostKey(dir, key)
		if err != nil {
			t.Fatal(err)
		}
		return ssh.FingerprintSHA256(s.PublicKey())
	}
	a, b := fp(t.TempDir(), secrets), fp(t.TempDir(), secrets)
	if a != b {
		t.Errorf("two replicas with one secrets key: host keys %s and %s", a, b)
	}
	if c := fp(t.TempDir(), bytes.Repeat([]byte{2}, 32)); c == a {
		t.Errorf("another secrets key gives the same host key %s", c)
	}
	// A key file in the directory wins.
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ssh_host_ed25519_key"), pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, _ := ssh.NewSignerFromKey(priv)
	if got, want := fp(dir, secrets), ssh.FingerprintSHA256(signer.PublicKey()); got != want {
		t.Errorf("with a key file: host key %s, want the file's %s", got, want)
	}
	if _, err := LoadSSHHostKey(t.TempDir(), nil); err == nil {
		t.Error("no key file and no secrets key: no error")
	}
}
