//go:build linux

package main_test

// An SSH fleet installed for real (issue 17): four network namespaces on a
// bridge that a fifth (the server's) holds, Debian's sshd in each, one
// host that lets SSH in only from the bastion. `berth apply` of the fleet
// installs the agent on the three hosts over SSH (the third through the
// bastion), a two-node task runs across two of them, and `berth fleet
// delete` leaves the hosts clean.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/api"
)

// sshNet is the namespaces: srv (bridge and server) and one per host.
type sshNet struct {
	srv    string
	prefix string            // "10.A.B"
	hosts  map[string]string // name → namespace
	addr   map[string]string // name → address
}

func newSSHNet(t testing.TB, names ...string) *sshNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the SSH fleet test needs root (network namespaces, sshd)")
	}
	for _, tool := range []string{"ip", "nsenter", "/usr/sbin/sshd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: cannot run sshd in network namespaces (make test-deps installs openssh-server)", tool)
		}
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	sfx := hex.EncodeToString(b)
	x, _ := rand.Int(rand.Reader, big.NewInt(150))
	y, _ := rand.Int(rand.Reader, big.NewInt(250))
	n := &sshNet{srv: "bf-" + sfx + "-srv", prefix: fmt.Sprintf("10.%d.%d", 100+x.Int64(), y.Int64()), hosts: map[string]string{}, addr: map[string]string{}}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	if out, err := exec.Command("ip", "netns", "add", n.srv).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace here: %v: %s", err, out)
	}
	all := []string{n.srv}
	t.Cleanup(func() {
		for _, ns := range all {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	br := "bfbr" + sfx
	ip("-n", n.srv, "link", "add", br, "type", "bridge")
	ip("-n", n.srv, "addr", "add", n.prefix+".1/24", "dev", br)
	ip("-n", n.srv, "link", "set", br, "up")
	ip("-n", n.srv, "link", "set", "lo", "up")
	for i, name := range names {
		ns := fmt.Sprintf("bf-%s-%s", sfx, name)
		ip("netns", "add", ns)
		all = append(all, ns)
		va, vb := fmt.Sprintf("bf%s%da", sfx, i), fmt.Sprintf("bf%s%db", sfx, i)
		addr := fmt.Sprintf("%s.%d", n.prefix, 11+i)
		ip("link", "add", va, "type", "veth", "peer", "name", vb)
		ip("link", "set", va, "netns", ns)
		ip("link", "set", vb, "netns", n.srv)
		ip("-n", n.srv, "link", "set", vb, "master", br)
		ip("-n", n.srv, "link", "set", vb, "up")
		ip("-n", ns, "addr", "add", addr+"/24", "dev", va)
		ip("-n", ns, "link", "set", va, "up")
		ip("-n", ns, "link", "set", "lo", "up")
		n.hosts[name], n.addr[name] = ns, addr
	}
	return n
}

// startSSHD starts sshd in ns on port 22 with its own host key and
// authorized_keys (root may log in with the key only; allowFrom, when
// set, is the only address it lets in), killed when the test ends.
func startSSHD(t testing.TB, dir, ns, addr, authorized, allowFrom string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	hostKey := filepath.Join(dir, "host_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	ak := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(ak, []byte(authorized), 0o600); err != nil {
		t.Fatal(err)
	}
	allow := "AllowUsers root\n"
	if allowFrom != "" {
		allow = "AllowUsers root@" + allowFrom + "\n"
	}
	cfg := filepath.Join(dir, "sshd_config")
	conf := fmt.Sprintf("Port 22\nListenAddress %s\nHostKey %s\nPidFile %s\nAuthorizedKeysFile %s\nPermitRootLogin prohibit-password\n"+
		"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nAllowTcpForwarding yes\nUseDNS no\n%s",
		addr, hostKey, filepath.Join(dir, "sshd.pid"), ak, allow)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "sshd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net=/run/netns/"+ns, "--", "/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("sshd in %s:\n%s", ns, b)
		}
	})
	// Ready when it listens.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("ip", "netns", "exec", ns, "ss", "-ltn").CombinedOutput()
		if bytes.Contains(out, []byte(addr+":22")) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("sshd in %s did not listen on %s:22: %s\n%s", ns, addr, out, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleetKey writes a new private key for the fleet into the cluster's home
// and returns its path and the authorized_keys line of its public key.
func fleetKey(tb testing.TB, c *cluster) (path, authorized string) {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "berth fleet test")
	if err != nil {
		tb.Fatal(err)
	}
	path = c.writeConfig("fleet_key", string(pem.EncodeToMemory(block)))
	sshPub, _ := ssh.NewPublicKey(pub)
	return path, string(ssh.MarshalAuthorizedKey(sshPub))
}

