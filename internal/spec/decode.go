package spec

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/goccy/go-yaml/ast"
)

// otherTypeFields are keys of dstack's other configuration types, so that a
// stray one gets a better message than "unknown field".
var otherTypeFields = map[string]string{
	"placement": "fleet", "blocks": "fleet", "ssh_config": "fleet", "termination_policy": "fleet",
}

// task decodes the top-level mapping. It returns nil when the configuration
// is not a task at all, after reporting why.
func (w *walker) task(root ast.Node) *Task {
	known := topLevelNames()
	entries, ok := w.mapping(root, "", known, func(key string) string {
		if advice, ok := deprecatedFields[key]; ok {
			return "`" + key + "` " + advice
		}
		if slices.Contains(resourceFields, key) {
			return fmt.Sprintf("unknown field; did you mean %q? (indent it under `resources:`)", "resources."+key)
		}
		if s := suggest(key, known); s != "" {
			return fmt.Sprintf("unknown field; did you mean %q?", s)
		}
		if typ, ok := otherTypeFields[key]; ok {
			return fmt.Sprintf("unknown field (it belongs to %s configurations, which Berth does not run)", typ)
		}
		return ""
	})
	if !ok {
		return nil
	}
	typ, ok := w.configType(root, entries, "task", func(typ string) string {
		if typ != "task" && typ != "dev-environment" && typ != "service" {
			return unsupportedType(typ)
		}
		return ""
	})
	if !ok {
		return nil
	}
	t := &Task{Type: typ}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue // an empty value leaves the field unset
		}
		w.field(t, e)
	}
	if resources, ok := w.pos["resources"]; ok && w.isNull(resources) {
		for _, e := range w.errs {
			if slices.Contains(resourceFields, e.Field) {
				line, _ := position(resources)
				e.Msg = fmt.Sprintf("unknown field; `resources:` on line %d is empty: indent this line under it to set %q", line, "resources."+e.Field)
			}
		}
	}
	return t
}

