package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive lock on dir for this process (the kernel drops
// it when the process dies, however it dies), so that two servers never
// share a database and two agents never share a data directory.
func lockDir(dir, role string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, role+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	// A process that was forking a child when it died leaves the lock to
	// that child until it execs (milliseconds): try for a few seconds.
	for deadline := time.Now().Add(5 * time.Second); ; {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.Close()
			b, _ := os.ReadFile(path)
			return nil, fmt.Errorf("another berth %s uses %s (its lock %s was taken by pid %s)", role, dir, path, strings.TrimSpace(string(b)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

// What the roles' wiring (internal/roles) shares with the client commands:
// where Berth keeps its files and how the client finds the server.

// LockDir is lockDir for the roles: a server or agent holds its data
// directory's lock while it runs.
func LockDir(dir, role string) (unlock func(), err error) { return lockDir(dir, role) }

// ConfigPath is $BERTH_HOME/config.yml.
func ConfigPath() string { return configPath() }

// ReadClientConfig reads a client configuration file.
func ReadClientConfig(path string) (ClientConfig, error) { return readClientConfig(path) }

// WriteClientConfig writes a client configuration file (0600).
func WriteClientConfig(path string, c ClientConfig) error { return writeClientConfig(path, c) }

// SocketPath is where the local agent listens.
func SocketPath() string { return socketPath() }

// SizeFlag is a size flag ("64MB") setting *p.
func SizeFlag(p *int64) pflag.Value { return sizeValue{p} }
