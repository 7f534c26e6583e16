package spec

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Fleet is one `type: fleet` configuration, with dstack's field names. A
// fleet is either an SSH fleet (SSHConfig: hosts that exist and are reached
// over SSH) or a backend fleet (Nodes and the fields after it: instances
// created by providers), never both.
type Fleet struct {
	Type      string `json:"type"` // always "fleet"
	Name      string `json:"name,omitempty"`
	Project   string `json:"project,omitempty"` // Berth's: the project that owns the fleet (empty: the applier's default)
	Placement string `json:"placement,omitempty"`
	Blocks    Blocks `json:"blocks,omitempty"` // 0 = default (1)

	SSHConfig *SSHConfig `json:"ssh_config,omitempty"`
	Env       Env        `json:"env,omitempty"`

	Nodes               *FleetNodes       `json:"nodes,omitempty"`
	Reservation         string            `json:"reservation,omitempty"`
	Resources           *Resources        `json:"resources,omitempty"`
	Backends            []string          `json:"backends,omitempty"`
	Regions             []string          `json:"regions,omitempty"`
	AvailabilityZones   []string          `json:"availability_zones,omitempty"`
	InstanceTypes       []string          `json:"instance_types,omitempty"`
	SpotPolicy          string            `json:"spot_policy,omitempty"`
	Retry               *Retry            `json:"retry,omitempty"`
	MaxPrice            *float64          `json:"max_price,omitempty"`
	IdleDuration        *Duration         `json:"idle_duration,omitempty"` // nil = default; DurationOff = off
	TerminationIdleTime *Duration         `json:"termination_idle_time,omitempty"`
	TerminationPolicy   string            `json:"termination_policy,omitempty"`
	Tags                map[string]string `json:"tags,omitempty"`
}

// Placements are the values of a fleet's `placement`: `cluster` keeps a
// multi-node run's nodes within one network segment.
var Placements = []string{"any", "cluster"}

// TerminationPolicies are the values of dstack's `termination_policy`.
var TerminationPolicies = []string{"dont-destroy", "destroy-after-idle"}

// Blocks is how many pieces a host is split into: a number, or BlocksAuto
// for as many as its GPUs (or CPUs) allow.
type Blocks int

// BlocksAuto is `blocks: auto`.
const BlocksAuto Blocks = -1

// MarshalJSON writes "auto" or the number.
func (b Blocks) MarshalJSON() ([]byte, error) {
	if b == BlocksAuto {
		return []byte(`"auto"`), nil
	}
	return []byte(strconv.Itoa(int(b))), nil
}

// UnmarshalJSON reads "auto" or a number.
func (b *Blocks) UnmarshalJSON(data []byte) error {
	if string(data) == `"auto"` {
		*b = BlocksAuto
		return nil
	}
	var n int
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("blocks: must be a number or \"auto\"")
	}
	*b = Blocks(n)
	return nil
}

// SSHConfig is dstack's `ssh_config`: defaults for every host, and the
// hosts. InstallDir is Berth's: where the agent's binary, state and unit
// go on each host.
type SSHConfig struct {
	User         string     `json:"user,omitempty"`
	Port         int        `json:"port,omitempty"` // 0 = 22
	IdentityFile string     `json:"identity_file,omitempty"`
	ProxyJump    *ProxyJump `json:"proxy_jump,omitempty"`
	Hosts        []SSHHost  `json:"hosts"`
	Network      string     `json:"network,omitempty"` // CIDR of the inter-node network
	InstallDir   string     `json:"install_dir,omitempty"`
}

// DefaultInstallDir is where a host's agent lives when the fleet does not say.
const DefaultInstallDir = "/opt/berth"

// ProxyJump is a bastion the server connects through.
type ProxyJump struct {
	Hostname     string `json:"hostname"`
	User         string `json:"user,omitempty"`
	Port         int    `json:"port,omitempty"`
	IdentityFile string `json:"identity_file,omitempty"`
}

