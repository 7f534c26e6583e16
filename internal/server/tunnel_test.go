package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/client"
)

// echoJob is a job serving a TCP echo on port (python3, threaded: many
// connections at once); it half-closes after its peer does.
func echoJob(name string, port int) string {
	return fmt.Sprintf(`
type: task
name: %s
commands:
  - |
    python3 - <<'EOF'
    import socket, threading
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", %d))
    s.listen(64)
    def echo(c):
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(d)
        c.shutdown(socket.SHUT_WR)
        c.close()
    while True:
        c, _ = s.accept()
        threading.Thread(target=echo, args=(c,), daemon=True).start()
    EOF
`, name, port)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// stopAtEnd stops run id (whose job would outlive the agent) before the
// test's harness goes, and waits for its end.
func stopAtEnd(t *testing.T, h *harness, id int64) {
	t.Cleanup(func() {
		ref := strconv.FormatInt(id, 10)
		if _, err := h.c.Stop(context.Background(), ref, true); err != nil {
			t.Logf("stop run %s: %v", ref, err)
		}
		waitFor(t, "run "+ref+" to end", func() bool {
			r, err := h.c.Run(context.Background(), ref)
			return err == nil && r.Status.Finished()
		})
	})
}

// openTunnelWhenUp retries a tunnel until the job's port answers.
func openTunnelWhenUp(t *testing.T, c *client.Client, ref string, port int) *client.TunnelConn {
	t.Helper()
	var last error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		tc, err := c.Tunnel(context.Background(), ref, 0, port)
		if err == nil {
			return tc
		}
		last = err
	}
	t.Fatalf("no tunnel to port %d of run %s: %v", port, ref, last)
	return nil
}

// TestTunnelEcho: many tunnels at once to a job's port each carry a
// megabyte both ways intact, and a half-close travels: the job's echo
// sees the end of input, answers the rest and ends its side.
func TestTunnelEcho(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	port := freePort(t)
	r := submit(t, h, echoJob("echo", port))
	stopAtEnd(t, h, r.ID)
	ref := strconv.FormatInt(r.ID, 10)
	openTunnelWhenUp(t, h.c, ref, port).Close()

	const conns, size = 8, 1 << 20
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc, err := h.c.Tunnel(context.Background(), ref, 0, port)
			if err != nil {
				errs <- err
				return
			}
			defer tc.Close()
			data := make([]byte, size)
			_, _ = rand.Read(data)
			got := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(tc); got <- b }()
			if _, err := tc.Write(data); err != nil {
				errs <- err
				return
			}
			if err := tc.CloseWrite(); err != nil {
				errs <- err
				return
			}
			select {
			case b := <-got:
				if !bytes.Equal(b, data) {
					errs <- fmt.Errorf("echo of %d bytes came back as %d bytes, different", len(data), len(b))
				}
			case <-time.After(60 * time.Second):
				errs <- errors.New("the echo did not end after the half-close")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestTunnelRefused: a port nothing listens on is an error from the
// agent, not a wait; a port out of range and another user's run are
// refused by the server.
func TestTunnelRefused(t *testing.T) {
	h := newHarness(t, t.TempDir())
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	port := freePort(t)
	r := submit(t, h, echoJob("echo", port))
	stopAtEnd(t, h, r.ID)
	ref := strconv.FormatInt(r.ID, 10)
	openTunnelWhenUp(t, h.c, ref, port).Close()

	closed := freePort(t)
	if _, err := h.c.Tunnel(context.Background(), ref, 0, closed); err == nil || !contains(err.Error(), "refused") {
		t.Errorf("tunnel to a closed port: got %v, want connection refused", err)
	}
	if _, err := h.c.Tunnel(context.Background(), ref, 0, 70000); err == nil || !contains(err.Error(), "port=70000") {
		t.Errorf("tunnel to port 70000: got %v, want refused", err)
	}
	if _, err := h.c.Tunnel(context.Background(), ref, 3, port); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tunnel to job 3 of a one-job run: got %v, want not found", err)
	}
	bob := h.userClient(t, "bob")
	if _, err := bob.Tunnel(context.Background(), ref, 0, port); err == nil {
		t.Errorf("bob opened a tunnel into the admin's run")
	}
}
