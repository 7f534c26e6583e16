package spec

import "strings"

// Task is one `type: task` configuration, with dstack's field names.
// Fields are in schema order, the order SetFields reports them in.
type Task struct {
	Type         string `json:"type"` // "task", "dev-environment" or "service"
	Name         string `json:"name,omitempty"`
	Nodes        int    `json:"nodes"` // default 1
	StartupOrder string `json:"startup_order,omitempty"`
	StopCriteria string `json:"stop_criteria,omitempty"`

	Image        string        `json:"image,omitempty"`
	Python       string        `json:"python,omitempty"` // "3.9".."3.13", exactly as written
	Nvcc         bool          `json:"nvcc,omitempty"`
	Docker       bool          `json:"docker,omitempty"`
	User         string        `json:"user,omitempty"`
	Privileged   bool          `json:"privileged,omitempty"`
	Entrypoint   string        `json:"entrypoint,omitempty"`
	WorkingDir   string        `json:"working_dir,omitempty"`
	Shell        string        `json:"shell,omitempty"`
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`

	Repos        []Repo        `json:"repos,omitempty"`
	SingleBranch *bool         `json:"single_branch,omitempty"`
	Files        []FileMapping `json:"files,omitempty"`
	// Dstack is dstack's `dstack: true` (the server reachable from the
	// run). Every Berth job has it: BERTH_URL and its run's credential.
	Dstack    bool          `json:"dstack,omitempty"`
	Env       Env           `json:"env,omitempty"`
	Commands  []string      `json:"commands,omitempty"`
	Ports     []PortMapping `json:"ports,omitempty"`
	Resources Resources     `json:"resources"`
	Volumes   []Volume      `json:"volumes,omitempty"`

	Priority int `json:"priority"` // 0..100
	// QOS, Nice and Exclusive are Berth's, after Slurm's --qos, --nice and
	// --exclusive: a quality of service the server defines, a priority
	// decrease, and a whole node for each job.
	QOS string `json:"qos,omitempty"`
	// Project is the project (Slurm's account) the run goes to, among
	// its submitter's (empty: their default).
	Project   string `json:"project,omitempty"`
	Nice      int64  `json:"nice,omitempty"`
	Exclusive bool   `json:"exclusive,omitempty"`
	// Array, DependsOn, DependencyPolicy, Singleton, KillInvalidDepend and
	// Groups are Berth's workflows, after Slurm's --array, --dependency
	// (`,` is all, `?` is any), singleton, --kill-on-invalid-dep and
	// heterogeneous jobs.
	Array             string             `json:"array,omitempty"` // as written: "1-100%10", "0-15:4", "1,3,5-7"; see ParseArray
	DependsOn         []Dependency       `json:"depends_on,omitempty"`
	DependencyPolicy  string             `json:"dependency_policy,omitempty"` // "all" (default) or "any"
	Singleton         bool               `json:"singleton,omitempty"`
	KillInvalidDepend bool               `json:"kill_invalid_depend,omitempty"`
	Groups            []Group            `json:"groups,omitempty"`
	Schedule          *Schedule          `json:"schedule,omitempty"`
	Retry             *Retry             `json:"retry,omitempty"`
	MaxDuration       *Duration          `json:"max_duration,omitempty"`  // nil = no limit ("off")
	StopDuration      *Duration          `json:"stop_duration,omitempty"` // nil = default; DurationOff = off
	Signal            string             `json:"signal,omitempty"`        // Berth's (Slurm's --signal): [B:]SIG[@TIME] as written; see ParseSignal
	UtilizationPolicy *UtilizationPolicy `json:"utilization_policy,omitempty"`

	SpotPolicy        string    `json:"spot_policy,omitempty"`
	Backends          []string  `json:"backends,omitempty"`
	Regions           []string  `json:"regions,omitempty"`
	AvailabilityZones []string  `json:"availability_zones,omitempty"`
	InstanceTypes     []string  `json:"instance_types,omitempty"`
	Reservation       string    `json:"reservation,omitempty"`
	MaxPrice          *float64  `json:"max_price,omitempty"` // dollars per hour
	CreationPolicy    string    `json:"creation_policy,omitempty"`
	IdleDuration      *Duration `json:"idle_duration,omitempty"` // nil = default; DurationOff = off
	Fleets            []string  `json:"fleets,omitempty"`
	// Nodelist, Exclude and Constraint are Berth's, after Slurm's
	// -w/--nodelist, -x/--exclude and -C/--constraint: the only nodes the
	// run's jobs may use, nodes they may not, and the features (berth agent
	// --features) a node must have, all of them.
	Nodelist   []string          `json:"nodelist,omitempty"`
	Exclude    []string          `json:"exclude,omitempty"`
	Constraint []string          `json:"constraint,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	// Slurm is the Slurm part of a run sbatch, srun or salloc submitted
	// (slurm.go); nil for others.
	Slurm *Slurm `json:"slurm,omitempty"`

	// IDE, Init, InactivityDuration and Version are a dev environment's
	// (devenv.go).
	IDE                string    `json:"ide,omitempty"`
	Init               []string  `json:"init,omitempty"`
	InactivityDuration *Duration `json:"inactivity_duration,omitempty"` // nil or DurationOff: never
	Version            string    `json:"version,omitempty"`

	// Port, Replicas, Scaling, Probes, Model, Auth, HTTPS, StripPrefix and
	// RateLimits are a service's (service.go).
	Port        *PortMapping `json:"port,omitempty"`
	Replicas    *Replicas    `json:"replicas,omitempty"`
	Scaling     *Scaling     `json:"scaling,omitempty"`
	Probes      []Probe      `json:"probes,omitempty"`
	Model       *Model       `json:"model,omitempty"`
	Auth        *bool        `json:"auth,omitempty"`
	HTTPS       string       `json:"https,omitempty"` // "true", "false" or "auto"
	StripPrefix *bool        `json:"strip_prefix,omitempty"`
	RateLimits  []RateLimit  `json:"rate_limits,omitempty"`
}

