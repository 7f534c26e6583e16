package jobssh

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// serve starts an endpoint with the native backend on a socket of the
// test's and returns a client connected to it.
func serve(t *testing.T, o Options) (*ssh.Client, <-chan bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ssh.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	idle := make(chan bool, 1)
	go func() {
		ended, err := Serve(ctx, ln, Native{}, o)
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		idle <- ended
	}()
	t.Cleanup(cancel)
	return dial(t, path), idle
}

func dial(t *testing.T, path string) *ssh.Client {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(c, "job", &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	cl := ssh.NewClient(sc, chans, reqs)
	t.Cleanup(func() { cl.Close() })
	return cl
}

func TestExecStdinEnvAndStatus(t *testing.T) {
	cl, _ := serve(t, Options{})
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Setenv("GREETING", "hi"); err != nil {
		t.Fatal(err)
	}
	s.Stdin = strings.NewReader("typed\n")
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	err = s.Run(`echo $GREETING; cat; echo oops >&2; exit 7`)
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 7 {
		t.Errorf("Run: %v, want exit status 7", err)
	}
	if out.String() != "hi\ntyped\n" || errb.String() != "oops\n" {
		t.Errorf("stdout %q, stderr %q; want hi/typed and oops", out.String(), errb.String())
	}
}

func TestTerminal(t *testing.T) {
	cl, _ := serve(t, Options{})
	s, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 30, 100, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Output(`tty; stty size; echo term=$TERM`)
	if err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	got := strings.ReplaceAll(string(out), "\r", "")
	if !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "30 100\n") || !strings.Contains(got, "term=xterm\n") {
		t.Errorf("on a terminal: %q; want a /dev/pts terminal of 30x100, TERM=xterm", got)
	}
}

func TestDirectTCPIP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // up to the half-close
		_, _ = c.Write(append([]byte("echo:"), b...))
	}()
	cl, _ := serve(t, Options{})
	c, err := cl.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("ping"))
	_ = c.(interface{ CloseWrite() error }).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "echo:ping" {
		t.Errorf("through direct-tcpip: %q, %v; want echo:ping (the half-close passed on)", got, err)
	}
}

func TestInactivity(t *testing.T) {
	cl, idle := serve(t, Options{Inactivity: 300 * time.Millisecond})
	// An open connection keeps it up.
	select {
	case <-idle:
		t.Fatal("ended while a connection was open")
	case <-time.After(time.Second):
	}
	cl.Close()
	select {
	case ended := <-idle:
		if !ended {
			t.Error("Serve ended, but not for inactivity")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still serving long after its last connection closed")
	}
}
