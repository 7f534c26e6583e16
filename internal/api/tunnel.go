package api

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