// Dependency is one condition on other runs: Type is after, afterany,
// afterok, afternotok or aftercorr; Runs names them by name or ID as
// written ("train", "42", "42_3"). The server resolves them at submission
// into IDs, kept beside.
type Dependency struct {
	Type string   `json:"type"`
	Runs []string `json:"runs"`
	IDs  []int64  `json:"ids,omitempty"` // set by the server
}

// Group is one component of a heterogeneous run: its own node count and
// resources, and optionally its own commands (default: the run's).
type Group struct {
	Name      string    `json:"name,omitempty"`
	Nodes     int       `json:"nodes"` // default 1
	Resources Resources `json:"resources"`
	Commands  []string  `json:"commands,omitempty"`
	// Ports are the group's jobs' ports (dstack's groups[].ports), in
	// place of the run's.
	Ports []PortMapping `json:"ports,omitempty"`
}

// RegistryAuth is the credentials for pulling a private image. Values are
// kept as written, including `${{ secrets.x }}` references.
type RegistryAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Repo is a Git repository to clone into the container: `.`, `.:dir`, a URL
// or a mapping. Exactly one of LocalPath and URL is set.
type Repo struct {
	LocalPath string `json:"local_path,omitempty"`
	URL       string `json:"url,omitempty"`
	Branch    string `json:"branch,omitempty"`
	Hash      string `json:"hash,omitempty"`
	Path      string `json:"path,omitempty"`      // in the container; empty = dstack's default "."
	IfExists  string `json:"if_exists,omitempty"` // error | skip
	// Archive is the packed tree of LocalPath, set by berth apply (never
	// written in YAML): see Archive.
	Archive *Archive `json:"archive,omitempty"`
}

// Archive is a tree berth apply packed and uploaded (a gzip'd tar, kept
// by the server under Digest, its hex SHA-256), and where the node
// unpacks it: Dest relative to the job's working directory, under the
// job user's home when it starts with "~", or absolute.
type Archive struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	Dest   string `json:"dest"`
}

// FileMapping uploads LocalPath (on the submitter's machine) to Path (in
// the container).
type FileMapping struct {
	LocalPath string `json:"local_path"`
	Path      string `json:"path"`
	// Archive is LocalPath packed by berth apply (not written in YAML).
	Archive *Archive `json:"archive,omitempty"`
}

