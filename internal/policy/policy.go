// Package policy reads the server's scheduling policy file: QOS, limits per
// user, project and QOS, the fairshare tree, fleets as partitions (names,
// tier, blocks, time limit) and the switch topology. It turns the file into
// the values internal/sched takes, and refuses a bad file with its name,
// line, field and what to write instead.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/spec"
)

// File is the policy file as written.
type File struct {
	DefaultQOS string                   `yaml:"default_qos"`
	QOS        map[string]QOSConf       `yaml:"qos"`
	Projects   map[string]ProjectConf   `yaml:"projects"`
	Users      map[string]UserConf      `yaml:"users"`
	Fleets     map[string]FleetConf     `yaml:"fleets"`
	Partitions map[string]PartitionConf `yaml:"partitions"`
	Topology   []SwitchConf             `yaml:"topology"`
	// BillingWeights is Slurm's TRESBillingWeights for fleets that set
	// none (billing.go).
	BillingWeights string `yaml:"billing_weights"`
	// PrivateData is what members of a project do not see of each
	// other's runs: jobs, logs, or none (berth server --private-data;
	// the file, when it says, wins).
	PrivateData []string      `yaml:"private_data"`
	Providers   ProvidersConf `yaml:"providers"` // cloud.go
}

// PartitionConf is a partition's state (Slurm's PartitionName=X
// State=UP|DOWN): the partition is a fleet's name, a name in a fleet's
// partitions, or DefaultPartition.
type PartitionConf struct {
	State string `yaml:"state"`
}

// DefaultPartition is the partition of a run that names none: it holds
// every node.
const DefaultPartition = "berth"

// LimitsConf bounds what runs under one name may hold at once (jobs, cpu,
// memory, gpu, gpu_types), ask for (wall), and have queued (submit).
type LimitsConf struct {
	Jobs     int            `yaml:"jobs"`
	Submit   int            `yaml:"submit"`
	CPU      int            `yaml:"cpu"`
	Memory   string         `yaml:"memory"`
	GPU      int            `yaml:"gpu"`
	GPUTypes map[string]int `yaml:"gpu_types"`
	Wall     string         `yaml:"wall"`
}

// QOSConf is one quality of service.
type QOSConf struct {
	Priority    int         `yaml:"priority"`
	Preempt     []string    `yaml:"preempt"`
	PreemptMode string      `yaml:"preempt_mode"`
	Limits      *LimitsConf `yaml:"limits"`      // all runs of the QOS together
	UserLimits  *LimitsConf `yaml:"user_limits"` // each user's runs of the QOS
}

// ProjectConf is a project's fairshare and limits.
type ProjectConf struct {
	Shares *int        `yaml:"shares"`
	Limits *LimitsConf `yaml:"limits"`
	// UserLimits bound each user's runs in the project (Slurm: an
	// account's Max* limits, which its users' associations inherit).
	UserLimits *LimitsConf                `yaml:"user_limits"`
	Users      map[string]ProjectUserConf `yaml:"users"`
}

// ProjectUserConf is a user's share and limits within a project (Slurm:
// the user's association with the account).
type ProjectUserConf struct {
	Shares *int        `yaml:"shares"`
	Limits *LimitsConf `yaml:"limits"`
}

// UserConf is a user's limits over all projects.
type UserConf struct {
	Limits *LimitsConf `yaml:"limits"`
}

// FleetConf describes a fleet as a partition.
type FleetConf struct {
	Partitions []string `yaml:"partitions"`
	Tier       int      `yaml:"tier"`
	Blocks     int      `yaml:"blocks"`
	MaxWall    string   `yaml:"max_wall"`
	// BillingWeights is Slurm's TRESBillingWeights for this fleet's nodes.
	BillingWeights string `yaml:"billing_weights"`
	// Backend makes the fleet's nodes come from providers (cloud.go).
	Backend *BackendFleetConf `yaml:"backend"`
}

// SwitchConf is one line of Slurm's topology.conf.
type SwitchConf struct {
	Switch   string   `yaml:"switch"`
	Nodes    []string `yaml:"nodes"`
	Switches []string `yaml:"switches"`
}