// SSHHost is one host of an SSH fleet; empty fields take ssh_config's.
type SSHHost struct {
	Hostname     string     `json:"hostname"`
	User         string     `json:"user,omitempty"`
	Port         int        `json:"port,omitempty"`
	IdentityFile string     `json:"identity_file,omitempty"`
	ProxyJump    *ProxyJump `json:"proxy_jump,omitempty"`
	InternalIP   string     `json:"internal_ip,omitempty"`
	Blocks       Blocks     `json:"blocks,omitempty"`
	InstallDir   string     `json:"install_dir,omitempty"`
}

// FleetNodes is a backend fleet's size: `nodes: 2`, `nodes: 0..8`,
// `nodes: {min, target, max}`. Max nil is unlimited.
type FleetNodes struct {
	Min    int  `json:"min"`
	Target int  `json:"target"`
	Max    *int `json:"max,omitempty"`
}

// IsSSH reports whether the fleet adds existing hosts over SSH.
func (f *Fleet) IsSSH() bool { return f.SSHConfig != nil }

// Host is host i with ssh_config's defaults filled in (user, port 22,
// identity file, proxy jump, install dir, blocks).
func (f *Fleet) Host(i int) SSHHost {
	c := f.SSHConfig
	h := c.Hosts[i]
	if h.User == "" {
		h.User = c.User
	}
	if h.Port == 0 {
		h.Port = c.Port
	}
	if h.Port == 0 {
		h.Port = 22
	}
	if h.IdentityFile == "" {
		h.IdentityFile = c.IdentityFile
	}
	if h.ProxyJump == nil && c.ProxyJump != nil {
		pj := *c.ProxyJump
		h.ProxyJump = &pj
	}
	if h.ProxyJump != nil {
		pj := *h.ProxyJump
		if pj.Port == 0 {
			pj.Port = 22
		}
		if pj.User == "" {
			pj.User = h.User
		}
		if pj.IdentityFile == "" {
			pj.IdentityFile = h.IdentityFile
		}
		h.ProxyJump = &pj
	}
	if h.InstallDir == "" {
		h.InstallDir = c.InstallDir
	}
	if h.InstallDir == "" {
		h.InstallDir = DefaultInstallDir
	}
	if h.Blocks == 0 {
		h.Blocks = f.Blocks
	}
	if h.Blocks == 0 {
		h.Blocks = 1
	}
	return h
}

// fleetFields are the top-level keys of a fleet configuration.
var fleetFields = []string{
	"type", "name", "project", "placement", "blocks", "ssh_config", "env",
	"nodes", "reservation", "resources", "backends", "regions", "availability_zones",
	"instance_types", "spot_policy", "retry", "max_price", "idle_duration",
	"termination_idle_time", "termination_policy", "tags",
}

// backendFleetFields are the keys that only a backend fleet may set.
var backendFleetFields = []string{
	"nodes", "reservation", "resources", "backends", "regions", "availability_zones",
	"instance_types", "spot_policy", "retry", "max_price", "idle_duration",
	"termination_idle_time", "termination_policy", "tags",
}

// ConfigType is the `type:` of a configuration file, "" when it has none
// or cannot be read (Parse and ParseFleet then say why).
func ConfigType(data []byte) string {
	w := &walker{pos: map[string]ast.Node{}, bad: map[string]bool{}, anchors: map[string]ast.Node{}}
	root, ok := w.document(data)
	if !ok {
		return ""
	}
	m, ok := w.resolve(root).(*ast.MappingNode)
	if !ok {
		return ""
	}
	for _, mv := range m.Values {
		if k, _ := w.scalar(mv.Key); k == "type" {
			s, _ := w.scalar(mv.Value)
			return s
		}
	}
	return ""
}

// ParseFleetFile reads and parses one fleet configuration file.
func ParseFleetFile(p string) (*Fleet, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return ParseFleet(p, data)
}