// PortMapping exposes ContainerPort; LocalPort 0 means any free local port
// (written `*:8080`).
type PortMapping struct {
	LocalPort     int `json:"local_port,omitempty"`
	ContainerPort int `json:"container_port"`
}

// Volume is a mount: a network volume (Name, which may contain
// `${{ dstack.node_rank }}` and is kept as text; or Names, any one of
// them, as dstack's `name: [a, b]`) or an instance volume (InstancePath,
// a directory on the host). ReadOnly (Berth's addition, written
// `/host:/data:ro` or `read_only: true`) mounts it read-only.
type Volume struct {
	Name         string   `json:"name,omitempty"`
	Names        []string `json:"names,omitempty"`
	InstancePath string   `json:"instance_path,omitempty"`
	// EngineVolume is set by the server, never by a configuration: the
	// Docker volume a container run's network volume Name is on its node's
	// engine (server/volumes.go).
	EngineVolume string `json:"engine_volume,omitempty"`
	Path         string `json:"path"`
	Optional     bool   `json:"optional,omitempty"`
	ReadOnly     bool   `json:"read_only,omitempty"`
}

// Schedule starts the task periodically; each line is 5-field cron syntax in UTC.
type Schedule struct {
	Cron []string `json:"cron"`
}

// Retry resubmits the run on the listed events for at most Duration (nil =
// no limit). `retry: true` is all of RetryEvents with no limit.
type Retry struct {
	OnEvents []string  `json:"on_events"`
	Duration *Duration `json:"duration,omitempty"`
}

// UtilizationPolicy stops the run when every GPU stays below
// MinGPUUtilization percent for TimeWindow.
type UtilizationPolicy struct {
	MinGPUUtilization int      `json:"min_gpu_utilization"`
	TimeWindow        Duration `json:"time_window"`
}

// Archives lists the archives the run carries, in the order the node
// unpacks them: the repo, then each of files (a later one may overwrite
// an earlier one's file, as dstack's files land over the repo).
func (t *Task) Archives() []Archive {
	var out []Archive
	for _, r := range t.Repos {
		if r.Archive != nil {
			out = append(out, *r.Archive)
		}
	}
	for _, f := range t.Files {
		if f.Archive != nil {
			out = append(out, *f.Archive)
		}
	}
	return out
}

// Enumerations of the schema, in the order error messages list them.
var (
	RetryEvents      = []string{"no-capacity", "error", "interruption"}
	StartupOrders    = []string{"any", "master-first", "workers-first"}
	StopCriteria     = []string{"all-done", "master-done"}
	SpotPolicies     = []string{"spot", "on-demand", "auto"}
	CreationPolicies = []string{"reuse", "reuse-or-create"}
	PythonVersions   = []string{"3.9", "3.10", "3.11", "3.12", "3.13"}
	RepoIfExists     = []string{"error", "skip"}
)

// DefaultCPU is the CPU request of a task that names none: one CPU. Berth
// asks for no memory minimum and no GPU by default.
var DefaultCPU = CPUSpec{Count: IntRange{Min: 1, Max: &one}}

var one = 1

// Normalize fills defaults: Type "task", Nodes 1 and the default CPU
// request, for the run and for each of its groups. Parse calls it; call it
// on a Task decoded from JSON before use.
func (t *Task) Normalize() {
	if t.Type == "" {
		t.Type = "task"
	}
	if t.Nodes == 0 {
		t.Nodes = 1
	}
	t.Resources.normalize()
	for i := range t.Groups {
		g := &t.Groups[i]
		if g.Nodes == 0 {
			g.Nodes = 1
		}
		g.Resources.normalize()
	}
}

func (r *Resources) normalize() {
	if r.CPU == nil {
		c := DefaultCPU
		r.CPU = &c
	}
}

// field is one top-level key of the schema.
type field struct {
	name  string
	isSet func(t *Task) bool // from the struct, so it works after JSON decoding
}