// Policy is a checked policy file, in the scheduler's terms.
type Policy struct {
	QOS        map[string]sched.QOS
	DefaultQOS string
	Limits     map[sched.LimitKey]sched.Limits
	// Submit bounds how many active (pending or running) runs a key may
	// have; a submission past it is refused.
	Submit   map[sched.LimitKey]int
	Shares   *sched.Shares
	Topology *sched.Topology
	Fleets   map[string]Fleet
	// Down are the partitions set DOWN: runs that name only those (or
	// name none, when DefaultPartition is down) queue but do not start.
	Down map[string]bool
	// Projects are the projects the file names (Slurm's accounts), each
	// with the users it lists, sorted; a project or user may be listed
	// with no settings of its own.
	Projects map[string][]string
	// Billing is the default TRESBillingWeights (nil: bill CPUs).
	Billing *BillingWeights
	// PrivateData is what the file says of private data (nil: it says
	// nothing, the server's flag holds).
	PrivateData *PrivateData
	// Docker is the Docker provider's configuration (nil: none; cloud.go).
	Docker *Docker
}

// PrivateData is Slurm's PrivateData, as the policy file sets it.
type PrivateData struct{ Jobs, Logs bool }

// Fleet is a fleet's partition settings.
type Fleet struct {
	Partitions []string
	Tier       int
	Blocks     int
	MaxWall    time.Duration
	Billing    *BillingWeights
	// Backend: the fleet's nodes come from providers (nil: joined by hand).
	Backend *BackendFleet
}