// BenchmarkSSHFleetApply is the time from `berth apply -y -f` of a 3-host
// SSH fleet to its return, when every host's agent has registered (its
// node idle): connect, check, upload the binary, install, register, on
// three hosts at once. Each iteration then deletes the fleet, untimed.
// load1 is the machine's 1-minute load average at the start.
//
//	sudo go test ./cmd/berth -run XXX -bench SSHFleetApply -benchtime 3x
func BenchmarkSSHFleetApply(b *testing.B) {
	nn := newSSHNet(b, "h1", "h2", "h3")
	c := newCluster(b)
	keyFile, authorized := fleetKey(b, c)
	text := fmt.Sprintf("type: fleet\nname: bench\nssh_config:\n  user: root\n  identity_file: %s\n  hosts:\n", keyFile)
	for _, h := range []string{"h1", "h2", "h3"} {
		startSSHD(b, filepath.Join(c.home, "sshd-"+h), nn.hosts[h], nn.addr[h], authorized, "")
		text += fmt.Sprintf("    - hostname: %s\n      install_dir: %s\n", nn.addr[h], filepath.Join(c.home, "hosts", h, "berth"))
	}
	file := c.writeConfig("bench.yml", text)
	c.startIn(nn.srv, "server", filepath.Join(c.home, "server.log"), c.env(), regexp.MustCompile(`Berth server on (http://\S+) `),
		"server", "--listen", nn.prefix+".1:8080", "--no-local-agent", "--stop-grace", "1s")
	var load1 float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscan(string(b), &load1)
	}
	b.ResetTimer()
	for range b.N {
		if r := c.berthIn(nn.srv, "apply", "-y", "-f", file); r.code != 0 || !strings.Contains(r.stdout, "3 of 3 hosts ready") {
			b.Fatalf("apply: %s", r)
		}
		b.StopTimer()
		if r := c.berthIn(nn.srv, "fleet", "delete", "bench"); r.code != 0 {
			b.Fatalf("delete: %s", r)
		}
		b.StartTimer()
	}
	b.ReportMetric(load1, "load1")
}

