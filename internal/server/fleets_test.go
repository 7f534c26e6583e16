package server

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

func fleetSpec(t *testing.T, yaml string) *spec.Fleet {
	t.Helper()
	f, err := spec.ParseFleet("f.yml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Applying a changed configuration: unchanged hosts are kept, changed ones
// reinstalled, new ones installed under node names never used before in
// the fleet, and missing ones uninstalled.
func TestFleetMergeHosts(t *testing.T) {
	first := fleetSpec(t, "type: fleet\nname: lab\nssh_config:\n  user: u\n  identity_file: k\n  hosts: [a, b, c]\n")
	hosts, actions := mergeHosts("lab", nil, first)
	type row struct{ Host, Node, Action string }
	rows := func(as []api.FleetHostAction) []row {
		var out []row
		for _, a := range as {
			out = append(out, row{a.Host, a.Node, a.Action})
		}
		return out
	}
	want := []row{{"u@a:22", "lab-0", "install"}, {"u@b:22", "lab-1", "install"}, {"u@c:22", "lab-2", "install"}}
	if d := cmp.Diff(want, rows(actions)); d != "" {
		t.Fatalf("first apply (-want +got):\n%s", d)
	}
	for _, h := range hosts {
		h.State = api.HostReady
	}
	hosts[1].State = api.HostFailed
	second := fleetSpec(t, "type: fleet\nname: lab\nssh_config:\n  user: u\n  identity_file: k\n  hosts:\n    - a\n    - {hostname: c, install_dir: /srv/b}\n    - b\n    - d\n")
	hosts2, actions := mergeHosts("lab", hosts, second)
	want = []row{{"u@a:22", "lab-0", "keep"}, {"u@c:22", "lab-2", "reinstall"}, {"u@b:22", "lab-1", "reinstall"}, {"u@d:22", "lab-3", "install"}}
	if d := cmp.Diff(want, rows(actions)); d != "" {
		t.Errorf("second apply (-want +got):\n%s", d)
	}
	if hosts2[1].State != api.HostPending || hosts2[1].InstallDir != "/srv/b" {
		t.Errorf("the changed host: %+v", hosts2[1].FleetHost)
	}
	third := fleetSpec(t, "type: fleet\nname: lab\nssh_config:\n  user: u\n  identity_file: k\n  hosts: [a]\n")
	for _, h := range hosts2 {
		h.State = api.HostReady
	}
	_, actions = mergeHosts("lab", hosts2, third)
	want = []row{{"u@a:22", "lab-0", "keep"}, {"u@c:22", "lab-2", "uninstall"}, {"u@b:22", "lab-1", "uninstall"}, {"u@d:22", "lab-3", "uninstall"}}
	if d := cmp.Diff(want, rows(actions)); d != "" {
		t.Errorf("third apply (-want +got):\n%s", d)
	}
}

// Fleets belong to projects: the project's admins apply and delete them,
// its members read them, anyone else gets 404. The private key is stored
// sealed, never as sent. A host that cannot be reached fails with why;
// delete --force forgets it.
func TestFleetAccessAndKey(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.SecretsKey = testKey(t) })
	ctx := context.Background()
	tokens := map[string]string{"admin": testToken}
	for _, u := range []string{"alice", "bob", "carol"} {
		if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: u}); err != nil {
			t.Fatal(err)
		}
		tk, err := h.c.CreateToken(ctx, api.TokenRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tk.Secret
	}
	if _, err := h.c.CreateProject(ctx, "ml"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.SetMember(ctx, "ml", "alice", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.SetMember(ctx, "ml", "bob", "user"); err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := string(pem.EncodeToMemory(block))
	sp := fleetSpec(t, fmt.Sprintf("type: fleet\nname: lab\nproject: ml\nssh_config:\n  user: root\n  identity_file: /k\n  hosts:\n    - {hostname: 127.0.0.1, port: %d}\n", port))
	body := func(plan bool, keys map[string]string) string {
		b, _ := json.Marshal(api.FleetApplyRequest{Spec: sp, Keys: keys, ServerURL: h.http.URL, Plan: plan})
		return string(b)
	}
	keys := map[string]string{"/k": key}
	steps := []struct {
		who, method, path, body string
		want                    int
	}{
		{"carol", "POST", "/fleets", body(true, keys), 400}, // not a member of ml
		{"bob", "POST", "/fleets", body(true, keys), 403},   // a member, not its admin
		{"alice", "POST", "/fleets", body(true, keys), 200},
		{"alice", "POST", "/fleets", body(false, nil), 400}, // no key for /k
		{"alice", "POST", "/fleets", body(false, keys), 202},
		{"carol", "GET", "/fleets/lab", "", 404},
		{"bob", "GET", "/fleets/lab", "", 200},
		{"carol", "DELETE", "/fleets/lab", "", 404},
		{"bob", "DELETE", "/fleets/lab", "", 403},
	}
	for i, s := range steps {
		code, out := call(t, h, s.method, tokens[s.who], s.path, s.body)
		if code != s.want {
			t.Errorf("step %d: %s %s %s: %d %s, want %d", i, s.who, s.method, s.path, code, out, s.want)
		}
		if strings.Contains(out, "PRIVATE KEY") {
			t.Errorf("step %d: the answer shows the key: %s", i, out)
		}
	}
	if code, out := call(t, h, "GET", tokens["carol"], "/fleets", ""); code != 200 || strings.TrimSpace(out) != "[]" {
		t.Errorf("carol's fleets: %d %s", code, out)
	}
	stored, err := h.st.GetFleet(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"ssh_key": stored.SSHKey, "spec": []byte(stored.Spec), "hosts": []byte(stored.Hosts)} {
		if bytes.Contains(b, []byte("PRIVATE KEY")) || bytes.Contains(b, block.Bytes[:32]) {
			t.Errorf("the stored fleet's %s holds the key in plain text", what)
		}
	}

	// The host cannot be reached: it fails, saying why.
	var fl *api.Fleet
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if fl, err = h.c.Fleet(ctx, "lab"); err != nil {
			t.Fatal(err)
		}
		if fl.Status != api.FleetProvisioning || time.Now().After(deadline) {
			break
		}
	}
	if fl.Status != api.FleetFailed || len(fl.Hosts) != 1 || fl.Hosts[0].State != api.HostFailed ||
		!strings.Contains(fl.Hosts[0].Message, fmt.Sprintf("connect to 127.0.0.1:%d", port)) || fl.Project != "ml" || fl.Hosts[0].Node != "lab-0" {
		t.Fatalf("fleet: %+v", fl)
	}

	// Delete --force forgets the unreachable host, then the fleet.
	if code, out := call(t, h, "DELETE", tokens["alice"], "/fleets/lab?force=true", ""); code != 202 {
		t.Fatalf("delete: %d %s", code, out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, out := call(t, h, "GET", tokens["alice"], "/fleets/lab", "")
		if code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet is still there: %d %s", code, out)
		}
	}
}

