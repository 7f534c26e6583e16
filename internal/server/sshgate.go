package server

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// Users' SSH keys and the server's SSH gateway (issue 16).
//
// `ssh RUN` through `berth ssh-proxy` authenticates with the user's token
// at the API. The gateway is the way in for an SSH client that has a
// registered key and no token (nor berth): `berth server --ssh-listen
// ADDR` serves SSH, takes public-key authentication against the keys
// users registered (`berth ssh-key add`), and serves only direct-tcpip
// channels — the jump of `ssh -J GATEWAY RUN` (ProxyJump) — whose host is
// a run the key's user may enter: port 22 is the run's SSH endpoint
// (master job), any other port that port of the job (`ssh -L
// 8000:RUN:8000 GATEWAY`). Both go through openTunnel, as `berth
// ssh-proxy` and `berth attach` do. The session itself is end to end
// between the client and the job's endpoint; the gateway sees only
// ciphertext. Its host key is kept beside the secrets key
// (ssh_host_ed25519_key), made on first start.

// sshKeys is the store's part the keys need (store/sshkeys.go).
type sshKeys interface {
	AddSSHKey(ctx context.Context, k *store.SSHKey) error
	ListSSHKeys(ctx context.Context, userID int64) ([]*store.SSHKey, error)
	SSHKeyByFingerprint(ctx context.Context, fingerprint string) (*store.SSHKey, error)
	RemoveSSHKey(ctx context.Context, userID int64, fingerprint string) error
}

func (s *Server) sshKeyStore() (sshKeys, error) {
	ks, ok := s.store.(sshKeys)
	if !ok {
		return nil, fmt.Errorf("%w: this store keeps no SSH keys", ErrUnavailable)
	}
	return ks, nil
}

// sshKeyRoutes registers the keys' endpoints.
func (s *Server) sshKeyRoutes(mux *http.ServeMux, v string) {
	mux.HandleFunc("GET "+v+"/ssh-keys", s.auth(s.handleSSHKeyList))
	mux.HandleFunc("POST "+v+"/ssh-keys", s.auth(s.handleSSHKeyAdd))
	mux.HandleFunc("DELETE "+v+"/ssh-keys/{fingerprint}", s.auth(s.handleSSHKeyRemove))
}

func apiSSHKey(k *store.SSHKey) api.SSHKey {
	typ, _, _ := strings.Cut(k.PublicKey, " ")
	return api.SSHKey{Fingerprint: k.Fingerprint, User: k.User, Type: typ, Comment: k.Comment, CreatedAt: k.CreatedAt}
}

func (s *Server) handleSSHKeyAdd(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.SSHKeyAdd
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	ks, err := s.sshKeyStore()
	if err != nil {
		writeError(w, err)
		return
	}
	text := strings.TrimSpace(req.PublicKey)
	if strings.Contains(text, "PRIVATE KEY") {
		writeError(w, fmt.Errorf("%w: public_key: this is a private key: give the .pub file", ErrInvalid))
		return
	}
	pub, comment, _, rest, err := ssh.ParseAuthorizedKey([]byte(text))
	if err != nil {
		writeError(w, fmt.Errorf("%w: public_key: not an SSH public key (%v): give one line of a .pub file, as ssh-keygen writes it", ErrInvalid, err))
		return
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		writeError(w, fmt.Errorf("%w: public_key: one key at a time", ErrInvalid))
		return
	}
	k := &store.SSHKey{Fingerprint: ssh.FingerprintSHA256(pub), UserID: u.ID, User: u.Name,
		PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), Comment: comment, CreatedAt: s.clock.Now()}
	if err := ks.AddSSHKey(r.Context(), k); err != nil {
		if errors.Is(err, store.ErrExists) {
			err = fmt.Errorf("%w: the key %s is registered already", ErrConflict, k.Fingerprint)
		}
		writeError(w, err)
		return
	}
	s.log.Info("ssh key added", "user", u.Name, "fingerprint", k.Fingerprint)
	writeJSON(w, http.StatusCreated, apiSSHKey(k))
}