// yamlPos splits the library's "[3:5] message" form.
var yamlPos = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)^\[(\d+):(\d+)\] (.*)$`) })

// Empty is the policy with no file: one implicit QOS "normal", no limits.
func Empty() *Policy {
	return &Policy{QOS: map[string]sched.QOS{}, Limits: map[sched.LimitKey]sched.Limits{}, Submit: map[sched.LimitKey]int{}, Fleets: map[string]Fleet{}, Projects: map[string][]string{}}
}

// Load reads a policy file.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(path, data)
}

// Parse checks a policy file's text; errors read file:line:col: field: message.
func Parse(name string, data []byte) (*Policy, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField())
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // empty: no policy
		msg := strings.TrimSpace(yaml.FormatError(err, false, false))
		if m := yamlPos().FindStringSubmatch(msg); m != nil {
			return nil, fmt.Errorf("%s:%s:%s: %s", name, m[1], m[2], m[3])
		}
		return nil, fmt.Errorf("%s: %s", name, msg)
	}
	c := &checker{name: name, data: data}
	p := c.compile(&f)
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return p, nil
}

type checker struct {
	name string
	data []byte
	errs []error
}

// fail records an error at the YAML path (as "$.qos.high.preempt_mode").
func (c *checker) fail(path, format string, args ...any) {
	pos := ""
	if p, err := yaml.PathString(path); err == nil {
		if node, err := p.ReadNode(bytes.NewReader(c.data)); err == nil && node != nil {
			t := node.GetToken()
			pos = fmt.Sprintf(":%d:%d", t.Position.Line, t.Position.Column)
		}
	}
	field := strings.TrimPrefix(path, "$.")
	c.errs = append(c.errs, fmt.Errorf("%s%s: %s: %s", c.name, pos, field, fmt.Sprintf(format, args...)))
}

func (c *checker) compile(f *File) *Policy {
	p := Empty()
	for _, name := range sorted(f.QOS) {
		q := f.QOS[name]
		at := "$.qos." + name
		mode := sched.Requeue
		switch q.PreemptMode {
		case "", "requeue":
		case "cancel":
			mode = sched.Cancel
		default:
			c.fail(at+".preempt_mode", "want requeue or cancel, got %q", q.PreemptMode)
		}
		for i, other := range q.Preempt {
			if _, ok := f.QOS[other]; !ok {
				c.fail(fmt.Sprintf("%s.preempt[%d]", at, i), "unknown QOS %q (defined: %s)", other, strings.Join(sorted(f.QOS), ", "))
			} else if other == name {
				c.fail(fmt.Sprintf("%s.preempt[%d]", at, i), "a QOS cannot preempt itself")
			}
		}
		p.QOS[name] = sched.QOS{Priority: q.Priority, Preempt: q.Preempt, Mode: mode}
		c.limits(p, sched.LimitKey{Scope: sched.ScopeQOS, Name: name}, q.Limits, at+".limits")
		c.limits(p, sched.LimitKey{Scope: sched.ScopeQOSUser, Name: name}, q.UserLimits, at+".user_limits")
	}
	p.DefaultQOS = f.DefaultQOS
	if f.DefaultQOS != "" {
		if _, ok := f.QOS[f.DefaultQOS]; !ok {
			c.fail("$.default_qos", "unknown QOS %q (defined: %s)", f.DefaultQOS, strings.Join(sorted(f.QOS), ", "))
		}
	} else if _, ok := f.QOS["normal"]; ok {
		p.DefaultQOS = "normal"
	}
	if len(f.QOS) > 0 && p.DefaultQOS == "" {
		c.fail("$.qos", "several QOS and none is the default: add `default_qos:` or a QOS named normal")
	}
	shares := &sched.Shares{Projects: map[string]int{}, Users: map[string]map[string]int{}}
	for _, name := range sorted(f.Projects) {
		pc := f.Projects[name]
		at := "$.projects." + name
		p.Projects[name] = sorted(pc.Users)
		if pc.Shares != nil {
			if *pc.Shares < 0 {
				c.fail(at+".shares", "must be 0 or more, got %d", *pc.Shares)
			}
			shares.Projects[name] = *pc.Shares
		}
		for _, u := range sorted(pc.Users) {
			if s := pc.Users[u].Shares; s != nil {
				if *s < 0 {
					c.fail(at+".users."+u+".shares", "must be 0 or more, got %d", *s)
				}
				if shares.Users[name] == nil {
					shares.Users[name] = map[string]int{}
				}
				shares.Users[name][u] = *s
			}
			c.limits(p, sched.ProjectUserKey(name, u), pc.Users[u].Limits, at+".users."+u+".limits")
		}
		c.limits(p, sched.LimitKey{Scope: sched.ScopeProject, Name: name}, pc.Limits, at+".limits")
		c.limits(p, sched.LimitKey{Scope: sched.ScopeProjectUser, Name: name}, pc.UserLimits, at+".user_limits")
	}
	if len(shares.Projects) > 0 || len(shares.Users) > 0 {
		p.Shares = shares
	}
	for _, name := range sorted(f.Users) {
		c.limits(p, sched.LimitKey{Scope: sched.ScopeUser, Name: name}, f.Users[name].Limits, "$.users."+name+".limits")
	}
	for _, name := range sorted(f.Fleets) {
		fc := f.Fleets[name]
		at := "$.fleets." + name
		fl := Fleet{Partitions: fc.Partitions, Tier: fc.Tier, Blocks: fc.Blocks}
		if fc.Tier < 0 {
			c.fail(at+".tier", "must be 0 or more, got %d", fc.Tier)
		}
		if fc.Blocks < 0 {
			c.fail(at+".blocks", "must be 0 or more, got %d", fc.Blocks)
		}
		if fc.MaxWall != "" {
			fl.MaxWall = c.duration(fc.MaxWall, at+".max_wall")
		}
		fl.Billing = c.billing(fc.BillingWeights, at+".billing_weights")
		for i, part := range fc.Partitions {
			if part == "" {
				c.fail(fmt.Sprintf("%s.partitions[%d]", at, i), "empty partition name")
			}
		}
		p.Fleets[name] = fl
	}
	c.cloud(f, p)
	for _, name := range sorted(f.Partitions) {
		switch st := strings.ToLower(f.Partitions[name].State); st {
		case "", "up":
		case "down":
			if p.Down == nil {
				p.Down = map[string]bool{}
			}
			p.Down[name] = true
		default:
			c.fail("$.partitions."+name+".state", "must be up or down, got %q", f.Partitions[name].State)
		}
	}
	p.Billing = c.billing(f.BillingWeights, "$.billing_weights")
	if f.PrivateData != nil {
		pd := &PrivateData{}
		for i, v := range f.PrivateData {
			switch strings.ToLower(v) {
			case "jobs":
				pd.Jobs = true
			case "logs":
				pd.Logs = true
			case "none":
			default:
				c.fail(fmt.Sprintf("$.private_data[%d]", i), "want jobs, logs or none, got %q", v)
			}
		}
		p.PrivateData = pd
	}
	if len(f.Topology) > 0 {
		var sw []sched.Switch
		for i, s := range f.Topology {
			if s.Switch == "" {
				c.fail(fmt.Sprintf("$.topology[%d]", i), "each entry needs `switch: NAME` and `nodes:` or `switches:`")
			}
			nodes, err := expand(s.Nodes)
			if err != nil {
				c.fail(fmt.Sprintf("$.topology[%d].nodes", i), "%v", err)
			}
			switches, err := expand(s.Switches)
			if err != nil {
				c.fail(fmt.Sprintf("$.topology[%d].switches", i), "%v", err)
			}
			sw = append(sw, sched.Switch{Name: s.Switch, Nodes: nodes, Switches: switches})
		}
		t, err := sched.NewTopology(sw)
		if err != nil {
			c.fail("$.topology", "%s", strings.TrimPrefix(err.Error(), "sched: topology: "))
		}
		p.Topology = t
	}
	return p
}

func (c *checker) limits(p *Policy, key sched.LimitKey, l *LimitsConf, at string) {
	if l == nil {
		return
	}
	var out sched.Limits
	nonNeg := func(v int, field string) int {
		if v < 0 {
			c.fail(at+"."+field, "must be 0 (no limit) or more, got %d", v)
		}
		return v
	}
	out.Jobs = nonNeg(l.Jobs, "jobs")
	out.TRES.CPUs = nonNeg(l.CPU, "cpu")
	out.TRES.GPUs = nonNeg(l.GPU, "gpu")
	if l.Memory != "" {
		b, err := spec.ParseBytes(l.Memory)
		if err != nil {
			c.fail(at+".memory", "%v (write e.g. 512GB)", err)
		}
		out.TRES.Memory = sched.Bytes(b)
	}
	for typ, n := range l.GPUTypes {
		if out.TRES.GPUTypes == nil {
			out.TRES.GPUTypes = map[string]int{}
		}
		out.TRES.GPUTypes[strings.ToLower(typ)] = nonNeg(n, "gpu_types."+typ)
	}
	if l.Wall != "" {
		out.Wall = c.duration(l.Wall, at+".wall")
	}
	if s := nonNeg(l.Submit, "submit"); s > 0 {
		p.Submit[key] = s
	}
	p.Limits[key] = out
}

func (c *checker) billing(s, at string) *BillingWeights {
	if s == "" {
		return nil
	}
	w, err := ParseBillingWeights(s)
	if err != nil {
		c.fail(at, "%v", err)
		return nil
	}
	return w
}

func (c *checker) duration(s, at string) time.Duration {
	d, err := spec.ParseDuration(s)
	if err != nil || d <= 0 {
		c.fail(at, "want a duration such as 30m, 4h or 2d, got %q", s)
		return 0
	}
	return time.Duration(d) * time.Second
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// QOSOf is the QOS a run asking for name gets, or an error naming the
// QOS that exist.
func (p *Policy) QOSOf(name string) (string, error) {
	if name == "" {
		return p.DefaultQOS, nil
	}
	if len(p.QOS) == 0 {
		if name == "normal" {
			return "", nil
		}
		return "", fmt.Errorf("unknown QOS %q: this server defines none (Slurm: Invalid qos specification)", name)
	}
	if _, ok := p.QOS[name]; !ok {
		return "", fmt.Errorf("unknown QOS %q (defined: %s; Slurm: Invalid qos specification)", name, strings.Join(sorted(p.QOS), ", "))
	}
	return name, nil
}

// ResolveFleets turns the fleet or partition names a run gives into fleet
// names: a name matches the fleet of that name and every fleet tagged with
// it as a partition. Names the policy does not know are kept (an agent may
// bring a fleet the file does not describe).
func (p *Policy) ResolveFleets(names []string) []string {
	var out []string
	for _, n := range names {
		matched := false
		for _, f := range sorted(p.Fleets) {
			if f == n || slices.Contains(p.Fleets[f].Partitions, n) {
				out = append(out, f)
				matched = true
			}
		}
		if !matched {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// UpPartitions are the names among those a run gives whose partition is
// not down, and whether the run may start at all: a run that names only
// down partitions, or none while DefaultPartition is down, may not
// (Slurm's PartitionDown).
func (p *Policy) UpPartitions(names []string) ([]string, bool) {
	if len(p.Down) == 0 {
		return names, true
	}
	if len(names) == 0 {
		return nil, !p.Down[DefaultPartition]
	}
	var up []string
	for _, n := range names {
		if !p.Down[n] {
			up = append(up, n)
		}
	}
	return up, len(up) > 0
}

// Tier is the highest tier among fleets.
func (p *Policy) Tier(fleets []string) int {
	t := 0
	for _, f := range fleets {
		t = max(t, p.Fleets[f].Tier)
	}
	return t
}

// expand reads node and switch names as Slurm's topology.conf writes them:
// each item may be a hostlist ("n[01-16]", "rack[1-2]-sw").
func expand(items []string) ([]string, error) {
	var out []string
	for _, it := range items {
		names, err := slurm.ExpandHostlist(it)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}