// The host check's output is read into facts, and the binary chosen for
// the host's architecture: the server's own, a configured one, or a
// refusal that says how to give one.
func TestFleetHostFactsAndBinary(t *testing.T) {
	f := parseFacts("os=Linux\narch=aarch64\ncpus=8\nmem_kb=1024\ngpu=NVIDIA A100-SXM4-80GB, 81920\ngpu=NVIDIA A100-SXM4-80GB, 81920\ndocker=yes\ndisk_kb=2048\ninit=systemd\nsystemctl=yes\nuid=1000\n")
	want := hostFacts{os: "Linux", arch: "aarch64", init: "systemd", cpus: 8, memKB: 1024, diskKB: 2048,
		gpus: []string{"NVIDIA A100-SXM4-80GB 81920MiB", "NVIDIA A100-SXM4-80GB 81920MiB"}, docker: true, sysctl: true, uid: 1000}
	if d := cmp.Diff(want, f, cmp.AllowUnexported(hostFacts{})); d != "" {
		t.Errorf("facts (-want +got):\n%s", d)
	}
	if goArch(f.arch) != "arm64" || goArch("x86_64") != "amd64" {
		t.Errorf("goArch: %s %s", goArch(f.arch), goArch("x86_64"))
	}
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	s := &Server{}
	if p, err := s.fleetBinary(runtime.GOARCH); err != nil || p == "" {
		t.Errorf("own arch: %q %v", p, err)
	}
	if _, err := s.fleetBinary(other); err == nil || !strings.Contains(err.Error(), "berth server --fleet-binary "+other+"=PATH") {
		t.Errorf("another arch without a binary: %v", err)
	}
	s.cfg.FleetBinaries = map[string]string{other: "/opt/berth-" + other}
	if p, err := s.fleetBinary(other); err != nil || p != "/opt/berth-"+other {
		t.Errorf("another arch with a binary: %q %v", p, err)
	}
}

// --all-or-nothing: when a host fails, every host is rolled back and the
// fleet is failed, saying which host and why.
func TestFleetAllOrNothing(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.SecretsKey = testKey(t) })
	ctx := context.Background()
	var ports []int
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	sp := fleetSpec(t, fmt.Sprintf("type: fleet\nname: duo\nssh_config:\n  user: root\n  identity_file: /k\n  hosts:\n    - {hostname: 127.0.0.1, port: %d}\n    - {hostname: 127.0.0.1, port: %d}\n", ports[0], ports[1]))
	if _, err := h.c.ApplyFleet(ctx, api.FleetApplyRequest{Spec: sp, Keys: map[string]string{"/k": "not a key"}, ServerURL: h.http.URL}); err == nil || !strings.Contains(err.Error(), "identity_file /k") {
		t.Fatalf("a key that is not one: %v", err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"/k": string(pem.EncodeToMemory(block))}
	if _, err := h.c.ApplyFleet(ctx, api.FleetApplyRequest{Spec: sp, Keys: keys, ServerURL: h.http.URL, AllOrNothing: true}); err != nil {
		t.Fatal(err)
	}
	var fl *api.Fleet
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if fl, err = h.c.Fleet(ctx, "duo"); err != nil {
			t.Fatal(err)
		}
		if fl.Status != api.FleetProvisioning || time.Now().After(deadline) {
			break
		}
	}
	if fl.Status != api.FleetFailed || !strings.Contains(fl.Message, "rolled back (--all-or-nothing): duo-") {
		t.Fatalf("fleet: %+v", fl)
	}
	for _, host := range fl.Hosts {
		if host.State != api.HostFailed || !strings.Contains(host.Message, "rolled back") || !strings.Contains(host.Message, "connect to 127.0.0.1:") {
			t.Errorf("host %s: %s %q", host.Node, host.State, host.Message)
		}
	}
}
