package roles

import (
	"context"
	"fmt"
	"io"
	"net"

	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/server"
)

// startSSHGateway serves the server's SSH gateway on addr (berth server
// --ssh-listen), with the host key in dir or derived from secretsKey
// (server.LoadSSHHostKey).
func startSSHGateway(ctx context.Context, srv *server.Server, addr, dir string, secretsKey []byte, errc chan<- error, logw io.Writer) error {
	key, err := server.LoadSSHHostKey(dir, secretsKey)
	if err != nil {
		return fmt.Errorf("--ssh-listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--ssh-listen %s: %w", addr, err)
	}
	fmt.Fprintf(logw, "SSH gateway on %s (host key %s)\n", ln.Addr(), ssh.FingerprintSHA256(key.PublicKey()))
	go func() { errc <- srv.ServeSSH(ctx, ln, key) }()
	return nil
}
