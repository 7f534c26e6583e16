//go:build linux

package main_test

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPsWatch: `berth ps -w` redraws as runs come (off a terminal, each
// changed render after a blank line), newest first as dstack orders them,
// and Ctrl-C ends it with status 0.
func TestPsWatch(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("--agent-name", "watch-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "watch-node")
	ps := exec.Command(berthBin, "ps", "-w")
	ps.Env = c.env()
	ps.Dir = c.home
	var mu sync.Mutex
	var out bytes.Buffer
	ps.Stdout = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	if err := ps.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- ps.Wait() }()
	t.Cleanup(func() { _ = ps.Process.Kill() })

	for _, name := range []string{"older", "newer"} {
		cfg := c.writeConfig(name+".yml", "type: task\nname: "+name+"\ncommands: [sleep 300]\n")
		if r := c.berth("", "apply", "-y", "--detach", "-f", cfg); r.code != 0 {
			t.Fatalf("apply: %s", r)
		}
	}
	var last string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		mu.Lock()
		renders := strings.Split(out.String(), "\n\n")
		mu.Unlock()
		last = renders[len(renders)-1]
		if strings.Contains(last, "older") && strings.Contains(last, "newer") {
			break
		}
	}
	i, j := strings.Index(last, "newer"), strings.Index(last, "older")
	if i < 0 || j < 0 || i > j {
		t.Fatalf("berth ps -w did not redraw with both runs, newest first; last render:\n%s", last)
	}
	if err := ps.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("berth ps -w after Ctrl-C: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("berth ps -w still runs 30 s after Ctrl-C")
	}
	c.mustBerth("stop", "--abort", "older")
	c.mustBerth("stop", "--abort", "newer")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
