package jobssh

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// Serve closes the connections still open when it returns: a client
// connected to an endpoint whose job ended is not left hanging.
func TestServeClosesConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ssh.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = Serve(ctx, ln, Native{}, Options{})
	}()
	cl := dial(t, path)
	// The connection works, then its endpoint stops.
	if _, _, err := cl.SendRequest("keepalive@openssh.com", true, nil); err != nil {
		t.Fatalf("a request before the end: %v", err)
	}
	cancel()
	<-done
	waited := make(chan error, 1)
	go func() { waited <- cl.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("the client's connection is still open after Serve returned")
	}
}
