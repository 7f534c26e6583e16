package spec

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// VolumeConfig is one `type: volume` configuration, with dstack's field
// names: a network volume made (or, with VolumeID, registered) through the
// provider of Backend, or (Berth's) an instance volume: the host directory
// Path on the node Node, which pins the runs that mount it to that node.
// Runs name either in their `volumes:`.
type VolumeConfig struct {
	Type    string `json:"type"` // always "volume"
	Name    string `json:"name"`
	Project string `json:"project,omitempty"` // Berth's: the owning project (empty: the applier's default)
	Backend string `json:"backend"`
	Region  string `json:"region,omitempty"`
	// Size is required to create a volume; a registered one (VolumeID)
	// has its own.
	Size *Bytes `json:"size,omitempty"`
	// VolumeID registers a volume that exists at the provider under that
	// name instead of creating one; deleting it only forgets it.
	VolumeID string `json:"volume_id,omitempty"`
	// AutoCleanupDuration deletes the volume once no run has used it for
	// that long (nil: kept until deleted; `off` and -1 too).
	AutoCleanupDuration *Duration `json:"auto_cleanup_duration,omitempty"`
	// Node and Path make it an instance volume (Berth's; dstack has
	// instance volumes only as `- /host/dir:/path` in a run): the absolute
	// directory Path on the node named Node. No backend makes it: applying
	// it records it, and a run that mounts it goes to that node only.
	Node string `json:"node,omitempty"`
	Path string `json:"path,omitempty"`
}

// IsInstance says whether v is an instance volume (a host directory on a
// node) rather than a network volume.
func (v *VolumeConfig) IsInstance() bool { return v.Node != "" || v.Path != "" }

// volumeFields is the schema of a volume configuration, in order.
var volumeFields = []string{"type", "name", "project", "backend", "region", "size", "volume_id", "auto_cleanup_duration", "node", "path"}

// volumeRefused are dstack's volume fields Berth does not act on, with
// why; they are errors rather than silently ignored.
var volumeRefused = map[string]string{
	"availability_zone":  "is not supported by Berth: its backends have no availability zones; remove it",
	"tags":               "is not supported on volumes by Berth yet; remove it",
	"claim_name":         "belongs to dstack's kubernetes backend, which Berth does not have",
	"storage_class_name": "belongs to dstack's kubernetes backend, which Berth does not have",
	"access_modes":       "belongs to dstack's kubernetes backend, which Berth does not have",
	"read_only":          "belongs to dstack's kubernetes backend, which Berth does not have; mount a volume read-only in the run (`- NAME:/path:ro`)",
}

// ParseVolumeFile reads and parses one volume configuration file.
func ParseVolumeFile(p string) (*VolumeConfig, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return ParseVolume(p, data)
}

// ParseVolume reads one `type: volume` configuration. Like Parse it
// returns every problem with file, line, column and field, and a nil
// VolumeConfig when there is any.
func ParseVolume(filename string, data []byte) (*VolumeConfig, error) {
	w, root, err := openDocument(filename, data)
	if err != nil {
		return nil, err
	}
	v := w.volumeConfig(root)
	if v != nil {
		w.placeProblems(root, v.check())
	}
	if len(w.errs) > 0 {
		w.errs.sortByPosition()
		return nil, w.errs
	}
	return v, nil
}

