//go:build linux

package main_test

// Two hosts on one machine: network namespaces joined by a veth pair with
// loopback-range addresses (see the recipe in the shared notes: such
// addresses need route_localnet and a prefix more specific than lo's /8).
// The server and one agent live in namespace A, the other agent in B; a
// two-node run's jobs see each other only through the veth.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/berth-hq/berth/internal/api"
)

// listenArg makes the test binary a one-connection TCP listener (see
// init): a job runs it to prove that the other job reaches MASTER_ADDR.
const listenArg = "berth-test-listen"

func init() {
	if len(os.Args) == 3 && os.Args[1] == listenArg {
		os.Exit(listenOnce(os.Args[2]))
	}
}

// listenOnce accepts one connection on addr within 60 s and prints its
// first line and the peer's address.
func listenOnce(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	defer ln.Close()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		fmt.Println("accept:", err)
		return 1
	}
	defer conn.Close()
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && err != io.EOF {
		fmt.Println("read:", err)
		return 1
	}
	host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
	fmt.Printf("got %q from %s\n", strings.TrimSpace(line), host)
	return 0
}

// netns is two network namespaces joined by a veth pair.
type netns struct {
	a, b         string // namespace names
	addrA, addrB string // the veth ends' addresses, without prefix
}

// newNetns makes the namespaces, with names and addresses unique to this
// test, and removes them when the test ends (after the processes started
// later were killed: cleanups run last-registered first). It skips the test
// where namespaces cannot be made.
func newNetns(t *testing.T) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root (run the tests as root to test two hosts)")
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (iproute2, util-linux): cannot make network namespaces", tool)
		}
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	sfx := hex.EncodeToString(b)
	x, _ := rand.Int(rand.Reader, big.NewInt(200))
	net16 := fmt.Sprintf("127.%d", 30+x.Int64())
	n := &netns{a: "berth-" + sfx + "-a", b: "berth-" + sfx + "-b", addrA: net16 + ".1.1", addrB: net16 + ".2.1"}
	va, vb := "bv"+sfx+"a", "bv"+sfx+"b"
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := run("netns", "add", n.a); err != nil {
		t.Skipf("cannot make a network namespace here: %v", err)
	}
	t.Cleanup(func() {
		for _, ns := range []string{n.a, n.b} {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	for _, args := range [][]string{
		{"netns", "add", n.b},
		{"link", "add", va, "type", "veth", "peer", "name", vb},
		{"link", "set", va, "netns", n.a}, {"link", "set", vb, "netns", n.b},
		{"-n", n.a, "addr", "add", n.addrA + "/16", "dev", va}, {"-n", n.b, "addr", "add", n.addrB + "/16", "dev", vb},
		{"-n", n.a, "link", "set", va, "up"}, {"-n", n.b, "link", "set", vb, "up"},
		{"-n", n.a, "link", "set", "lo", "up"}, {"-n", n.b, "link", "set", "lo", "up"},
		{"netns", "exec", n.a, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1", "net.ipv4.conf." + va + ".route_localnet=1"},
		{"netns", "exec", n.b, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1", "net.ipv4.conf." + vb + ".route_localnet=1"},
	} {
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// in is the command line that runs berth args in namespace ns: nsenter
// changes only the network namespace (`ip netns exec` would also remount
// /sys, hiding the cgroup hierarchies from the agent).
func in(ns string, args ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + ns, "--", berthBin}, args...)
}

// startIn starts a long-lived berth process in ns, registered with the
// cluster (killed at the end), and waits until ready sees its log say so.
func (c *cluster) startIn(ns, name, logPath string, env []string, ready *regexp.Regexp, args ...string) (*proc, []string) {
	c.t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	argv := in(ns, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, c.home
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if m := ready.FindSubmatch(b); m != nil {
			var groups []string
			for _, g := range m {
				groups = append(groups, string(g))
			}
			return p, groups
		}
		if p.exited() || time.Now().After(deadline) {
			c.t.Fatalf("%s not ready (exited: %v, %v):\n%s", name, p.exited(), p.err, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// berthIn runs a client command in ns to its end.
func (c *cluster) berthIn(ns string, args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	argv := in(ns, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = c.env(), c.home
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		c.t.Fatalf("berth %s in %s: timed out after 90s", strings.Join(args, " "), ns)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
}

// logLine is one line of `berth logs` / `berth apply` for a run of several
// jobs: "node-R | text".
var logLine = regexp.MustCompile(`^node-(\d+) +\| (.*)$`)

func TestTwoHostsInNetworkNamespaces(t *testing.T) {
	t.Parallel()
	nn := newNetns(t)
	c := newCluster(t)
	_, m := c.startIn(nn.a, "server", filepath.Join(c.home, "server.log"), c.env(), regexp.MustCompile(`Berth server on (http://\S+) `),
		"server", "--listen", nn.addrA+":0", "--no-local-agent", "--stop-grace", "1s")
	url, token := m[1], readToken(t, c) // the server wrote config.yml before it said where it listens
	agentReady := regexp.MustCompile(`msg="agent starting"`)
	for _, h := range []struct{ ns, name string }{{nn.a, "host-a"}, {nn.b, "host-b"}} {
		c.startIn(h.ns, "agent "+h.name, filepath.Join(c.home, "agent-"+h.name+".log"), c.env("BERTH_TOKEN="+token), agentReady,
			"agent", "--server", url, "--name", h.name, "--data-dir", filepath.Join(c.home, "data-"+h.name), "--cpus", "1", "--socket", c.socket(h.name))
	}
	// Each agent advertises the address of its route to the server.
	var nodes []api.Node
	deadline := time.Now().Add(30 * time.Second)
	for len(nodes) < 2 || nodes[0].Status == "offline" || nodes[1].Status == "offline" {
		if time.Now().After(deadline) {
			t.Fatalf("the two agents did not join: %+v", nodes)
		}
		time.Sleep(50 * time.Millisecond)
		nodes = nil
		r := c.berthIn(nn.a, "fleet", "--json")
		if r.code == 0 {
			_ = json.Unmarshal([]byte(r.stdout), &nodes)
		}
	}
	addr := map[string]string{}
	for _, n := range nodes {
		addr[n.Name] = n.Addr
	}
	if addr["host-a"] != nn.addrA || addr["host-b"] != nn.addrB {
		t.Fatalf("nodes advertise %v, want host-a at %s and host-b at %s", addr, nn.addrA, nn.addrB)
	}

	// Job 0 listens on MASTER_ADDR:MASTER_PORT; job 1 connects to it from
	// the other namespace. Both say what they see.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := c.writeConfig("dist.yml", fmt.Sprintf(`type: task
name: two-hosts
nodes: 2
max_duration: 2m
env:
  - LISTENER=%s
commands:
  - echo "rank=$DSTACK_NODE_RANK master=$MASTER_ADDR:$MASTER_PORT dstack_master=$DSTACK_MASTER_NODE_IP own=$(ip -o -4 addr show | awk '{print $4}' | grep -v '^127.0.0.1/' | cut -d/ -f1)"
  - |
    if [ "$DSTACK_NODE_RANK" = 0 ]; then
      "$LISTENER" %s "$MASTER_ADDR:$MASTER_PORT"
    else
      for i in $(seq 1 300); do
        if (echo "hello from rank $DSTACK_NODE_RANK" >"/dev/tcp/$MASTER_ADDR/$MASTER_PORT") 2>/dev/null; then echo connected; exit 0; fi
        sleep 0.1
      done
      echo "could not connect to $MASTER_ADDR:$MASTER_PORT"; exit 1
    fi
`, self, listenArg))
	r := c.berthIn(nn.a, "apply", "-y", "-f", file)
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	run := findRun(mustRunsIn(t, c, nn.a), "two-hosts")
	if run == nil || run.Status != api.StatusDone || len(run.Jobs) != 2 {
		t.Fatalf("run two-hosts: %+v\napply: %s", run, r)
	}
	nodeOf := map[string]string{}
	for _, j := range run.Jobs {
		nodeOf[fmt.Sprint(j.Num)] = j.Node
	}
	if nodeOf["0"] != "host-a" || nodeOf["1"] != "host-b" {
		t.Errorf("jobs on %v, want rank 0 on host-a and rank 1 on host-b (Slurm's node order)", nodeOf)
	}
	ip0, ip1 := addr[nodeOf["0"]], addr[nodeOf["1"]]
	if ip0 == ip1 || ip0 == "" {
		t.Fatalf("the two jobs' nodes have addresses %q and %q; want two", ip0, ip1)
	}
	// apply's output, and `berth logs`, carry each line's rank.
	for what, out := range map[string]string{"apply": r.stdout, "logs": c.berthIn(nn.a, "logs", "two-hosts").stdout} {
		byRank := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			m := logLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s: line %q has no rank prefix", what, line)
				continue
			}
			byRank[m[1]] = append(byRank[m[1]], m[2])
		}
		port := ""
		for rank, ip := range map[string]string{"0": ip0, "1": ip1} {
			lines := byRank[rank]
			if len(lines) != 2 {
				t.Errorf("%s: rank %s printed %q, want two lines", what, rank, lines)
				continue
			}
			m := regexp.MustCompile(`^rank=(\d) master=([0-9.]+):(\d+) dstack_master=([0-9.]+) own=([0-9.]+)$`).FindStringSubmatch(lines[0])
			if m == nil || m[1] != rank || m[2] != ip0 || m[4] != ip0 || m[5] != ip {
				t.Errorf("%s: rank %s printed %q; want master %s and its own address %s", what, rank, lines[0], ip0, ip)
				continue
			}
			if port != "" && m[3] != port {
				t.Errorf("%s: the jobs see MASTER_PORT %s and %s", what, port, m[3])
			}
			port = m[3]
		}
		if got := byRank["0"]; len(got) == 2 && got[1] != fmt.Sprintf("got %q from %s", "hello from rank 1", ip1) {
			t.Errorf("%s: the master's listener printed %q; want the worker's line from %s", what, got[1], ip1)
		}
		if got := byRank["1"]; len(got) == 2 && got[1] != "connected" {
			t.Errorf("%s: the worker printed %q, want connected", what, got[1])
		}
	}
}

func readToken(t *testing.T, c *cluster) string {
	t.Helper()
	var cfg struct {
		Token string `yaml:"token"`
	}
	b, err := os.ReadFile(filepath.Join(c.home, "config.yml"))
	if err == nil {
		err = yaml.Unmarshal(b, &cfg)
	}
	if err != nil || cfg.Token == "" {
		t.Fatalf("config.yml: %v, token %q", err, cfg.Token)
	}
	return cfg.Token
}

func mustRunsIn(t *testing.T, c *cluster, ns string) []api.Run {
	t.Helper()
	r := c.berthIn(ns, "ps", "-a", "--json")
	var runs []api.Run
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &runs) != nil {
		t.Fatalf("berth ps -a --json: %s", r)
	}
	return runs
}