// ParseFleet reads one `type: fleet` configuration. Like Parse it returns
// every problem with file, line, column and field, and a nil Fleet when
// there is any.
func ParseFleet(filename string, data []byte) (*Fleet, error) {
	w, root, err := openDocument(filename, data)
	if err != nil {
		return nil, err
	}
	f := w.fleet(root)
	if f != nil {
		ps := f.check()
		if w.overlapsBad("nodes") || w.overlapsBad("ssh_config") {
			// nodes or ssh_config was given but is wrong: say only that.
			ps = slices.DeleteFunc(ps, func(p problem) bool { return p.path == "" })
		}
		w.placeProblems(root, ps)
	}
	if len(w.errs) > 0 {
		w.errs.sortByPosition()
		return nil, w.errs
	}
	return f, nil
}

// Validate re-checks a Fleet decoded from JSON with the rules ParseFleet
// applies; problems carry the field path but no position.
func (f *Fleet) Validate() error {
	var es Errors
	for _, p := range f.check() {
		es = append(es, &Error{Field: p.path, Msg: p.msg})
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

func (w *walker) fleet(root ast.Node) *Fleet {
	entries, ok := w.mapping(root, "", fleetFields, func(key string) string {
		if key == "backend_options" {
			return "`backend_options` is not supported by Berth (no backend here takes options)"
		}
		if key == "network" {
			return "unknown field; `network` belongs under `ssh_config:`"
		}
		if s := suggest(key, fleetFields); s != "" {
			return fmt.Sprintf("unknown field; did you mean %q?", s)
		}
		return ""
	})
	if !ok {
		return nil
	}
	typ, ok := w.configType(root, entries, "fleet", func(typ string) string {
		if typ != "fleet" {
			return fmt.Sprintf("this is a %q configuration, not a fleet; `berth apply` of a fleet needs `type: fleet`", typ)
		}
		return ""
	})
	if !ok {
		return nil
	}
	f := &Fleet{Type: typ}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		w.fleetField(f, e)
	}
	return f
}

func (w *walker) fleetField(f *Fleet, e entry) {
	v, p := e.value, e.fieldPath
	str := func(dst *string) {
		if s, ok := w.str(v, p); ok {
			*dst = s
		}
	}
	switch e.key {
	case "type":
	case "name":
		str(&f.Name)
	case "project":
		str(&f.Project)
	case "placement":
		str(&f.Placement)
	case "blocks":
		f.Blocks = w.blocks(v, p)
	case "ssh_config":
		f.SSHConfig = w.sshConfig(v, p)
	case "env":
		f.Env = w.env(v, p)
	case "nodes":
		f.Nodes = w.fleetNodes(v, p)
	case "reservation":
		str(&f.Reservation)
	case "resources":
		r := w.resources(v, p)
		f.Resources = &r
	case "backends":
		f.Backends = w.strings(v, p, "[aws, gcp]")
	case "regions":
		f.Regions = w.strings(v, p, "[eu-west-1, us-west4]")
	case "availability_zones":
		f.AvailabilityZones = w.strings(v, p, "[eu-west-1a]")
	case "instance_types":
		f.InstanceTypes = w.strings(v, p, "[p4d.24xlarge]")
	case "spot_policy":
		str(&f.SpotPolicy)
	case "retry":
		f.Retry = w.retry(v, p)
	case "max_price":
		f.MaxPrice = w.price(v, p)
	case "idle_duration":
		off := DurationOff
		f.IdleDuration = w.offDuration(v, p, &off)
	case "termination_idle_time":
		off := DurationOff
		f.TerminationIdleTime = w.offDuration(v, p, &off)
	case "termination_policy":
		str(&f.TerminationPolicy)
	case "tags":
		f.Tags = w.tags(v, p)
	default:
		w.fail(e.keyNode, p, "field is known but not handled (bug in Berth)")
	}
}

// blocks reads a positive number or `auto`.
func (w *walker) blocks(n ast.Node, p string) Blocks {
	s, k := w.scalar(n)
	if k == kindString && s == "auto" {
		return BlocksAuto
	}
	if k == kindInt || (k == kindString && isDigits(s)) {
		if i, ok := w.integer(n, p); ok {
			if i < 1 {
				w.fail(n, p, "must be at least 1 or `auto`, got %d", i)
				return 0
			}
			return Blocks(i)
		}
		return 0
	}
	w.fail(n, p, "must be a number of blocks (at least 1) or `auto`, not %s", describeScalar(s, k, w.resolve(n)))
	return 0
}

// port reads a TCP port.
func (w *walker) port(n ast.Node, p string) int {
	i, ok := w.integer(n, p)
	if !ok {
		return 0
	}
	if i < 1 || i > 65535 {
		w.fail(n, p, "port %d is out of range 1..65535", i)
		return 0
	}
	return i
}

var sshConfigFields = []string{"user", "port", "identity_file", "proxy_jump", "hosts", "network", "install_dir"}

var sshHostFields = []string{"hostname", "user", "port", "identity_file", "proxy_jump", "internal_ip", "blocks", "install_dir"}

func (w *walker) sshConfig(n ast.Node, path string) *SSHConfig {
	entries, ok := w.mapping(n, path, sshConfigFields, nil)
	if !ok {
		return nil
	}
	c := &SSHConfig{}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		v, p := e.value, e.fieldPath
		switch e.key {
		case "user":
			c.User, _ = w.str(v, p)
		case "port":
			c.Port = w.port(v, p)
		case "identity_file":
			c.IdentityFile, _ = w.str(v, p)
		case "proxy_jump":
			c.ProxyJump = w.proxyJump(v, p)
		case "network":
			c.Network, _ = w.str(v, p)
		case "install_dir":
			c.InstallDir, _ = w.str(v, p)
		case "hosts":
			c.Hosts = items(w, v, p, "[gpu-node01.example.com, {hostname: 10.0.0.2, user: ubuntu}]", w.sshHost)
		}
	}
	return c
}