// field decodes one top-level entry into t.
func (w *walker) field(t *Task, e entry) {
	v, p := e.value, e.fieldPath
	str := func(dst *string) {
		if s, ok := w.str(v, p); ok {
			*dst = s
		}
	}
	boolean := func(dst *bool) {
		if b, ok := w.boolean(v, p); ok {
			*dst = b
		}
	}
	switch e.key {
	case "type":
		// handled by task
	case "name":
		str(&t.Name)
	case "nodes":
		if n, ok := w.integer(v, p); ok {
			if n < 1 {
				w.fail(v, p, "must be at least 1, got %d", n)
				return
			}
			t.Nodes = n
		}
	case "startup_order":
		str(&t.StartupOrder)
	case "stop_criteria":
		str(&t.StopCriteria)
	case "image":
		str(&t.Image)
	case "python":
		str(&t.Python)
	case "nvcc":
		boolean(&t.Nvcc)
	case "docker":
		boolean(&t.Docker)
	case "user":
		str(&t.User)
	case "privileged":
		boolean(&t.Privileged)
	case "entrypoint":
		str(&t.Entrypoint)
	case "working_dir":
		str(&t.WorkingDir)
	case "shell":
		str(&t.Shell)
	case "registry_auth":
		t.RegistryAuth = w.registryAuth(v, p)
	case "repos":
		t.Repos = w.repos(v, p)
	case "single_branch":
		var b bool
		boolean(&b)
		if !w.bad[p] {
			t.SingleBranch = &b
		}
	case "files":
		t.Files = w.files(v, p)
	case "dstack":
		if b, ok := w.boolean(v, p); ok {
			t.Dstack = b
		}
	case "env":
		t.Env = w.env(v, p)
	case "commands":
		t.Commands = w.commands(v, p)
	case "ports":
		t.Ports = w.ports(v, p)
	case "resources":
		t.Resources = w.resources(v, p)
	case "volumes":
		t.Volumes = w.volumes(v, p)
	case "priority":
		if n, ok := w.integer(v, p); ok {
			t.Priority = n
		}
	case "qos":
		str(&t.QOS)
	case "project":
		str(&t.Project)
	case "nice":
		if n, ok := w.integer(v, p); ok {
			t.Nice = int64(n)
		}
	case "exclusive":
		boolean(&t.Exclusive)
	case "array":
		t.Array = w.array(v, p)
	case "depends_on":
		t.DependsOn = w.dependsOn(v, p)
	case "dependency_policy":
		str(&t.DependencyPolicy)
	case "singleton":
		boolean(&t.Singleton)
	case "kill_invalid_depend":
		boolean(&t.KillInvalidDepend)
	case "groups":
		t.Groups = w.groups(v, p)
	case "schedule":
		t.Schedule = w.schedule(v, p)
	case "retry":
		t.Retry = w.retry(v, p)
	case "max_duration":
		t.MaxDuration = w.offDuration(v, p, nil)
	case "ide":
		str(&t.IDE)
	case "init":
		t.Init = w.commands(v, p)
	case "inactivity_duration":
		off := DurationOff
		t.InactivityDuration = w.offDuration(v, p, &off)
	case "version":
		str(&t.Version)
	case "port":
		t.Port = w.servicePort(v, p)
	case "replicas":
		t.Replicas = w.replicas(v, p)
	case "scaling":
		t.Scaling = w.scaling(v, p)
	case "probes":
		t.Probes = w.probes(v, p)
	case "model":
		t.Model = w.model(v, p)
	case "auth":
		var b bool
		boolean(&b)
		if !w.bad[p] {
			t.Auth = &b
		}
	case "https":
		t.HTTPS = w.httpsValue(v, p)
	case "strip_prefix":
		var b bool
		boolean(&b)
		if !w.bad[p] {
			t.StripPrefix = &b
		}
	case "rate_limits":
		t.RateLimits = w.rateLimits(v, p)
	case "stop_duration":
		off := DurationOff
		t.StopDuration = w.offDuration(v, p, &off)
	case "signal":
		t.Signal = w.signal(v, p)
	case "utilization_policy":
		t.UtilizationPolicy = w.utilization(v, p)
	case "spot_policy":
		str(&t.SpotPolicy)
	case "backends":
		t.Backends = w.strings(v, p, "[aws, gcp]")
	case "regions":
		t.Regions = w.strings(v, p, "[eu-west-1, us-west4]")
	case "availability_zones":
		t.AvailabilityZones = w.strings(v, p, "[eu-west-1a]")
	case "instance_types":
		t.InstanceTypes = w.strings(v, p, "[p4d.24xlarge]")
	case "reservation":
		str(&t.Reservation)
	case "max_price":
		t.MaxPrice = w.price(v, p)
	case "creation_policy":
		str(&t.CreationPolicy)
	case "idle_duration":
		off := DurationOff
		t.IdleDuration = w.offDuration(v, p, &off)
	case "fleets":
		t.Fleets = w.strings(v, p, "[gpu-fleet]")
	case "nodelist":
		t.Nodelist = w.strings(v, p, "[node1, node2]")
	case "exclude":
		t.Exclude = w.strings(v, p, "[node3]")
	case "constraint":
		t.Constraint = w.strings(v, p, "[infiniband, a100]")
	case "tags":
		t.Tags = w.tags(v, p)
	default:
		// mapping() only passes keys of taskFields; a key there without a
		// case here is a bug, and saying so beats dropping the value.
		w.fail(e.keyNode, p, "field is known but not handled (bug in Berth)")
	}
}

// duration reads an integer number of seconds or a duration string.
func (w *walker) duration(n ast.Node, path string) (Duration, bool) {
	s, k := w.scalar(n)
	if k != kindInt && k != kindString {
		w.fail(n, path, "must be a duration such as 30m, 2h or 1d, not %s", describeScalar(s, k, w.resolve(n)))
		return 0, false
	}
	d, err := ParseDuration(s)
	if err != nil {
		w.fail(n, path, "%s", msgOf(err))
		return 0, false
	}
	return d, true
}