// taskFields is the schema, in order. "resources" expands into its
// sub-fields in SetFields.
var taskFields = []field{
	{"type", func(t *Task) bool { return false }},
	{"name", func(t *Task) bool { return t.Name != "" }},
	{"nodes", func(t *Task) bool { return t.Nodes > 1 }},
	{"startup_order", func(t *Task) bool { return t.StartupOrder != "" }},
	{"stop_criteria", func(t *Task) bool { return t.StopCriteria != "" }},
	{"image", func(t *Task) bool { return t.Image != "" }},
	{"python", func(t *Task) bool { return t.Python != "" }},
	{"nvcc", func(t *Task) bool { return t.Nvcc }},
	{"docker", func(t *Task) bool { return t.Docker }},
	{"user", func(t *Task) bool { return t.User != "" }},
	{"privileged", func(t *Task) bool { return t.Privileged }},
	{"entrypoint", func(t *Task) bool { return t.Entrypoint != "" }},
	{"working_dir", func(t *Task) bool { return t.WorkingDir != "" }},
	{"shell", func(t *Task) bool { return t.Shell != "" }},
	{"registry_auth", func(t *Task) bool { return t.RegistryAuth != nil }},
	{"repos", func(t *Task) bool { return len(t.Repos) > 0 }},
	{"single_branch", func(t *Task) bool { return t.SingleBranch != nil }},
	{"files", func(t *Task) bool { return len(t.Files) > 0 }},
	{"dstack", func(t *Task) bool { return t.Dstack }},
	{"env", func(t *Task) bool { return len(t.Env) > 0 }},
	{"commands", func(t *Task) bool { return len(t.Commands) > 0 }},
	{"ports", func(t *Task) bool { return len(t.Ports) > 0 }},
	{"resources", nil},
	{"volumes", func(t *Task) bool { return len(t.Volumes) > 0 }},
	{"priority", func(t *Task) bool { return t.Priority != 0 }},
	{"qos", func(t *Task) bool { return t.QOS != "" }},
	{"project", func(t *Task) bool { return t.Project != "" }},
	{"nice", func(t *Task) bool { return t.Nice != 0 }},
	{"exclusive", func(t *Task) bool { return t.Exclusive }},
	{"array", func(t *Task) bool { return t.Array != "" }},
	{"depends_on", func(t *Task) bool { return len(t.DependsOn) > 0 }},
	{"dependency_policy", func(t *Task) bool { return t.DependencyPolicy != "" }},
	{"singleton", func(t *Task) bool { return t.Singleton }},
	{"kill_invalid_depend", func(t *Task) bool { return t.KillInvalidDepend }},
	{"groups", func(t *Task) bool { return len(t.Groups) > 0 }},
	{"schedule", func(t *Task) bool { return t.Schedule != nil }},
	{"retry", func(t *Task) bool { return t.Retry != nil }},
	{"max_duration", func(t *Task) bool { return t.MaxDuration != nil }},
	{"stop_duration", func(t *Task) bool { return t.StopDuration != nil }},
	{"signal", func(t *Task) bool { return t.Signal != "" }},
	{"utilization_policy", func(t *Task) bool { return t.UtilizationPolicy != nil }},
	{"ide", func(t *Task) bool { return t.IDE != "" }},
	{"init", func(t *Task) bool { return len(t.Init) > 0 }},
	{"inactivity_duration", func(t *Task) bool { return t.InactivityDuration != nil }},
	{"version", func(t *Task) bool { return t.Version != "" }},
	{"port", func(t *Task) bool { return t.Port != nil }},
	{"replicas", func(t *Task) bool { return t.Replicas != nil }},
	{"scaling", func(t *Task) bool { return t.Scaling != nil }},
	{"probes", func(t *Task) bool { return len(t.Probes) > 0 }},
	{"model", func(t *Task) bool { return t.Model != nil }},
	{"auth", func(t *Task) bool { return t.Auth != nil }},
	{"https", func(t *Task) bool { return t.HTTPS != "" }},
	{"strip_prefix", func(t *Task) bool { return t.StripPrefix != nil }},
	{"rate_limits", func(t *Task) bool { return len(t.RateLimits) > 0 }},
	{"spot_policy", func(t *Task) bool { return t.SpotPolicy != "" }},
	{"backends", func(t *Task) bool { return len(t.Backends) > 0 }},
	{"regions", func(t *Task) bool { return len(t.Regions) > 0 }},
	{"availability_zones", func(t *Task) bool { return len(t.AvailabilityZones) > 0 }},
	{"instance_types", func(t *Task) bool { return len(t.InstanceTypes) > 0 }},
	{"reservation", func(t *Task) bool { return t.Reservation != "" }},
	{"max_price", func(t *Task) bool { return t.MaxPrice != nil }},
	{"creation_policy", func(t *Task) bool { return t.CreationPolicy != "" }},
	{"idle_duration", func(t *Task) bool { return t.IdleDuration != nil }},
	{"fleets", func(t *Task) bool { return len(t.Fleets) > 0 }},
	{"nodelist", func(t *Task) bool { return len(t.Nodelist) > 0 }},
	{"exclude", func(t *Task) bool { return len(t.Exclude) > 0 }},
	{"constraint", func(t *Task) bool { return len(t.Constraint) > 0 }},
	{"tags", func(t *Task) bool { return len(t.Tags) > 0 }},
}