func (w *walker) sshHost(n ast.Node, path string) (SSHHost, bool) {
	if s, k := w.scalar(n); k == kindString {
		return SSHHost{Hostname: s}, true
	}
	entries, ok := w.mapping(n, path, sshHostFields, nil)
	if !ok {
		return SSHHost{}, false
	}
	var h SSHHost
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		v, p := e.value, e.fieldPath
		switch e.key {
		case "hostname":
			h.Hostname, _ = w.str(v, p)
		case "user":
			h.User, _ = w.str(v, p)
		case "port":
			h.Port = w.port(v, p)
		case "identity_file":
			h.IdentityFile, _ = w.str(v, p)
		case "proxy_jump":
			h.ProxyJump = w.proxyJump(v, p)
		case "internal_ip":
			h.InternalIP, _ = w.str(v, p)
		case "blocks":
			h.Blocks = w.blocks(v, p)
		case "install_dir":
			h.InstallDir, _ = w.str(v, p)
		}
	}
	return h, true
}

// proxyJump reads `{hostname, user, port, identity_file}` or the string
// form `[user@]hostname[:port]`.
func (w *walker) proxyJump(n ast.Node, path string) *ProxyJump {
	if s, k := w.scalar(n); k == kindString {
		pj, msg := ParseProxyJump(s)
		if msg != "" {
			w.fail(n, path, "%s", msg)
			return nil
		}
		return pj
	}
	entries, ok := w.mapping(n, path, []string{"hostname", "user", "port", "identity_file"}, nil)
	if !ok {
		return nil
	}
	pj := &ProxyJump{}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		v, p := e.value, e.fieldPath
		switch e.key {
		case "hostname":
			pj.Hostname, _ = w.str(v, p)
		case "user":
			pj.User, _ = w.str(v, p)
		case "port":
			pj.Port = w.port(v, p)
		case "identity_file":
			pj.IdentityFile, _ = w.str(v, p)
		}
	}
	return pj
}