// offDuration reads a duration that may be `off` or false (giving off, nil
// for "no limit") or true (giving nil, the default).
func (w *walker) offDuration(n ast.Node, path string, off *Duration) *Duration {
	if b, ok := w.resolve(n).(*ast.BoolNode); ok {
		if b.Value {
			return nil
		}
		return off
	}
	if s, k := w.scalar(n); k == kindString && strings.EqualFold(strings.TrimSpace(s), "off") {
		return off
	}
	d, ok := w.duration(n, path)
	if !ok {
		return nil
	}
	return &d
}

func (w *walker) price(n ast.Node, path string) *float64 {
	s, k := w.scalar(n)
	if k == kindInt || k == kindFloat || k == kindString {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return &f
		}
	}
	w.fail(n, path, "must be a price in dollars per hour such as 2.5, not %s", describeScalar(s, k, w.resolve(n)))
	return nil
}

func (w *walker) registryAuth(n ast.Node, path string) *RegistryAuth {
	entries, ok := w.mapping(n, path, []string{"username", "password"}, nil)
	if !ok {
		return nil
	}
	a := &RegistryAuth{}
	for _, e := range entries {
		dst := &a.Username
		if e.key == "password" {
			dst = &a.Password
		}
		if s, ok := w.str(e.value, e.fieldPath); ok {
			*dst = s
		}
	}
	return a
}

func (w *walker) commands(n ast.Node, path string) []string {
	return items(w, n, path, `["python train.py"]`, func(it ast.Node, p string) (string, bool) {
		if w.isNull(it) {
			w.fail(it, p, "empty command")
		}
		return w.str(it, p)
	})
}

func (w *walker) env(n ast.Node, path string) Env {
	var out Env
	switch w.resolve(n).(type) {
	case *ast.SequenceNode:
		items, _ := w.seq(n, path, "")
		for i, it := range items {
			p := index(path, i)
			w.pos[p] = it
			s, ok := w.str(it, p)
			if !ok {
				out = append(out, EnvVar{}) // placeholder keeps indexes aligned
				continue
			}
			name, value, hasValue := strings.Cut(s, "=")
			out = append(out, EnvVar{Name: name, Value: value, PassThrough: !hasValue})
		}
		return out
	case *ast.MappingNode, *ast.MappingValueNode:
		return w.envMapping(n, path)
	}
	w.fail(n, path, "must be a list (- NAME=value, or - NAME to pass it through) or a mapping (NAME: value), not %s", describe(w.resolve(n)))
	return nil
}

// envMapping reads the `NAME: value` form.
func (w *walker) envMapping(n ast.Node, path string) Env {
	var values []*ast.MappingValueNode
	switch m := w.resolve(n).(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	}
	var out Env
	for _, mv := range values {
		p := index(path, len(out))
		name, k := w.scalar(mv.Key)
		if k == kindOther || k == kindNull {
			w.fail(mv.Key, p, "keys must be variable names")
			out = append(out, EnvVar{})
			continue
		}
		w.pos[p] = mv.Key
		if w.isNull(mv.Value) {
			w.fail(mv.Key, p, "%s has no value; give one, or use the list form `- %s` to pass it through from your environment", name, name)
			out = append(out, EnvVar{Name: name}) // keep indexes aligned
			continue
		}
		value, ok := w.str(mv.Value, p)
		if !ok {
			out = append(out, EnvVar{Name: name})
			continue
		}
		out = append(out, EnvVar{Name: name, Value: value})
	}
	return out
}