func TestSSHFleetInNetworkNamespaces(t *testing.T) {
	t.Parallel()
	nn := newSSHNet(t, "h1", "h2", "h3", "bastion")
	c := newCluster(t)

	// The fleet's key, and each host's sshd.
	keyFile, authorized := fleetKey(t, c)
	for _, h := range []string{"h1", "h2", "bastion"} {
		startSSHD(t, filepath.Join(c.home, "sshd-"+h), nn.hosts[h], nn.addr[h], authorized, "")
	}
	startSSHD(t, filepath.Join(c.home, "sshd-h3"), nn.hosts["h3"], nn.addr["h3"], authorized, nn.addr["bastion"])

	// A fixed port (the namespace is the test's own): the agents find the
	// server again after it is killed and started again.
	serverLog := filepath.Join(c.home, "server.log")
	startServer := func() *proc {
		p, m := c.startIn(nn.srv, "server", serverLog, c.env(), regexp.MustCompile(`Berth server on (http://\S+) `),
			"server", "--listen", nn.prefix+".1:8080", "--no-local-agent", "--stop-grace", "1s")
		t.Logf("server at %s", m[1])
		return p
	}
	srv := startServer()

	dirs := map[string]string{}
	for _, h := range []string{"h1", "h2", "h3"} {
		dirs[h] = filepath.Join(c.home, "hosts", h, "berth")
	}
	fleetFile := func(hosts ...string) string {
		text := fmt.Sprintf("type: fleet\nname: lab\nplacement: cluster\nssh_config:\n  user: root\n  identity_file: %s\n  network: %s.0/24\n  hosts:\n", keyFile, nn.prefix)
		for _, h := range hosts {
			text += fmt.Sprintf("    - hostname: %s\n      install_dir: %s\n", nn.addr[h], dirs[h])
			if h == "h3" {
				text += fmt.Sprintf("      proxy_jump: {hostname: %s, user: root, identity_file: %s}\n", nn.addr["bastion"], keyFile)
			}
		}
		return c.writeConfig("fleet-"+strings.Join(hosts, "-")+".yml", text)
	}
	file := fleetFile("h1", "h2", "h3")
	start := time.Now()
	r := c.berthIn(nn.srv, "apply", "-y", "-f", file)
	t.Logf("apply took %s:\n%s\n%s", time.Since(start), r.stderr, r.stdout)
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	for _, want := range []string{"lab-0", "lab-1", "lab-2", "install", "through root@" + nn.addr["bastion"] + ":22", "ready", "Fleet lab: active, 3 of 3 hosts ready"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("apply's output lacks %q", want)
		}
	}
	// The nodes joined, in the fleet, each at its own address.
	var nodes []api.Node
	if r := c.berthIn(nn.srv, "fleet", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &nodes) != nil {
		t.Fatalf("berth fleet --json: %s", r)
	}
	addrOf := map[string]string{}
	for _, n := range nodes {
		if n.Fleet != "lab" || n.Status == "offline" || strings.Join(n.Features, ",") != "segment:"+nn.prefix+".0/24" {
			t.Errorf("node %s: fleet %q, status %s, features %v", n.Name, n.Fleet, n.Status, n.Features)
		}
		addrOf[n.Name] = n.Addr
	}
	if addrOf["lab-0"] != nn.addr["h1"] || addrOf["lab-1"] != nn.addr["h2"] || addrOf["lab-2"] != nn.addr["h3"] {
		t.Errorf("nodes at %v; want lab-0..2 at the hosts' addresses", addrOf)
	}
	for h, dir := range dirs {
		for _, f := range []string{"berth", "agent.env", "agent.pid", "supervise.sh"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("host %s: %v", h, err)
			}
		}
		if st, err := os.Stat(filepath.Join(dir, "agent.env")); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("host %s: agent.env (the node's credential) has mode %v", h, st.Mode().Perm())
		}
	}
	if r := c.berthIn(nn.srv, "fleet"); !strings.Contains(r.stdout, "SSH FLEET") || strings.Count(r.stdout, " ready ") != 3 {
		t.Errorf("berth fleet:\n%s", r.stdout)
	}

	// Re-applied without h2: h2 is drained and uninstalled, the others kept.
	r = c.berthIn(nn.srv, "apply", "-y", "-f", fleetFile("h1", "h3"))
	if r.code != 0 || !strings.Contains(r.stderr, "lab-1  uninstall") || strings.Count(r.stderr, "  keep  ") != 2 || !strings.Contains(r.stdout, "2 of 2 hosts ready") {
		t.Fatalf("apply without h2: %s", r)
	}
	if _, err := os.Stat(dirs["h2"]); !os.IsNotExist(err) {
		t.Errorf("h2's %s is still there after its removal from the fleet (%v)", dirs["h2"], err)
	}
	if left := waitNone(func() []int { return procsWith(dirs["h2"]) }, 10*time.Second); len(left) > 0 {
		t.Errorf("h2: processes left: %v", left)
	}

	// Added back, and the server killed (-9) half-way through its
	// installation: started again, it takes the host up where it stopped.
	logAt := func() int64 { st, _ := os.Stat(serverLog); return st.Size() }
	from := logAt()
	bg := exec.Command(in(nn.srv, "apply", "-y", "-f", fleetFile("h1", "h2", "h3"))[0], in(nn.srv, "apply", "-y", "-f", fleetFile("h1", "h2", "h3"))[1:]...)
	bg.Env, bg.Dir = c.env(), c.home
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	step := regexp.MustCompile(`node=lab-1 .*state=(checked|uploaded|installed)`)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(serverLog)
		if m := step.FindSubmatch(b[from:]); m != nil {
			t.Logf("killing the server with lab-1 %s", m[1])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab-1's installation did not start:\n%s", b[from:])
		}
	}
	srv.kill()
	_ = bg.Wait()
	srv = startServer()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r = c.berthIn(nn.srv, "fleet")
		if strings.Count(r.stdout, " ready ") == 3 && strings.Contains(r.stdout, "lab-1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet did not converge after the restart:\n%s", r.stdout)
		}
	}
	if b, _ := os.ReadFile(serverLog); !strings.Contains(string(b[from:]), `msg="fleet: resuming" fleet=lab`) {
		t.Errorf("the restarted server did not say it resumed the fleet")
	}
	// lab-1, drained when it left the fleet, is back in service.
	nodes = nil
	if r := c.berthIn(nn.srv, "fleet", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &nodes) != nil {
		t.Fatalf("berth fleet --json: %s", r)
	}
	for _, n := range nodes {
		if n.Name == "lab-1" && (n.Drain != nil || n.Status == "offline") {
			t.Errorf("lab-1 after it was added again: status %s, drain %+v", n.Status, n.Drain)
		}
	}
	if pids := procsWith(dirs["h2"] + "/supervise.sh"); len(pids) != 1 {
		t.Errorf("h2 runs %d agent supervisors after the restart, want 1: %v", len(pids), describe(pids))
	}

	// A two-node task on the fleet runs on two of its hosts.
	task := c.writeConfig("two.yml", fmt.Sprintf(`type: task
name: across
nodes: 2
fleets: [lab]
max_duration: 2m
commands:
  - echo "rank=$DSTACK_NODE_RANK own=$(ip -o -4 addr show | awk '{print $4}' | grep '^%s\.' | cut -d/ -f1)"
`, regexp.QuoteMeta(nn.prefix)))
	r = c.berthIn(nn.srv, "apply", "-y", "-f", task)
	if r.code != 0 {
		t.Fatalf("apply the task: %s", r)
	}
	own := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if m := regexp.MustCompile(`own=(\S+)`).FindStringSubmatch(line); m != nil {
			own[m[1]] = true
		}
	}
	if len(own) != 2 {
		t.Errorf("the task's two jobs ran at %v; want two hosts:\n%s", own, r.stdout)
	}
	for a := range own {
		if a != nn.addr["h1"] && a != nn.addr["h2"] && a != nn.addr["h3"] {
			t.Errorf("a job ran at %s, not on a fleet host", a)
		}
	}

	// Delete: the hosts are left clean.
	r = c.berthIn(nn.srv, "fleet", "delete", "lab")
	if r.code != 0 {
		t.Fatalf("fleet delete: %s", r)
	}
	if !strings.Contains(r.stdout, "Fleet lab deleted") {
		t.Errorf("fleet delete printed:\n%s", r.stdout)
	}
	for h, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			ents, _ := os.ReadDir(dir)
			t.Errorf("host %s: %s is still there (%v): %v", h, dir, err, ents)
		}
		if left := waitNone(func() []int { return procsWith(dir) }, 10*time.Second); len(left) > 0 {
			t.Errorf("host %s: processes left: %v", h, left)
		}
		if m, _ := filepath.Glob("/etc/systemd/system/berth-agent-lab-*.service"); len(m) > 0 {
			t.Errorf("units left: %v", m)
		}
	}
	if r := c.berthIn(nn.srv, "fleet"); strings.Contains(r.stdout, "SSH FLEET") {
		t.Errorf("berth fleet still shows the fleet:\n%s", r.stdout)
	}
}