// ParseProxyJump reads `[user@]hostname[:port]`; the message is empty when
// it is valid.
func ParseProxyJump(s string) (*ProxyJump, string) {
	pj := &ProxyJump{}
	rest := strings.TrimSpace(s)
	if u, h, ok := strings.Cut(rest, "@"); ok {
		pj.User, rest = u, h
	}
	if h, portText, ok := strings.Cut(rest, ":"); ok && !strings.Contains(portText, ":") {
		port, err := strconv.Atoi(portText)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Sprintf("invalid port %q in proxy_jump %q (expected [user@]hostname[:port])", portText, s)
		}
		pj.Port, rest = port, h
	}
	if rest == "" || strings.ContainsAny(rest, " /@") {
		return nil, fmt.Sprintf("invalid proxy_jump %q (expected [user@]hostname[:port], or a mapping with hostname, user, port and identity_file)", s)
	}
	pj.Hostname = rest
	return pj, ""
}

// fleetNodes reads `N`, `"a..b"` (either end may be left out) or
// `{min, target, max}`.
func (w *walker) fleetNodes(n ast.Node, path string) *FleetNodes {
	if _, isMap := w.resolve(n).(*ast.MappingNode); isMap {
		entries, ok := w.mapping(n, path, []string{"min", "target", "max"}, nil)
		if !ok {
			return nil
		}
		nodes := &FleetNodes{}
		hasTarget := false
		for _, e := range entries {
			if w.isNull(e.value) {
				continue
			}
			i, ok := w.integer(e.value, e.fieldPath)
			if !ok {
				continue
			}
			switch e.key {
			case "min":
				nodes.Min = i
			case "target":
				nodes.Target, hasTarget = i, true
			case "max":
				nodes.Max = &i
			}
		}
		if !hasTarget {
			nodes.Target = nodes.Min
		}
		return nodes
	}
	s, k := w.scalar(n)
	if k == kindInt {
		i, ok := w.integer(n, path)
		if !ok {
			return nil
		}
		return &FleetNodes{Min: i, Target: i, Max: &i}
	}
	if k == kindString {
		nodes, msg := ParseFleetNodes(s)
		if msg != "" {
			w.fail(n, path, "%s", msg)
			return nil
		}
		return nodes
	}
	w.fail(n, path, "must be a number, a range such as 0..8, or a mapping with min, target and max, not %s", describeScalar(s, k, w.resolve(n)))
	return nil
}

// ParseFleetNodes reads `N` or `a..b` (`..b` is from 0, `a..` is
// unlimited); the message is empty when it is valid.
func ParseFleetNodes(s string) (*FleetNodes, string) {
	s = strings.ReplaceAll(s, " ", "")
	num := func(t string) (int, bool) {
		if !isDigits(t) || len(t) > 9 {
			return 0, false
		}
		i, err := strconv.Atoi(t)
		return i, err == nil
	}
	lo, hi, isRange := strings.Cut(s, "..")
	if !isRange {
		i, ok := num(s)
		if !ok {
			return nil, fmt.Sprintf("invalid node count %q (expected a number such as 2 or a range such as 0..8)", s)
		}
		return &FleetNodes{Min: i, Target: i, Max: &i}, ""
	}
	nodes := &FleetNodes{}
	if lo != "" {
		i, ok := num(lo)
		if !ok {
			return nil, fmt.Sprintf("invalid minimum %q in node range %q (expected e.g. 0..8)", lo, s)
		}
		nodes.Min, nodes.Target = i, i
	}
	if hi != "" {
		i, ok := num(hi)
		if !ok {
			return nil, fmt.Sprintf("invalid maximum %q in node range %q (expected e.g. 0..8)", hi, s)
		}
		nodes.Max = &i
	}
	return nodes, ""
}