func (w *walker) ports(n ast.Node, path string) []PortMapping {
	return items(w, n, path, "[8888, \"8080:80\"]", func(it ast.Node, p string) (PortMapping, bool) {
		if _, isMap := w.resolve(it).(*ast.MappingNode); isMap {
			entries, ok := w.mapping(it, p, []string{"local_port", "container_port"}, nil)
			if !ok {
				return PortMapping{}, false
			}
			var pm PortMapping
			for _, e := range entries {
				if v, ok := w.integer(e.value, e.fieldPath); ok {
					if e.key == "local_port" {
						pm.LocalPort = v
					} else {
						pm.ContainerPort = v
					}
				}
			}
			if pm.ContainerPort == 0 && !w.bad[p+".container_port"] {
				w.fail(it, p, "`container_port` is required")
				return PortMapping{}, false
			}
			return pm, true
		}
		s, ok := w.str(it, p)
		if !ok {
			return PortMapping{}, false
		}
		pm, msg := parsePort(s)
		if msg != "" {
			w.fail(it, p, "%s", msg)
			return PortMapping{}, false
		}
		return pm, true
	})
}

// parsePort reads "8080", "80:8080" or "*:8080".
func parsePort(s string) (PortMapping, string) {
	local, container, mapped := strings.Cut(s, ":")
	if !mapped {
		local, container = "", s
	}
	bad := fmt.Sprintf("invalid port %q (expected 8080, 80:8080 or *:8080)", s)
	if !isDigits(container) || (mapped && local != "*" && !isDigits(local)) {
		return PortMapping{}, bad
	}
	c, err := strconv.Atoi(container)
	if err != nil || c > 65535 {
		return PortMapping{}, fmt.Sprintf("port %s is out of range 1..65535", container)
	}
	pm := PortMapping{ContainerPort: c}
	switch {
	case !mapped:
		pm.LocalPort = c
	case local != "*":
		l, err := strconv.Atoi(local)
		if err != nil || l < 1 || l > 65535 {
			return PortMapping{}, fmt.Sprintf("port %s is out of range 1..65535", local)
		}
		pm.LocalPort = l
	}
	return pm, ""
}

func (w *walker) volumes(n ast.Node, path string) []Volume {
	return items(w, n, path, "[\"/mnt/data:/data\"]", func(it ast.Node, p string) (Volume, bool) {
		if s, k := w.scalar(it); k == kindString {
			src, dst, ok := strings.Cut(s, ":")
			if !ok || src == "" || dst == "" {
				w.fail(it, p, "invalid volume %q (expected NAME:/path for a network volume or /host/dir:/path for an instance volume)", s)
				return Volume{}, false
			}
			v := Volume{Path: dst}
			// Docker's mode suffix: /host:/data:ro mounts read-only.
			if p, mode, ok := strings.Cut(dst, ":"); ok && (mode == "ro" || mode == "rw") {
				v.Path, v.ReadOnly = p, mode == "ro"
			}
			if strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~") {
				v.InstancePath = src
			} else {
				v.Name = src
			}
			return v, true
		}
		entries, ok := w.mapping(it, p, []string{"name", "path", "instance_path", "optional", "read_only"}, nil)
		if !ok {
			return Volume{}, false
		}
		var v Volume
		for _, e := range entries {
			switch e.key {
			case "optional":
				if b, ok := w.boolean(e.value, e.fieldPath); ok {
					v.Optional = b
				}
			case "read_only":
				if b, ok := w.boolean(e.value, e.fieldPath); ok {
					v.ReadOnly = b
				}
			default:
				if _, isSeq := w.resolve(e.value).(*ast.SequenceNode); isSeq && e.key == "name" {
					// dstack's list of volumes, any one of which will do.
					v.Names = w.strings(e.value, e.fieldPath, "[vol-eu, vol-us]")
					continue
				}
				s, ok := w.str(e.value, e.fieldPath)
				if !ok {
					continue
				}
				*map[string]*string{"name": &v.Name, "path": &v.Path, "instance_path": &v.InstancePath}[e.key] = s
			}
		}
		return v, true
	})
}

func (w *walker) files(n ast.Node, path string) []FileMapping {
	return items(w, n, path, "[\"../configs:~/configs\"]", func(it ast.Node, p string) (FileMapping, bool) {
		if s, k := w.scalar(it); k == kindString {
			return parseFileMapping(s), true
		}
		entries, ok := w.mapping(it, p, []string{"local_path", "path"}, nil)
		if !ok {
			return FileMapping{}, false
		}
		var f FileMapping
		for _, e := range entries {
			if s, ok := w.str(e.value, e.fieldPath); ok {
				if e.key == "local_path" {
					f.LocalPath = s
				} else {
					f.Path = s
				}
			}
		}
		return f, true
	})
}