// Validate re-checks a VolumeConfig decoded from JSON with the rules
// ParseVolume applies; problems carry the field path but no position.
func (v *VolumeConfig) Validate() error {
	var es Errors
	for _, p := range v.check() {
		es = append(es, &Error{Field: p.path, Msg: p.msg})
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

func (w *walker) volumeConfig(root ast.Node) *VolumeConfig {
	known := slices.Concat(volumeFields, sortedKeys(volumeRefused))
	entries, ok := w.mapping(root, "", known, func(key string) string {
		if s := suggest(key, volumeFields); s != "" {
			return fmt.Sprintf("unknown field; did you mean %q?", s)
		}
		return ""
	})
	if !ok {
		return nil
	}
	typ, ok := w.configType(root, entries, "volume", func(typ string) string {
		if typ != "volume" {
			return fmt.Sprintf("this is a %q configuration, not a volume; `berth apply` of a volume needs `type: volume`", typ)
		}
		return ""
	})
	if !ok {
		return nil
	}
	v := &VolumeConfig{Type: typ}
	for _, e := range entries {
		if w.isNull(e.value) {
			continue
		}
		if why, refused := volumeRefused[e.key]; refused {
			w.fail(e.keyNode, e.fieldPath, "%s", why)
			continue
		}
		str := func(dst *string) {
			if s, ok := w.str(e.value, e.fieldPath); ok {
				*dst = s
			}
		}
		switch e.key {
		case "type":
		case "name":
			str(&v.Name)
		case "project":
			str(&v.Project)
		case "backend":
			str(&v.Backend)
		case "region":
			str(&v.Region)
		case "volume_id":
			str(&v.VolumeID)
		case "node":
			str(&v.Node)
		case "path":
			str(&v.Path)
		case "auto_cleanup_duration":
			if s, k := w.scalar(e.value); k == kindInt && s == "-1" {
				continue // dstack's other way to say off
			}
			off := DurationOff
			if d := w.offDuration(e.value, e.fieldPath, &off); d != nil && *d != DurationOff {
				v.AutoCleanupDuration = d
			}
		case "size":
			if s, ok := w.sizeText(e.value, e.fieldPath); ok {
				b, err := ParseBytes(s)
				if err != nil {
					w.fail(e.value, e.fieldPath, "%s", msgOf(err))
					continue
				}
				v.Size = &b
			}
		default:
			w.fail(e.keyNode, e.fieldPath, "field is known but not handled (bug in Berth)")
		}
	}
	return v
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// check is every semantic rule of a volume configuration.
func (v *VolumeConfig) check() []problem {
	var ps []problem
	add := func(p, format string, args ...any) {
		ps = append(ps, problem{p, fmt.Sprintf(format, args...)})
	}
	if v.Type != "" && v.Type != "volume" {
		add("type", "must be \"volume\", got %q", v.Type)
	}
	switch {
	case v.Name == "":
		add("name", "required: runs mount the volume by its name (`volumes: [NAME:/path]`)")
	case !runName().MatchString(v.Name):
		add("name", "%q is not a valid volume name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter", v.Name)
	}
	if v.Project != "" && !qosName().MatchString(v.Project) {
		add("project", "%q is not a project name: use letters, digits, '-', '_' and '.' (at most 64)", v.Project)
	}
	if v.IsInstance() {
		return append(ps, v.checkInstance()...)
	}
	if v.Backend == "" {
		add("backend", "required: the backend that makes the volume (Berth's: docker), or `node` and `path` for an instance volume (a host directory on a node)")
	}
	switch {
	case v.Size != nil && *v.Size <= 0:
		add("size", "must be more than 0, got %s", v.Size)
	case v.Size != nil && *v.Size >= maxBytesValue:
		add("size", "is too large")
	case v.Size == nil && v.VolumeID == "":
		add("size", "required to create a volume (or give `volume_id` to register one that exists)")
	}
	if d := v.AutoCleanupDuration; d != nil {
		if *d <= 0 {
			add("auto_cleanup_duration", "must be positive (or `off`)")
		} else if m := checkDuration(*d, false); m != "" {
			add("auto_cleanup_duration", "%s", m)
		}
	}
	if v.VolumeID != "" && !volumeIDRe().MatchString(v.VolumeID) {
		add("volume_id", "%q is not a volume id: use letters, digits, '.', '_' and '-' (at most 128)", v.VolumeID)
	}
	return ps
}

// checkInstance is the rules of an instance volume: a node and an
// absolute host directory, and none of a network volume's fields.
func (v *VolumeConfig) checkInstance() []problem {
	var ps []problem
	add := func(p, format string, args ...any) {
		ps = append(ps, problem{p, fmt.Sprintf(format, args...)})
	}
	switch {
	case v.Node == "":
		add("node", "required with `path`: the node whose directory it is (berth node list)")
	case !nodeNameRe().MatchString(v.Node):
		add("node", "%q is not a node name: use letters, digits, '.', '_' and '-' (at most 253)", v.Node)
	}
	switch {
	case v.Path == "":
		add("path", "required with `node`: the directory on the node, an absolute path")
	case !strings.HasPrefix(v.Path, "/"):
		add("path", "must be an absolute path on the node, got %q", v.Path)
	case path.Clean(v.Path) != v.Path:
		add("path", "%q is not a clean path: write %q", v.Path, path.Clean(v.Path))
	case v.Path == "/":
		add("path", "may not be the node's root directory")
	}
	const why = "is a network volume's; an instance volume (`node` and `path`) is a directory on that node"
	if v.Backend != "" {
		add("backend", "%s: remove it, or remove `node` and `path` for a network volume", why)
	}
	if v.Region != "" {
		add("region", "%s: remove it", why)
	}
	if v.Size != nil {
		add("size", "%s (its size is the node's disk): remove it", why)
	}
	if v.VolumeID != "" {
		add("volume_id", "%s: remove it", why)
	}
	if v.AutoCleanupDuration != nil {
		add("auto_cleanup_duration", "%s, which Berth never deletes: remove it", why)
	}
	return ps
}

// nodeNameRe is what a node's name may be (a host name, or an agent's
// --name).
var nodeNameRe = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$`)

// volumeIDRe is what a provider's volume name may be (Docker's rule,
// which the cloud providers' ids also meet).
var volumeIDRe = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// volumeRefName is a volume's name as a run gives it: a volume name,
// possibly with `${{ dstack.node_rank }}` (kept as text, one volume per
// node).
var volumeRefName = lazyRegexp(`^[a-z]([a-z0-9-]|\$\{\{ *dstack\.node_rank *\}\}){1,40}$`)

// NetworkNames are the volumes by name a mount may use, any one of them
// (none: a host directory given by its path).
func (v Volume) NetworkNames() []string {
	if v.Name != "" {
		return []string{v.Name}
	}
	return v.Names
}

// IsNetwork says whether v is a network volume (by name). A mount of an
// instance volume by name has its host directory filled in by the server
// (Name and InstancePath both set, which a configuration may not write):
// it is mounted as a host directory.
// The same goes for a network volume whose engine volume the server filled
// in (EngineVolume): the container engine mounts it.
func (v Volume) IsNetwork() bool {
	return (v.Name != "" || len(v.Names) > 0) && v.InstancePath == "" && v.EngineVolume == ""
}