// check is every semantic rule of a fleet, with full field paths.
func (f *Fleet) check() []problem {
	var ps []problem
	add := func(p, format string, args ...any) {
		ps = append(ps, problem{p, fmt.Sprintf(format, args...)})
	}
	enum := func(p, v string, allowed []string) {
		if v != "" {
			if m := checkEnum(v, allowed); m != "" {
				add(p, "%s", m)
			}
		}
	}
	if f.Type != "" && f.Type != "fleet" {
		add("type", "must be \"fleet\", got %q", f.Type)
	}
	if f.Name != "" && !runName().MatchString(f.Name) {
		add("name", "%q is not a valid fleet name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter", f.Name)
	}
	if f.Project != "" && !qosName().MatchString(f.Project) {
		add("project", "%q is not a project name: use letters, digits, '-', '_' and '.' (at most 64)", f.Project)
	}
	enum("placement", f.Placement, Placements)
	if f.Blocks < BlocksAuto {
		add("blocks", "must be at least 1 or `auto`, got %d", f.Blocks)
	}
	for _, p := range f.Env.check() {
		add("env"+p.path, "%s", p.msg)
	}

	var backend []string
	for _, k := range backendFleetFields {
		if f.setBackendField(k) {
			backend = append(backend, k)
		}
	}
	switch {
	case f.SSHConfig != nil && len(backend) > 0:
		for _, k := range backend {
			add(k, "only a backend fleet sets `%s`; this fleet has `ssh_config` (a fleet is either SSH hosts or backend instances, not both)", k)
		}
	case f.SSHConfig == nil && f.Nodes == nil:
		add("", "a fleet needs `ssh_config` (existing hosts reached over SSH) or `nodes` (instances created by backends)")
	}
	if c := f.SSHConfig; c != nil {
		ps = append(ps, f.checkSSH()...)
	}
	if n := f.Nodes; n != nil {
		switch {
		case n.Min < 0:
			add("nodes.min", "must not be negative, got %d", n.Min)
		case n.Target < n.Min:
			add("nodes.target", "must not be less than min (%d), got %d", n.Min, n.Target)
		case n.Max != nil && *n.Max < n.Min:
			add("nodes.max", "must not be less than min (%d), got %d", n.Min, *n.Max)
		case n.Max != nil && *n.Max < n.Target:
			add("nodes.max", "must not be less than target (%d), got %d", n.Target, *n.Max)
		case n.Max != nil && *n.Max > maxCount:
			add("nodes.max", "must be at most %d, got %d", maxCount, *n.Max)
		case n.Target > maxCount:
			add("nodes.target", "must be at most %d, got %d", maxCount, n.Target)
		}
	}
	if f.Resources != nil {
		for _, p := range f.Resources.check() {
			add("resources."+p.path, "%s", p.msg)
		}
	}
	enum("spot_policy", f.SpotPolicy, SpotPolicies)
	enum("termination_policy", f.TerminationPolicy, TerminationPolicies)
	if f.MaxPrice != nil && *f.MaxPrice <= 0 {
		add("max_price", "must be more than 0, got %v", *f.MaxPrice)
	}
	for k, d := range map[string]*Duration{"idle_duration": f.IdleDuration, "termination_idle_time": f.TerminationIdleTime} {
		if d != nil {
			if m := checkDuration(*d, true); m != "" {
				add(k, "%s", m)
			}
		}
	}
	if f.Retry != nil {
		for i, ev := range f.Retry.OnEvents {
			if m := checkEnum(ev, RetryEvents); m != "" {
				add(fmt.Sprintf("retry.on_events[%d]", i), "%s", m)
			}
		}
	}
	return ps
}