// parseFileMapping reads "local:remote", or "path" for the same path on
// both sides; a Windows drive letter ("C:\x") is not a separator.
func parseFileMapping(s string) FileMapping {
	skip := 0
	if len(s) > 2 && s[1] == ':' && unicode.IsLetter(rune(s[0])) && (s[2] == '\\' || s[2] == '/') {
		skip = 2
	}
	if i := strings.Index(s[skip:], ":"); i >= 0 {
		return FileMapping{LocalPath: s[:skip+i], Path: s[skip+i+1:]}
	}
	return FileMapping{LocalPath: s, Path: s}
}

func (w *walker) repos(n ast.Node, path string) []Repo {
	return items(w, n, path, "[.]", func(it ast.Node, p string) (Repo, bool) {
		if s, k := w.scalar(it); k == kindString {
			r, msg := parseRepo(s)
			if msg != "" {
				w.fail(it, p, "%s", msg)
				return Repo{}, false
			}
			return r, true
		}
		entries, ok := w.mapping(it, p, []string{"local_path", "url", "branch", "hash", "path", "if_exists"}, nil)
		if !ok {
			return Repo{}, false
		}
		var r Repo
		dst := map[string]*string{"local_path": &r.LocalPath, "url": &r.URL, "branch": &r.Branch, "hash": &r.Hash, "path": &r.Path, "if_exists": &r.IfExists}
		for _, e := range entries {
			if s, ok := w.str(e.value, e.fieldPath); ok {
				*dst[e.key] = s
			}
		}
		return r, true
	})
}

// items decodes a sequence one item at a time; an item that fails stays the
// zero value, so that indexes in later messages match the file.
func items[T any](w *walker, n ast.Node, path, example string, item func(it ast.Node, p string) (T, bool)) []T {
	its, ok := w.seq(n, path, example)
	if !ok {
		return nil
	}
	out := make([]T, len(its))
	for i, it := range its {
		p := index(path, i)
		w.pos[p] = it
		if v, ok := item(it, p); ok {
			out[i] = v
		}
	}
	return out
}

// parseRepo reads dstack's repo shorthand: ".", ".:dir", a URL
// (https://… or git@host:…), optionally followed by ":dir".
func parseRepo(s string) (Repo, string) {
	if u, dir, ok := cutURLRepo(s); ok { // repos.go: a URL with a scheme, whose port is no :dir
		return Repo{URL: u, Path: dir}, ""
	}
	parts := strings.Split(s, ":")
	isURL := false
	if len(parts) > 1 {
		switch {
		case strings.Contains(parts[0], "@") || strings.HasPrefix(parts[1], "//"):
			parts = append([]string{parts[0] + ":" + parts[1]}, parts[2:]...)
			isURL = true
		case len(parts[0]) == 1 && unicode.IsLetter(rune(parts[0][0])) && (strings.HasPrefix(parts[1], "\\") || strings.HasPrefix(parts[1], "/")):
			parts = append([]string{parts[0] + ":" + parts[1]}, parts[2:]...)
		}
	}
	var r Repo
	switch len(parts) {
	case 1:
	case 2:
		r.Path = parts[1]
	default:
		return Repo{}, fmt.Sprintf("invalid repo %q (expected a path or URL, optionally followed by :dir)", s)
	}
	if parts[0] == "" {
		return Repo{}, fmt.Sprintf("invalid repo %q: the path or URL is empty", s)
	}
	if isURL {
		r.URL = parts[0]
	} else {
		r.LocalPath = parts[0]
	}
	return r, ""
}

func (w *walker) schedule(n ast.Node, path string) *Schedule {
	entries, ok := w.mapping(n, path, []string{"cron"}, nil)
	if !ok {
		return nil
	}
	s := &Schedule{}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		if _, isSeq := w.resolve(e.value).(*ast.SequenceNode); isSeq {
			s.Cron = w.strings(e.value, e.fieldPath, "")
		} else if line, ok := w.str(e.value, e.fieldPath); ok {
			s.Cron = []string{line}
			w.pos[index(e.fieldPath, 0)] = e.value
		}
	}
	return s
}

