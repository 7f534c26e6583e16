package spec

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
)

// Validate re-checks a Task that was built in code or decoded from JSON, with
// the same rules Parse applies, and within DefaultLimits (ValidateLimits
// for others). Problems name the field path but carry no line numbers.
// Zero values of defaulted fields (Type, Nodes, the CPU request) are
// accepted; Normalize fills them.
func (t *Task) Validate() error { return t.ValidateLimits(DefaultLimits) }

// runName is dstack's rule for run names. The patterns of this package are
// compiled on first use, not at start: their counted repetitions make large
// programs (about 190 KB and most of a millisecond together), and every
// process of the binary would pay for them, a job's shim included.
var runName = lazyRegexp(`^[a-z][a-z0-9-]{1,40}$`)

// qosName is what a QOS may be called (Slurm allows about the same).
var qosName = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// lazyRegexp compiles pattern once, when first called.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// check is every semantic rule of the schema, in schema order, with full
// field paths. Parse runs it after decoding and places each problem at the
// YAML node of its path.
func (t *Task) check(l Limits) []problem {
	var ps []problem
	add := func(path, format string, args ...any) {
		ps = append(ps, problem{path, fmt.Sprintf(format, args...)})
	}
	enum := func(path, v string, allowed []string) {
		if v != "" {
			if m := checkEnum(v, allowed); m != "" {
				add(path, "%s", m)
			}
		}
	}
	duration := func(path string, d Duration, offAllowed bool) {
		if m := checkDuration(d, offAllowed); m != "" {
			add(path, "%s", m)
		}
	}
	nonEmpty := func(path string, list []string) {
		for i, s := range list {
			if strings.TrimSpace(s) == "" {
				add(fmt.Sprintf("%s[%d]", path, i), "empty value")
			}
		}
	}

	if t.Type != "" && t.Type != "task" && t.Type != "dev-environment" && t.Type != "service" {
		add("type", "%s", unsupportedType(t.Type))
	}
	t.checkDevEnvironment(add) // devenv.go
	t.checkService(add)        // service.go
	if name, ok := t.nameAsRun(); t.Name != "" && ok && !runName().MatchString(name) {
		if name != t.Name {
			add("name", "%q is not a valid run name for the tasks of this array (it gives %q): use 2 to 41 lowercase letters, digits and hyphens, starting with a letter", t.Name, name)
		} else {
			add("name", "%q is not a valid run name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter", t.Name)
		}
	}
	if t.Nodes < 0 {
		add("nodes", "must be at least 1, got %d", t.Nodes)
	} else if t.Nodes > maxCount {
		add("nodes", "must be at most %d, got %d", maxCount, t.Nodes)
	}
	enum("startup_order", t.StartupOrder, StartupOrders)
	enum("stop_criteria", t.StopCriteria, StopCriteria)

	if t.Python != "" {
		if m := checkEnum(t.Python, PythonVersions); m != "" {
			add("python", "unsupported version %q (supported: %s; quote it, e.g. \"3.10\")", t.Python, strings.Join(PythonVersions, ", "))
		}
		if t.Image != "" {
			add("python", "`python` and `image` are mutually exclusive: the image brings its own Python")
		}
	}
	if t.Nvcc && t.Image != "" {
		add("nvcc", "`nvcc` and `image` are mutually exclusive")
	}
	if t.Docker {
		for _, other := range []struct {
			name string
			set  bool
		}{{"image", t.Image != ""}, {"python", t.Python != ""}, {"nvcc", t.Nvcc}} {
			if other.set {
				add("docker", "`docker` and `%s` are mutually exclusive", other.name)
			}
		}
	}
	if t.User != "" {
		u, g, hasGroup := strings.Cut(t.User, ":")
		if u == "" || (hasGroup && g == "") || strings.ContainsAny(t.User, " \t\n") || strings.Count(t.User, ":") > 1 {
			add("user", "invalid user %q (expected user_name_or_id[:group_name_or_id], e.g. ubuntu or 1000:1000)", t.User)
		}
	}
	if t.Shell != "" && t.Shell != "sh" && t.Shell != "bash" && !strings.HasPrefix(t.Shell, "/") {
		add("shell", "invalid shell %q (expected sh, bash or an absolute path such as /usr/bin/zsh)", t.Shell)
	}
	if a := t.RegistryAuth; a != nil {
		if a.Username == "" {
			add("registry_auth.username", "required")
		}
		if a.Password == "" {
			add("registry_auth.password", "required")
		}
	}
	t.checkSecrets(add)

	if len(t.Repos) > 1 {
		add("repos", "at most one repo is supported, got %d", len(t.Repos))
	}
	for i, r := range t.Repos {
		p := fmt.Sprintf("repos[%d]", i)
		switch {
		case r.LocalPath == "" && r.URL == "":
			add(p, "either `local_path` or `url` is required")
		case r.LocalPath != "" && r.URL != "":
			add(p, "`local_path` and `url` are mutually exclusive")
		}
		enum(p+".if_exists", r.IfExists, RepoIfExists)
		r.checkURL(p, add) // repos.go
		r.Archive.check(p+".archive", add)
	}
	for i, f := range t.Files {
		p := fmt.Sprintf("files[%d]", i)
		f.Archive.check(p+".archive", add)
		if f.LocalPath == "" {
			add(p+".local_path", "required")
		}
		if f.Path == "" {
			add(p+".path", "required")
		}
	}
	for _, p := range t.Env.check() {
		add("env"+p.path, "%s", p.msg)
	}
	for i, c := range t.Commands {
		if strings.TrimSpace(c) == "" {
			add(fmt.Sprintf("commands[%d]", i), "empty command")
		}
	}
	if len(t.Commands) == 0 && t.Image == "" && !t.IsDevEnvironment() {
		if len(t.Groups) == 0 {
			add("commands", "required: give `commands`, or an `image` whose entrypoint does the work")
		}
		for i, g := range t.Groups {
			if len(g.Commands) == 0 {
				add(fmt.Sprintf("groups[%d].commands", i), "required: give `commands` to this group or to the run, or an `image` whose entrypoint does the work")
			}
		}
	}
	checkPorts := func(prefix string, ports []PortMapping) {
		for i, pm := range ports {
			p := fmt.Sprintf("%sports[%d]", prefix, i)
			if pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
				add(p, "container port %d is out of range 1..65535", pm.ContainerPort)
			}
			if pm.LocalPort < 0 || pm.LocalPort > 65535 {
				add(p, "local port %d is out of range 1..65535", pm.LocalPort)
			}
		}
	}
	checkPorts("", t.Ports)
	for i, g := range t.Groups {
		checkPorts(fmt.Sprintf("groups[%d].", i), g.Ports)
	}
	for _, p := range t.Resources.check() {
		add("resources."+p.path, "%s", p.msg)
	}
	for i, v := range t.Volumes {
		p := fmt.Sprintf("volumes[%d]", i)
		switch {
		case v.Name == "" && len(v.Names) == 0 && v.InstancePath == "":
			add(p, "either `name` (a network volume) or `instance_path` (a host directory) is required")
		case (v.Name != "" || len(v.Names) > 0) && v.InstancePath != "":
			add(p, "`name` and `instance_path` are mutually exclusive")
		case v.Name != "" && len(v.Names) > 0:
			add(p+".names", "`name` and `names` are mutually exclusive (write `name: [a, b]` for any one of several)")
		}
		for j, n := range v.NetworkNames() {
			if !volumeRefName().MatchString(n) {
				np := p + ".name"
				if len(v.Names) > 0 {
					np = fmt.Sprintf("%s.name[%d]", p, j)
				}
				add(np, "%q is not a volume name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter", n)
			}
		}
		if v.Optional && v.InstancePath == "" {
			add(p+".optional", "only an instance volume (`instance_path`) may be optional")
		}
		if v.InstancePath != "" && !strings.HasPrefix(v.InstancePath, "/") && !strings.HasPrefix(v.InstancePath, "~") {
			add(p+".instance_path", "must be an absolute path, got %q", v.InstancePath)
		}
		if !strings.HasPrefix(v.Path, "/") {
			add(p+".path", "must be an absolute path in the container, got %q", v.Path)
		}
	}

	if t.Nice < -MaxNice || t.Nice > MaxNice {
		add("nice", "must be between -2147483645 and 2147483645 (Slurm's range), got %d", t.Nice)
	}
	if t.Project != "" && !qosName().MatchString(t.Project) {
		add("project", "%q is not a project name: use letters, digits, '-', '_' and '.' (at most 64)", t.Project)
	}
	if t.QOS != "" && !qosName().MatchString(t.QOS) {
		add("qos", "%q is not a QOS name: use letters, digits, '-', '_' and '.'", t.QOS)
	}
	if t.Priority < 0 || t.Priority > 100 {
		add("priority", "must be between 0 and 100, got %d", t.Priority)
	}
	t.checkWorkflow(add)
	if s := t.Schedule; s != nil {
		if len(s.Cron) == 0 {
			add("schedule.cron", "required: at least one cron expression")
		}
		for i, c := range s.Cron {
			if m := checkCron(c); m != "" {
				add(fmt.Sprintf("schedule.cron[%d]", i), "%s", m)
			}
		}
	}
	if r := t.Retry; r != nil {
		if len(r.OnEvents) == 0 {
			add("retry.on_events", "must list at least one of: %s", strings.Join(RetryEvents, ", "))
		}
		seen := map[string]bool{}
		for i, e := range r.OnEvents {
			p := fmt.Sprintf("retry.on_events[%d]", i)
			if m := checkEnum(e, RetryEvents); m != "" {
				add(p, "%s", m)
			} else if seen[e] {
				add(p, "%q is listed twice", e)
			}
			seen[e] = true
		}
		if r.Duration != nil && *r.Duration <= 0 {
			add("retry.duration", "must be positive")
		} else if r.Duration != nil {
			duration("retry.duration", *r.Duration, false)
		}
	}
	if t.MaxDuration != nil && *t.MaxDuration <= 0 {
		add("max_duration", "must be positive (use `off` for no limit)")
	} else if t.MaxDuration != nil {
		duration("max_duration", *t.MaxDuration, false)
	}
	if t.StopDuration != nil {
		duration("stop_duration", *t.StopDuration, true)
	}
	t.checkSignal(add)
	if u := t.UtilizationPolicy; u != nil {
		if u.MinGPUUtilization < 0 || u.MinGPUUtilization > 100 {
			add("utilization_policy.min_gpu_utilization", "must be a percentage between 0 and 100, got %d", u.MinGPUUtilization)
		}
		if u.TimeWindow < 5*60 {
			add("utilization_policy.time_window", "must be at least 5m, got %s", u.TimeWindow)
		} else {
			duration("utilization_policy.time_window", u.TimeWindow, false)
		}
	}
	enum("spot_policy", t.SpotPolicy, SpotPolicies)
	nonEmpty("backends", t.Backends)
	nonEmpty("regions", t.Regions)
	nonEmpty("availability_zones", t.AvailabilityZones)
	nonEmpty("instance_types", t.InstanceTypes)
	if t.MaxPrice != nil && (!(*t.MaxPrice > 0) || math.IsInf(*t.MaxPrice, 0)) {
		add("max_price", "must be a positive price in dollars per hour")
	}
	enum("creation_policy", t.CreationPolicy, CreationPolicies)
	if t.IdleDuration != nil {
		duration("idle_duration", *t.IdleDuration, true)
	}
	nonEmpty("fleets", t.Fleets)
	nonEmpty("nodelist", t.Nodelist)
	nonEmpty("exclude", t.Exclude)
	nonEmpty("constraint", t.Constraint)
	if len(t.Nodelist) > 0 && t.Nodes > len(t.Nodelist) {
		add("nodelist", "names %d nodes for nodes: %d; name at least as many nodes as the run has jobs", len(t.Nodelist), t.Nodes)
	}
	for k := range t.Tags {
		if k == "" {
			add("tags", "empty tag name")
		}
	}
	t.checkText(l, add)
	return ps
}

// unsupportedType explains a `type:` other than task.
func unsupportedType(typ string) string {
	switch typ {
	case "fleet", "volume", "gateway":
		return fmt.Sprintf("%q configurations are not supported by this version of Berth; only \"task\", \"dev-environment\" and \"service\" are", typ)
	case "preset":
		// dstack's presets search for a model deployment: an agent tries
		// services on the fleets and keeps the one that meets max_ttft.
		return "\"preset\" configurations (dstack's search for a model deployment: trials of services measured against max_ttft) are not supported by Berth: run the model server as a task"
	}
	return fmt.Sprintf("unknown configuration type %q%s; this version of Berth runs \"task\", \"dev-environment\" and \"service\"", typ, didYouMean(typ, []string{"task", "dev-environment", "service"}))
}

// MaxNice bounds a run's nice either way, as Slurm's NICE_OFFSET - 3 does.
const MaxNice = 2147483645
