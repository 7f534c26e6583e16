//go:build !slim

package cli

import (
	"context"

	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/client"
)

// remoteRun runs command in a session of the run's SSH endpoint and
// returns its output.
func remoteRun(ctx context.Context, c *client.Client, ref, command string) (string, error) {
	tc, err := c.Tunnel(ctx, ref, 0, 0)
	if err != nil {
		return "", err
	}
	defer tc.Close()
	sc, chans, reqs, err := ssh.NewClientConn(tc, ref, &ssh.ClientConfig{User: "berth", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		return "", err
	}
	cl := ssh.NewClient(sc, chans, reqs)
	defer cl.Close()
	s, err := cl.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.Output(command)
	return string(out), err
}
