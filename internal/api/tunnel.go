package api

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Tunnels: the server opens a byte stream to a port inside a job through
// the job's agent, which has no inbound port. The server sends the agent a
// "tunnel" message on its assignment stream; the agent connects to the
// target and dials back (GET /v1/agent/tunnel/{id}, upgraded to
// TunnelProtocol), and the server joins that connection to whoever asked:
// `berth attach`'s forwarded ports and `berth ssh-proxy` (GET
// /v1/runs/{ref}/tunnel, upgraded too). Each stream is a connection of its
// own, so TCP gives it back-pressure and a half-close.

// TunnelProtocol is the Upgrade token of a tunnel's connections.
const TunnelProtocol = "berth-tunnel"

// TunnelOpen asks an agent to connect one tunnel: to Port on the job's
// address (localhost for a job on the host's network, the container's
// address otherwise), or with SSH to the job's SSH endpoint (the socket
// `berth ssh-host` listens on in the job's directory).
type TunnelOpen struct {
	ID    string `json:"id"`
	JobID int64  `json:"job_id"`
	Port  int    `json:"port,omitempty"`
	SSH   bool   `json:"ssh,omitempty"`
}

// SSHSocket is the name of the socket of a job's SSH endpoint in its
// directory (BERTH_JOB_DIR).
const SSHSocket = "ssh.sock"

// Pipe copies both ways between the two ends of a tunnel, a and b (read
// through ar and br, which may hold bytes already buffered). The end of one direction is
// passed on as a half-close, and the other goes on; an error either way
// ends both.
func Pipe(a net.Conn, ar io.Reader, b net.Conn, br io.Reader) {
	var once sync.Once
	abort := func() { once.Do(func() { a.Close(); b.Close() }) }
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst net.Conn, src io.Reader) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil && !errors.Is(err, net.ErrClosed) {
			abort()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			abort()
		}
	}
	go half(b, ar)
	go half(a, br)
	wg.Wait()
	abort()
}
