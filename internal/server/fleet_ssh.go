package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/spec"
)

// The SSH side of SSH fleets (issue 17): connecting to a host, through its
// proxy_jump when it has one, and running shell scripts there. Host keys
// are trusted on first use: the fingerprint seen at a host's first
// connection is recorded with the host, and a later connection that sees
// another one is refused.

// sshDialTimeout bounds the TCP connect and SSH handshake to each hop.
const sshDialTimeout = 20 * time.Second

// sshConn is a connection to a host, and to its bastion when it has one.
type sshConn struct {
	*ssh.Client
	jump *ssh.Client
}

func (c *sshConn) Close() error {
	err := c.Client.Close()
	if c.jump != nil {
		_ = c.jump.Close()
	}
	return err
}

// hostKeys are the fingerprints trusted for a host and its bastion; empty
// ones are filled on first use.
type hostKeys struct {
	Host string `json:"host_key,omitempty"`
	Jump string `json:"jump_key,omitempty"`
}

func tofu(known *string, what string) ssh.HostKeyCallback {
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		fp := ssh.FingerprintSHA256(key)
		if *known == "" {
			*known = fp
			return nil
		}
		if *known != fp {
			return fmt.Errorf("%s's host key is %s, not %s as when the fleet first reached it: if the host was reinstalled, delete the host from the fleet and add it again", what, fp, *known)
		}
		return nil
	}
}

func clientConfig(user, identity string, keys map[string]string, cb ssh.HostKeyCallback) (*ssh.ClientConfig, error) {
	pem, ok := keys[identity]
	if !ok {
		return nil, fmt.Errorf("no private key for identity_file %s (the client sends the files the configuration names)", identity)
	}
	signer, err := ssh.ParsePrivateKey([]byte(pem))
	if err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("identity_file %s is protected by a passphrase; give the fleet a key without one", identity)
		}
		return nil, fmt.Errorf("identity_file %s: %w", identity, err)
	}
	return &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: cb, Timeout: sshDialTimeout}, nil
}

// dialHost connects to h (filled in by spec.Fleet.Host).
func dialHost(ctx context.Context, h spec.SSHHost, keys map[string]string, known *hostKeys) (*sshConn, error) {
	addr := net.JoinHostPort(h.Hostname, strconv.Itoa(h.Port))
	cfg, err := clientConfig(h.User, h.IdentityFile, keys, tofu(&known.Host, h.Hostname))
	if err != nil {
		return nil, err
	}
	if h.ProxyJump == nil {
		d := net.Dialer{Timeout: sshDialTimeout}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		return handshake(conn, addr, cfg, nil)
	}
	pj := h.ProxyJump
	jaddr := net.JoinHostPort(pj.Hostname, strconv.Itoa(pj.Port))
	jcfg, err := clientConfig(pj.User, pj.IdentityFile, keys, tofu(&known.Jump, "bastion "+pj.Hostname))
	if err != nil {
		return nil, fmt.Errorf("proxy_jump: %w", err)
	}
	d := net.Dialer{Timeout: sshDialTimeout}
	jconn, err := d.DialContext(ctx, "tcp", jaddr)
	if err != nil {
		return nil, fmt.Errorf("connect to bastion %s: %w", jaddr, err)
	}
	jump, err := handshake(jconn, jaddr, jcfg, nil)
	if err != nil {
		return nil, fmt.Errorf("bastion: %w", err)
	}
	conn, err := jump.Dial("tcp", addr)
	if err != nil {
		_ = jump.Close()
		return nil, fmt.Errorf("connect to %s through bastion %s: %w", addr, jaddr, err)
	}
	return handshake(conn, addr, cfg, jump.Client)
}

func handshake(conn net.Conn, addr string, cfg *ssh.ClientConfig, jump *ssh.Client) (*sshConn, error) {
	_ = conn.SetDeadline(time.Now().Add(sshDialTimeout))
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		_ = conn.Close()
		if jump != nil {
			_ = jump.Close()
		}
		return nil, fmt.Errorf("ssh %s@%s: %w", cfg.User, addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return &sshConn{Client: ssh.NewClient(c, chans, reqs), jump: jump}, nil
}

// run runs script with sh on the host (through sudo -n when sudo is set),
// stdin as its input, and returns its standard output; a failure carries
// the last lines of its standard error.
func (c *sshConn) run(ctx context.Context, script string, stdin io.Reader, sudo bool) (string, error) {
	sess, err := c.NewSession()
	if err != nil {
		return "", fmt.Errorf("ssh session: %w", err)
	}
	defer sess.Close()
	var out, errb bytes.Buffer
	sess.Stdout, sess.Stderr = &out, &errb
	if stdin != nil {
		sess.Stdin = stdin
	}
	cmd := "sh -c " + shellQuote(script)
	if sudo {
		cmd = "sudo -n " + cmd
	}
	done := make(chan error, 1)
	go func() { done <- sess.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.Close()
		return "", ctx.Err()
	}
	if err != nil {
		msg := bytes.TrimSpace(errb.Bytes())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return out.String(), fmt.Errorf("%w: %s", err, msg)
	}
	return out.String(), nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte(`'\''`))) + "'"
}