func (f *Fleet) setBackendField(k string) bool {
	switch k {
	case "nodes":
		return f.Nodes != nil
	case "reservation":
		return f.Reservation != ""
	case "resources":
		return f.Resources != nil
	case "backends":
		return len(f.Backends) > 0
	case "regions":
		return len(f.Regions) > 0
	case "availability_zones":
		return len(f.AvailabilityZones) > 0
	case "instance_types":
		return len(f.InstanceTypes) > 0
	case "spot_policy":
		return f.SpotPolicy != ""
	case "retry":
		return f.Retry != nil
	case "max_price":
		return f.MaxPrice != nil
	case "idle_duration":
		return f.IdleDuration != nil
	case "termination_idle_time":
		return f.TerminationIdleTime != nil
	case "termination_policy":
		return f.TerminationPolicy != ""
	case "tags":
		return len(f.Tags) > 0
	}
	return false
}

func (f *Fleet) checkSSH() []problem {
	var ps []problem
	add := func(p, format string, args ...any) {
		ps = append(ps, problem{p, fmt.Sprintf(format, args...)})
	}
	c := f.SSHConfig
	checkPJ := func(p string, pj *ProxyJump) {
		if pj != nil && strings.TrimSpace(pj.Hostname) == "" {
			add(p+".hostname", "required")
		}
	}
	checkPJ("ssh_config.proxy_jump", c.ProxyJump)
	if c.Network != "" {
		if pfx, err := netip.ParsePrefix(c.Network); err != nil {
			add("ssh_config.network", "%q is not a network: give an address and a prefix length, e.g. 10.0.0.0/24", c.Network)
		} else if !pfx.Addr().IsPrivate() {
			add("ssh_config.network", "%q is a public network; the inter-node network must be private (10/8, 172.16/12, 192.168/16, fc00::/7)", c.Network)
		}
	}
	if c.InstallDir != "" && !path.IsAbs(c.InstallDir) {
		add("ssh_config.install_dir", "must be an absolute path, got %q", c.InstallDir)
	}
	if len(c.Hosts) == 0 {
		add("ssh_config.hosts", "required: list the hosts to add, e.g. [10.0.0.2, 10.0.0.3]")
	}
	seen := map[string]int{}
	for i := range c.Hosts {
		raw := c.Hosts[i]
		p := fmt.Sprintf("ssh_config.hosts[%d]", i)
		if strings.TrimSpace(raw.Hostname) == "" {
			add(p+".hostname", "required")
			continue
		}
		h := f.Host(i)
		key := fmt.Sprintf("%s:%d", h.Hostname, h.Port)
		if j, dup := seen[key]; dup {
			add(p+".hostname", "host %s is listed twice (first at ssh_config.hosts[%d])", key, j)
		}
		seen[key] = i
		switch {
		case h.User == "" && h.IdentityFile == "":
			add(p, "no user to log in as and no private key: set `user` and `identity_file` here or in `ssh_config`")
		case h.User == "":
			add(p, "no user to log in as: set `user` here or in `ssh_config`")
		case h.IdentityFile == "":
			add(p, "no private key: set `identity_file` here or in `ssh_config`")
		}
		checkPJ(p+".proxy_jump", raw.ProxyJump)
		if raw.InternalIP != "" {
			if a, err := netip.ParseAddr(raw.InternalIP); err != nil {
				add(p+".internal_ip", "%q is not an IP address", raw.InternalIP)
			} else if !a.IsPrivate() {
				add(p+".internal_ip", "%q is not a private address", raw.InternalIP)
			} else if pfx, err := netip.ParsePrefix(c.Network); err == nil && !pfx.Contains(a) {
				add(p+".internal_ip", "%s is outside ssh_config.network %s", raw.InternalIP, c.Network)
			}
		}
		if raw.InstallDir != "" && !path.IsAbs(raw.InstallDir) {
			add(p+".install_dir", "must be an absolute path, got %q", raw.InstallDir)
		}
	}
	return ps
}
