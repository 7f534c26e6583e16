package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func intp(i int) *int { return &i }

// TestParseFleetSeeds parses dstack's own fleet examples: the three seed
// files that Parse refuses as "not a task".
func TestParseFleetSeeds(t *testing.T) {
	four, eight := 4, 8
	tests := map[string]*Fleet{
		"03-my-fleet.yml": {Type: "fleet", Name: "my-fleet", Blocks: 4, Nodes: &FleetNodes{Max: &four},
			Resources: &Resources{GPU: mustGPU(t, "40GB..80GB:4..8")}},
		"12-gpu-fleet.yml": {Type: "fleet", Name: "gpu-fleet", Placement: "cluster", Blocks: 8, Nodes: &FleetNodes{Max: &eight},
			Resources: &Resources{GPU: mustGPU(t, "A100:80GB:8")}, Backends: []string{"aws"}, SpotPolicy: "auto"},
		"13-on-prem-gpu-fleet.yml": {Type: "fleet", Name: "on-prem-gpu-fleet", Placement: "cluster", Blocks: 8,
			SSHConfig: &SSHConfig{User: "dstack", IdentityFile: "~/.ssh/id_rsa",
				Hosts:     []SSHHost{{Hostname: "gpu-node01.example.com"}, {Hostname: "gpu-node02.example.com"}},
				ProxyJump: &ProxyJump{Hostname: "login-node.example.com", User: "dstack", IdentityFile: "~/.ssh/login_node_key"}}},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join("testdata", "seeds", name)
			if ConfigType(mustRead(t, p)) != "fleet" {
				t.Fatalf("ConfigType(%s) = %q, want fleet", name, ConfigType(mustRead(t, p)))
			}
			got, err := ParseFleetFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			// The JSON form (what the client sends) reads back equal and valid.
			data, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back Fleet
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, &back); diff != "" {
				t.Errorf("JSON round trip (-want +got)\n%s", diff)
			}
			if err := back.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustGPU(t *testing.T, s string) *GPUSpec {
	t.Helper()
	g, err := ParseGPU(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestParseFleetFields reads every field, each form of the ones with
// several, and the defaults Host fills in.
func TestParseFleetFields(t *testing.T) {
	ssh := `type: fleet
name: lab
project: ml
placement: cluster
blocks: auto
env:
  - NCCL_DEBUG=INFO
ssh_config:
  user: ubuntu
  port: 2222
  identity_file: ~/.ssh/id_ed25519
  proxy_jump: admin@bastion.example.com:2200
  network: 10.0.0.0/24
  install_dir: /srv/berth
  hosts:
    - 10.0.0.2
    - hostname: 10.0.0.3
      user: root
      port: 22
      identity_file: ~/.ssh/other
      internal_ip: 10.0.0.13
      blocks: 2
      install_dir: /tmp/b3
      proxy_jump:
        hostname: jump2
        user: j
        port: 23
        identity_file: ~/.ssh/jump
`
	f, err := ParseFleet("f.yml", []byte(ssh))
	if err != nil {
		t.Fatal(err)
	}
	want := &Fleet{Type: "fleet", Name: "lab", Project: "ml", Placement: "cluster", Blocks: BlocksAuto,
		Env: Env{{Name: "NCCL_DEBUG", Value: "INFO"}},
		SSHConfig: &SSHConfig{User: "ubuntu", Port: 2222, IdentityFile: "~/.ssh/id_ed25519",
			ProxyJump: &ProxyJump{Hostname: "bastion.example.com", User: "admin", Port: 2200},
			Network:   "10.0.0.0/24", InstallDir: "/srv/berth",
			Hosts: []SSHHost{{Hostname: "10.0.0.2"}, {Hostname: "10.0.0.3", User: "root", Port: 22, IdentityFile: "~/.ssh/other",
				InternalIP: "10.0.0.13", Blocks: 2, InstallDir: "/tmp/b3",
				ProxyJump: &ProxyJump{Hostname: "jump2", User: "j", Port: 23, IdentityFile: "~/.ssh/jump"}}}}}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	wantHost0 := SSHHost{Hostname: "10.0.0.2", User: "ubuntu", Port: 2222, IdentityFile: "~/.ssh/id_ed25519",
		ProxyJump:  &ProxyJump{Hostname: "bastion.example.com", User: "admin", Port: 2200, IdentityFile: "~/.ssh/id_ed25519"},
		InstallDir: "/srv/berth", Blocks: BlocksAuto}
	if diff := cmp.Diff(wantHost0, f.Host(0)); diff != "" {
		t.Errorf("Host(0) (-want +got)\n%s", diff)
	}
	if h := f.Host(1); h.Port != 22 || h.User != "root" || h.ProxyJump.Hostname != "jump2" || h.Blocks != 2 {
		t.Errorf("Host(1) = %+v, want its own port, user, proxy jump and blocks", h)
	}

	backend := `type: fleet
name: cloud
nodes: {min: 1, target: 2, max: 6}
resources:
  gpu: 24GB:1
  disk: 100GB..
backends: [docker, aws]
regions: [local]
availability_zones: [local-a]
instance_types: [small]
spot_policy: on-demand
retry:
  on_events: [no-capacity]
  duration: 1h
max_price: 1.5
idle_duration: 10m
termination_idle_time: off
termination_policy: destroy-after-idle
reservation: cr-123
tags:
  team: ml
`
	g, err := ParseFleet("g.yml", []byte(backend))
	if err != nil {
		t.Fatal(err)
	}
	hour, tenMin, off, price := Duration(3600), Duration(600), DurationOff, 1.5
	wantG := &Fleet{Type: "fleet", Name: "cloud", Nodes: &FleetNodes{Min: 1, Target: 2, Max: intp(6)},
		Resources: g.Resources, Backends: []string{"docker", "aws"}, Regions: []string{"local"},
		AvailabilityZones: []string{"local-a"}, InstanceTypes: []string{"small"}, SpotPolicy: "on-demand",
		Retry: &Retry{OnEvents: []string{"no-capacity"}, Duration: &hour}, MaxPrice: &price,
		IdleDuration: &tenMin, TerminationIdleTime: &off, TerminationPolicy: "destroy-after-idle",
		Reservation: "cr-123", Tags: map[string]string{"team": "ml"}}
	if diff := cmp.Diff(wantG, g); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if g.Resources == nil || g.Resources.GPU == nil || g.Resources.Disk == nil {
		t.Errorf("resources = %+v, want gpu and disk", g.Resources)
	}

	nodes := map[string]FleetNodes{
		"3":           {Min: 3, Target: 3, Max: intp(3)},
		`"0..8"`:      {Max: intp(8)},
		`"2.."`:       {Min: 2, Target: 2},
		`"..4"`:       {Max: intp(4)},
		"{min: 1}":    {Min: 1, Target: 1},
		"{max: 3}":    {Max: intp(3)},
		`"1 .. 5"`:    {Min: 1, Target: 1, Max: intp(5)},
		"0":           {Max: intp(0)},
		"{target: 2}": {Target: 2},
	}
	for in, want := range nodes {
		f, err := ParseFleet("n.yml", []byte("type: fleet\nnodes: "+in+"\n"))
		if err != nil {
			t.Errorf("nodes: %s: %v", in, err)
			continue
		}
		if diff := cmp.Diff(&want, f.Nodes); diff != "" {
			t.Errorf("nodes: %s (-want +got)\n%s", in, diff)
		}
	}
}

// TestParseFleetErrors pins the text, position and order of problems.
func TestParseFleetErrors(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"ssh and backend": {
			in: "type: fleet\nnodes: 2\nssh_config:\n  user: u\n  identity_file: k\n  hosts: [a]\nbackends: [aws]\n",
			want: []string{
				"f.yml:2:8: nodes: only a backend fleet sets `nodes`; this fleet has `ssh_config` (a fleet is either SSH hosts or backend instances, not both)",
				"f.yml:7:11: backends: only a backend fleet sets `backends`; this fleet has `ssh_config` (a fleet is either SSH hosts or backend instances, not both)",
			},
		},
		"neither": {
			in:   "type: fleet\nname: x1\n",
			want: []string{"f.yml:1:1: a fleet needs `ssh_config` (existing hosts reached over SSH) or `nodes` (instances created by backends)"},
		},
		"not a fleet": {
			in:   "type: task\ncommands: [x]\n",
			want: []string{`f.yml:1:7: type: this is a "task" configuration, not a fleet; ` + "`berth apply` of a fleet needs `type: fleet`"},
		},
		"missing type": {
			in:   "nodes: 1\n",
			want: []string{"f.yml:1:1: type: required; add `type: fleet` at the top"},
		},
		"hosts": {
			in: `type: fleet
placement: clustr
blocks: 0
network: 10.0.0.0/8
ssh_config:
  port: 70000
  network: 8.8.8.0/24
  proxy_jump: "u@:22"
  install_dir: relative
  hosts:
    - a
    - hostname: a
      identity_file: k
      user: u
      internal_ip: 1.2.3.4
    - [x]
    - hostname: b
      blokcs: 2
      user: u
      identity_file: k
      internal_ip: nope
`,
			want: []string{
				`f.yml:2:12: placement: unknown value "clustr"; did you mean "cluster"? (expected one of: any, cluster)`,
				"f.yml:3:9: blocks: must be at least 1 or `auto`, got 0",
				"f.yml:4:1: network: unknown field; `network` belongs under `ssh_config:`",
				"f.yml:6:9: ssh_config.port: port 70000 is out of range 1..65535",
				`f.yml:7:12: ssh_config.network: "8.8.8.0/24" is a public network; the inter-node network must be private (10/8, 172.16/12, 192.168/16, fc00::/7)`,
				`f.yml:8:15: ssh_config.proxy_jump: invalid proxy_jump "u@:22" (expected [user@]hostname[:port], or a mapping with hostname, user, port and identity_file)`,
				`f.yml:9:16: ssh_config.install_dir: must be an absolute path, got "relative"`,
				"f.yml:11:7: ssh_config.hosts[0]: no user to log in as and no private key: set `user` and `identity_file` here or in `ssh_config`",
				"f.yml:12:17: ssh_config.hosts[1].hostname: host a:22 is listed twice (first at ssh_config.hosts[0])",
				`f.yml:15:20: ssh_config.hosts[1].internal_ip: "1.2.3.4" is not a private address`,
				"f.yml:16:7: ssh_config.hosts[2]: must be a mapping of fields, not a list",
				`f.yml:18:7: ssh_config.hosts[3].blokcs: unknown field; did you mean "blocks"?`,
				`f.yml:21:20: ssh_config.hosts[3].internal_ip: "nope" is not an IP address`,
			},
		},
		"no hosts": {
			in:   "type: fleet\nssh_config:\n  user: u\n  hosts: []\n",
			want: []string{"f.yml:4:10: ssh_config.hosts: required: list the hosts to add, e.g. [10.0.0.2, 10.0.0.3]"},
		},
		"backend values": {
			in: "type: fleet\nname: Bad_Name\nnodes: {min: 3, max: 2}\nspot_policy: cheap\nmax_price: 0\nidle_duration: soon\nbackend_options: []\nresources:\n  gpu: 80GB..40GB\n",
			want: []string{
				`f.yml:2:7: name: "Bad_Name" is not a valid fleet name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter`,
				"f.yml:3:22: nodes.max: must not be less than min (3), got 2",
				`f.yml:4:14: spot_policy: unknown value "cheap" (expected one of: spot, on-demand, auto)`,
				"f.yml:5:12: max_price: must be more than 0, got 0",
				`f.yml:6:16: idle_duration: invalid duration "soon" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`,
				"f.yml:7:1: backend_options: `backend_options` is not supported by Berth (no backend here takes options)",
				`f.yml:9:8: resources.gpu: GPU memory "80GB..40GB": range 80GB..40GB: minimum is greater than maximum`,
			},
		},
		"nodes forms": {
			in:   "type: fleet\nnodes: \"a..3\"\n",
			want: []string{`f.yml:2:8: nodes: invalid minimum "a" in node range "a..3" (expected e.g. 0..8)`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ParseFleet("f.yml", []byte(tc.in))
			if err == nil {
				t.Fatalf("no error; got %+v", f)
			}
			if f != nil {
				t.Errorf("a fleet came back with the errors")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid: %v", err)
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestFleetValidateJSON: a fleet decoded from JSON (what the server gets)
// is held to the same rules, with field paths.
func TestFleetValidateJSON(t *testing.T) {
	var f Fleet
	if err := json.Unmarshal([]byte(`{"type":"fleet","blocks":"auto","ssh_config":{"hosts":[{"hostname":"a","user":"u","identity_file":"k"},{"hostname":""}]},"nodes":{"min":1,"target":1}}`), &f); err != nil {
		t.Fatal(err)
	}
	err := f.Validate()
	want := []string{
		"nodes: only a backend fleet sets `nodes`; this fleet has `ssh_config` (a fleet is either SSH hosts or backend instances, not both)",
		"ssh_config.hosts[1].hostname: required",
	}
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func FuzzParseFleet(f *testing.F) {
	for _, name := range []string{"03-my-fleet.yml", "12-gpu-fleet.yml", "13-on-prem-gpu-fleet.yml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "seeds", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := ParseFleet("f.yml", data)
		if (fl == nil) == (err == nil) {
			t.Fatalf("ParseFleet returned fleet %v and error %v", fl, err)
		}
		if fl != nil {
			if err := fl.Validate(); err != nil {
				t.Fatalf("a parsed fleet fails Validate: %v", err)
			}
			if fl.IsSSH() {
				for i := range fl.SSHConfig.Hosts {
					_ = fl.Host(i)
				}
			}
		}
	})
}