// resourceFields is the schema of `resources:`, in order.
var resourceFields = []string{"cpu", "memory", "shm_size", "gpu", "disk"}

// deprecatedFields are dstack keys that Berth refuses, with the advice given.
var deprecatedFields = map[string]string{
	"setup":                 "is deprecated and has no effect in dstack; move these lines to the start of `commands`",
	"home_dir":              "is deprecated and has no effect in dstack; remove it",
	"termination_policy":    "is deprecated; use `idle_duration`",
	"termination_idle_time": "is deprecated; use `idle_duration`",
	"retry_policy":          "is deprecated; use `retry`",
	"pool_name":             "is deprecated; use `fleets`",
	"instance_name":         "is deprecated and not supported by Berth; remove it",
}

func topLevelNames() []string {
	names := make([]string, len(taskFields))
	for i, f := range taskFields {
		names[i] = f.name
	}
	return names
}

// SetFields lists the dotted paths of the fields that hold a non-default
// value, in schema order: top-level names, and "resources.<x>" for the
// resources sub-fields, e.g. ["name","commands","resources.gpu","volumes"].
// It reads the struct, so it works after JSON decoding too; a field set to
// its default (nodes: 1, priority: 0, the default CPU request) is not
// listed.
func (t *Task) SetFields() []string {
	var out []string
	for _, f := range taskFields {
		if f.name != "resources" {
			if f.isSet(t) {
				out = append(out, f.name)
			}
			continue
		}
		out = append(out, resourceSetFields(t.Resources)...)
	}
	return out
}

// resourceSetFields lists "resources.<x>" for each sub-field of r that
// holds a non-default value.
func resourceSetFields(r Resources) []string {
	var out []string
	if r.CPU != nil && !(r.CPU.Arch == "" && r.CPU.Count.Min == DefaultCPU.Count.Min && r.CPU.Count.Max != nil && *r.CPU.Count.Max == *DefaultCPU.Count.Max) {
		out = append(out, "resources.cpu")
	}
	if r.Memory != nil {
		out = append(out, "resources.memory")
	}
	if r.SHMSize != nil {
		out = append(out, "resources.shm_size")
	}
	if r.GPU != nil {
		out = append(out, "resources.gpu")
	}
	if r.Disk != nil {
		out = append(out, "resources.disk")
	}
	return out
}

// ValidDigest says whether d is a hex SHA-256, as an Archive names its
// content.
func ValidDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for _, c := range d {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// check reports what is wrong with an archive set through the API (berth
// apply sets it; YAML cannot).
func (a *Archive) check(p string, add func(path, format string, args ...any)) {
	if a == nil {
		return
	}
	if !ValidDigest(a.Digest) {
		add(p+".digest", "must be a lowercase hex SHA-256 (64 characters), got %q", a.Digest)
	}
	if a.Size < 0 {
		add(p+".size", "must not be negative")
	}
	if a.Dest == "" || strings.ContainsRune(a.Dest, 0) {
		add(p+".dest", "required: where the node unpacks it")
	}
}