// handleSSHKeyList lists the caller's keys (an admin's: everyone's, or
// ?user=NAME's).
func (s *Server) handleSSHKeyList(w http.ResponseWriter, r *http.Request, u *store.User) {
	ks, err := s.sshKeyStore()
	if err != nil {
		writeError(w, err)
		return
	}
	id := u.ID
	if u.Admin {
		id = 0
	}
	keys, err := ks.ListSSHKeys(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	want := r.URL.Query().Get("user")
	out := make([]api.SSHKey, 0, len(keys))
	for _, k := range keys {
		if want == "" || k.User == want {
			out = append(out, apiSSHKey(k))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSSHKeyRemove removes one of the caller's keys (an admin: anyone's).
func (s *Server) handleSSHKeyRemove(w http.ResponseWriter, r *http.Request, u *store.User) {
	ks, err := s.sshKeyStore()
	if err != nil {
		writeError(w, err)
		return
	}
	id := u.ID
	if u.Admin {
		id = 0
	}
	fp := r.PathValue("fingerprint")
	if err := ks.RemoveSSHKey(r.Context(), id, fp); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("%w: you have no SSH key %s (berth ssh-key list shows yours)", ErrNotFound, fp)
		}
		writeError(w, err)
		return
	}
	s.log.Info("ssh key removed", "user", u.Name, "fingerprint", fp)
	w.WriteHeader(http.StatusNoContent)
}

// LoadSSHHostKey is the gateway's host key: the one in
// dir/ssh_host_ed25519_key where a server made one (before host keys were
// derived; an administrator may also put one there), else the ed25519 key
// derived from the secrets key. Every replica shares the secrets key, so
// every replica shows the same host key and a client that fails over to
// another replica is not warned of a changed host.
func LoadSSHHostKey(dir string, secretsKey []byte) (ssh.Signer, error) {
	path := filepath.Join(dir, "ssh_host_ed25519_key")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if len(secretsKey) == 0 {
			return nil, errors.New("ssh host key: no secrets key to derive it from")
		}
		seed, err := hkdf.Key(sha256.New, secretsKey, nil, "berth ssh gateway host key", ed25519.SeedSize)
		if err != nil {
			return nil, fmt.Errorf("ssh host key: %w", err)
		}
		return ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(seed))
	} else if err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("ssh host key %s: %w", path, err)
	}
	return signer, nil
}

// ServeSSH serves the SSH gateway on ln until ctx is done.
func (s *Server) ServeSSH(ctx context.Context, ln net.Listener, hostKey ssh.Signer) error {
	cfg := &ssh.ServerConfig{ServerVersion: "SSH-2.0-berth-gateway", PublicKeyCallback: s.sshAuthorize}
	cfg.AddHostKey(hostKey)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("ssh gateway: %w", err)
		}
		go s.serveSSHGateway(ctx, c, cfg)
	}
}

// sshAuthorize lets in the registered key of a live user; the SSH user
// name is not looked at (the key says who).
func (s *Server) sshAuthorize(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	ks, err := s.sshKeyStore()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := ks.SSHKeyByFingerprint(ctx, ssh.FingerprintSHA256(key))
	if err != nil || k.PublicKey != strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) {
		return nil, errors.New("unknown key")
	}
	return &ssh.Permissions{Extensions: map[string]string{"berth-user": k.User}}, nil
}

func (s *Server) serveSSHGateway(ctx context.Context, c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // for the handshake
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	_ = c.SetDeadline(time.Time{})
	go ssh.DiscardRequests(reqs)
	name := sc.Permissions.Extensions["berth-user"]
	u, err := s.store.UserByName(ctx, name)
	if err != nil || u.Deleted {
		return
	}
	s.log.Debug("ssh gateway: connected", "user", name, "remote", c.RemoteAddr().String())
	for nc := range chans {
		if nc.ChannelType() != "direct-tcpip" {
			_ = nc.Reject(ssh.Prohibited, "this is Berth's SSH gateway: reach a run with ssh -J "+sc.User()+"@THIS-HOST:PORT RUN (ProxyJump); it opens no shell of its own")
			continue
		}
		go s.gatewayChannel(ctx, u, nc)
	}
}

// gatewayChannel joins a direct-tcpip channel to RUN:22 (the run's SSH
// endpoint) or RUN:PORT (a port of its master job).
func (s *Server) gatewayChannel(ctx context.Context, u *store.User, nc ssh.NewChannel) {
	var to struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &to); err != nil || to.Port == 0 || to.Port > 65535 {
		_ = nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	run, _, err := s.activeRun(ctx, to.Host, u)
	if errors.Is(err, ErrForbidden) || errors.Is(err, ErrNotFound) || errors.Is(err, store.ErrNotFound) {
		// Another's run is not found, as everywhere.
		err = fmt.Errorf("you have no active run %s", to.Host)
	}
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, publicMessage(err.Error()))
		return
	}
	port := int(to.Port)
	if port == 22 {
		port = 0 // the SSH endpoint
	}
	tctx, cancel := context.WithTimeout(ctx, tunnelWait+5*time.Second)
	t, err := s.openTunnel(tctx, run, 0, port)
	cancel()
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, publicMessage(err.Error()))
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		t.conn.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	s.log.Debug("ssh gateway: tunnel open", "user", u.Name, "run_id", run, "port", port)
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(ch, t.rd)
		_ = ch.CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(t.conn, ch)
		if cw, ok := t.conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
	t.conn.Close()
	ch.Close()
}
