package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// TunnelConn is an upgraded connection to the server: a byte stream that
// can be half-closed (CloseWrite), so that the end of one direction
// travels through a tunnel while the other goes on.
type TunnelConn struct {
	net.Conn
	rd *bufio.Reader
}

func (t *TunnelConn) Read(p []byte) (int, error) { return t.rd.Read(p) }

// CloseWrite ends the stream's sending direction.
func (t *TunnelConn) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return t.Conn.Close()
}

// Tunnel opens a byte stream to port inside node rank job of the run
// ref (port 0: the job's SSH endpoint, `berth ssh-host`).
func (c *Client) Tunnel(ctx context.Context, ref string, job, port int) (*TunnelConn, error) {
	q := url.Values{"job": {strconv.Itoa(job)}}
	if port > 0 {
		q.Set("port", strconv.Itoa(port))
	} else {
		q.Set("ssh", "1")
	}
	return c.upgrade(ctx, fmt.Sprintf("/runs/%s/tunnel?%s", url.PathEscape(ref), q.Encode()))
}

// AgentTunnel is an agent's end of tunnel id, dialed back once the agent
// has connected to the target; a failure (failed non-empty) is sent
// instead, and answered with an error.
func (c *Client) AgentTunnel(ctx context.Context, id, failed string) (*TunnelConn, error) {
	q := url.Values{}
	if failed != "" {
		q.Set("error", failed)
	}
	return c.upgrade(ctx, fmt.Sprintf("/agent/tunnel/%s?%s", url.PathEscape(id), q.Encode()))
}

// upgrade sends GET path upgraded to api.TunnelProtocol on a connection
// of its own, and returns that connection once the server switches.
func (c *Client) upgrade(ctx context.Context, path string) (*TunnelConn, error) {
	u, err := url.Parse(c.base + api.Version + path)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := c.dial(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("client: tunnel: %w", err)
	}
	if u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname()})
		if err := tc.HandshakeContext(dctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("client: tunnel: %w", err)
		}
		conn = tc
	}
	req, err := http.NewRequestWithContext(dctx, http.MethodGet, u.String(), nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client: %w", err)
	}
	c.authorize(req)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", api.TunnelProtocol)
	// The answer may take a while (the agent connects first); a cancelled
	// ctx ends the wait.
	stop := context.AfterFunc(dctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	rd := bufio.NewReader(conn)
	err = req.Write(conn)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(rd, req)
	}
	if !stop() {
		err = errors.Join(err, dctx.Err())
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client: tunnel: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		return nil, readError(resp)
	}
	_ = conn.SetDeadline(time.Time{})
	return &TunnelConn{Conn: conn, rd: rd}, nil
}