func (w *walker) retry(n ast.Node, path string) *Retry {
	if b, ok := w.resolve(n).(*ast.BoolNode); ok {
		if !b.Value {
			return nil
		}
		return &Retry{OnEvents: slices.Clone(RetryEvents)}
	}
	if _, isMap := w.resolve(n).(*ast.MappingNode); !isMap {
		s, k := w.scalar(n)
		w.fail(n, path, "must be true, false or a mapping with `on_events` and `duration`, not %s", describeScalar(s, k, w.resolve(n)))
		return nil
	}
	entries, ok := w.mapping(n, path, []string{"on_events", "duration"}, nil)
	if !ok {
		return nil
	}
	r := &Retry{OnEvents: slices.Clone(RetryEvents)} // dstack's default when on_events is left out
	for _, e := range entries {
		switch e.key {
		case "on_events":
			if _, isSeq := w.resolve(e.value).(*ast.SequenceNode); isSeq || w.isNull(e.value) {
				r.OnEvents = w.strings(e.value, e.fieldPath, "[no-capacity, error]")
			} else if s, ok := w.str(e.value, e.fieldPath); ok {
				r.OnEvents = []string{s}
				w.pos[index(e.fieldPath, 0)] = e.value
			}
		case "duration":
			if w.isNull(e.value) {
				continue
			}
			if d, ok := w.duration(e.value, e.fieldPath); ok {
				r.Duration = &d
			}
		}
	}
	return r
}

func (w *walker) utilization(n ast.Node, path string) *UtilizationPolicy {
	entries, ok := w.mapping(n, path, []string{"min_gpu_utilization", "time_window"}, nil)
	if !ok {
		return nil
	}
	u := &UtilizationPolicy{}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.key] = true
		switch e.key {
		case "min_gpu_utilization":
			if v, ok := w.integer(e.value, e.fieldPath); ok {
				u.MinGPUUtilization = v
			}
		case "time_window":
			if d, ok := w.duration(e.value, e.fieldPath); ok {
				u.TimeWindow = d
			}
		}
	}
	for _, k := range []string{"min_gpu_utilization", "time_window"} {
		if !have[k] {
			w.fail(n, join(path, k), "required")
		}
	}
	return u
}

func (w *walker) tags(n ast.Node, path string) map[string]string {
	var values []*ast.MappingValueNode
	switch m := w.resolve(n).(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		w.fail(n, path, "must be a mapping of tag names to values, not %s", describe(w.resolve(n)))
		return nil
	}
	out := map[string]string{}
	for _, mv := range values {
		k, kk := w.scalar(mv.Key)
		if kk == kindOther || kk == kindNull {
			w.fail(mv.Key, path, "tag names must be plain strings")
			continue
		}
		if _, dup := out[k]; dup {
			w.fail(mv.Key, join(path, k), "duplicate tag")
			continue
		}
		if v, ok := w.str(mv.Value, join(path, k)); ok {
			out[k] = v
		}
	}
	return out
}

// configType reads the root's `type:` against the schema being read:
// refuse says why a type is not this schema's ("": it is). A refused type
// is the only error kept (the other type's fields are not this schema's
// problem) and ok is false; a missing one is an error that lets the
// fields be checked too.
func (w *walker) configType(root ast.Node, entries []entry, want string, refuse func(typ string) string) (typ string, ok bool) {
	for _, e := range entries {
		if e.key != "type" {
			continue
		}
		typ, ok := w.str(e.value, "type")
		if !ok {
			return "", false
		}
		if msg := refuse(typ); msg != "" {
			w.errs = nil
			w.fail(e.value, "type", "%s", msg)
			return "", false
		}
		return typ, true
	}
	w.fail(root, "type", "required; add `type: %s` at the top", want)
	return "", true
}
