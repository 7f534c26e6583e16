package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// A service (`type: service`) is a task whose replicas serve HTTP on
// `port`, reached through the server's gateway (internal/server/gateway.go)
// at /proxy/services/PROJECT/NAME/. The server keeps `replicas` of them
// running (internal/server/services.go).

// ServiceFields are the top-level keys only a service has.
var ServiceFields = []string{"port", "replicas", "scaling", "probes", "model", "auth", "https", "strip_prefix", "rate_limits"}

// MaxReplicas bounds a service's replica count.
const MaxReplicas = 64

// Replicas is a fixed count (Min == Max) or a range for the autoscaler.
type Replicas struct {
	Min int
	Max int
}

// String is "N" or "MIN..MAX".
func (r Replicas) String() string {
	if r.Min == r.Max {
		return strconv.Itoa(r.Min)
	}
	return fmt.Sprintf("%d..%d", r.Min, r.Max)
}

// MarshalJSON writes N or "MIN..MAX", as written in YAML.
func (r Replicas) MarshalJSON() ([]byte, error) {
	if r.Min == r.Max {
		return []byte(strconv.Itoa(r.Min)), nil
	}
	return json.Marshal(r.String())
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Replicas) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*r = Replicas{n, n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	x, msg := parseReplicas(s)
	if msg != "" {
		return fmt.Errorf("replicas: %s", msg)
	}
	*r = x
	return nil
}

func parseReplicas(s string) (Replicas, string) {
	s = strings.TrimSpace(s)
	lo, hi, ranged := strings.Cut(s, "..")
	if !ranged {
		lo, hi = s, s
	}
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil {
		return Replicas{}, fmt.Sprintf("invalid replicas %q (expected a count such as 2, or a range such as 0..4)", s)
	}
	return Replicas{a, b}, ""
}

// Scaling is the autoscaler's target: Target requests per second per
// replica (Metric "rps"), averaged over the gateway's window.
type Scaling struct {
	Metric         string    `json:"metric"`
	Target         float64   `json:"target"`
	ScaleUpDelay   *Duration `json:"scale_up_delay,omitempty"`
	ScaleDownDelay *Duration `json:"scale_down_delay,omitempty"`
}

// Probe is an HTTP readiness probe: a replica takes requests once
// ReadyAfter probes in a row answered 2xx.
type Probe struct {
	Type       string    `json:"type"` // "http"
	URL        string    `json:"url,omitempty"`
	Method     string    `json:"method,omitempty"`
	Timeout    *Duration `json:"timeout,omitempty"`
	Interval   *Duration `json:"interval,omitempty"`
	ReadyAfter int       `json:"ready_after,omitempty"`
}

// Probe defaults, as dstack's.
const (
	DefaultProbeTimeout  Duration = 10
	DefaultProbeInterval Duration = 15
)

// Model names the OpenAI-compatible model a service serves: the gateway
// answers /proxy/models/PROJECT/ (chat completions, completions, models)
// by passing requests for Name to this service under Prefix.
type Model struct {
	Type   string `json:"type,omitempty"`   // "chat"
	Name   string `json:"name"`             //
	Format string `json:"format,omitempty"` // "openai"
	Prefix string `json:"prefix,omitempty"` // default /v1
}

// RateLimit is a request-rate limit on paths under Prefix, per client
// (Key: ip_address, or a header's value).
type RateLimit struct {
	Prefix string        `json:"prefix,omitempty"`
	RPS    float64       `json:"rps"`
	Burst  int           `json:"burst,omitempty"`
	Key    *RateLimitKey `json:"key,omitempty"`
}

// RateLimitKey is what a rate limit counts by: Type "ip_address" (the
// default) or "header" (the value of Header).
type RateLimitKey struct {
	Type   string `json:"type"`
	Header string `json:"header,omitempty"`
}

// IsService reports whether t is a service.
func (t *Task) IsService() bool { return t.Type == "service" }

// ServicePort is the port the replicas serve on (the container's side of
// `port`).
func (t *Task) ServicePort() int {
	if t.Port == nil {
		return 0
	}
	return t.Port.ContainerPort
}

// ReplicaRange is the replica bounds (default 1).
func (t *Task) ReplicaRange() Replicas {
	if t.Replicas == nil {
		return Replicas{1, 1}
	}
	return *t.Replicas
}

// AuthRequired reports whether the gateway asks for a project member's
// token (the default).
func (t *Task) AuthRequired() bool { return t.Auth == nil || *t.Auth }

// StripsPrefix reports whether the gateway strips /proxy/services/P/N
// from the path it passes on (the default).
func (t *Task) StripsPrefix() bool { return t.StripPrefix == nil || *t.StripPrefix }

func (w *walker) servicePort(n ast.Node, path string) *PortMapping {
	if _, isMap := w.resolve(n).(*ast.MappingNode); isMap {
		if pm := w.ports(&ast.SequenceNode{Values: []ast.Node{n}}, path); len(pm) == 1 {
			return &pm[0]
		}
		return nil
	}
	s, k := w.scalar(n)
	if k != kindInt && k != kindString {
		w.fail(n, path, "must be a port such as 8000 or \"8080:8000\", not %s", describeScalar(s, k, w.resolve(n)))
		return nil
	}
	pm, msg := parsePort(s)
	if msg == "" && pm.ContainerPort < 1 {
		msg = "port 0 is out of range 1..65535"
	}
	if msg != "" {
		w.fail(n, path, "%s", msg)
		return nil
	}
	return &pm
}

func (w *walker) replicas(n ast.Node, path string) *Replicas {
	s, k := w.scalar(n)
	if k == kindInt || k == kindString {
		if r, msg := parseReplicas(s); msg == "" {
			return &r
		} else if k == kindString {
			w.fail(n, path, "%s", msg)
			return nil
		}
	}
	if _, isSeq := w.resolve(n).(*ast.SequenceNode); isSeq {
		w.fail(n, path, "replica groups are not supported; write a count such as 2 or a range such as 0..4")
		return nil
	}
	w.fail(n, path, "must be a count such as 2 or a range such as 0..4, not %s", describeScalar(s, k, w.resolve(n)))
	return nil
}

func (w *walker) float(n ast.Node, path string) (float64, bool) {
	s, k := w.scalar(n)
	if k == kindInt || k == kindFloat {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f, true
		}
	}
	w.fail(n, path, "must be a number, not %s", describeScalar(s, k, w.resolve(n)))
	return 0, false
}

func (w *walker) scaling(n ast.Node, path string) *Scaling {
	entries, ok := w.mapping(n, path, []string{"metric", "target", "scale_up_delay", "scale_down_delay"}, nil)
	if !ok {
		return nil
	}
	sc := &Scaling{}
	for _, e := range entries {
		switch e.key {
		case "metric":
			sc.Metric, _ = w.str(e.value, e.fieldPath)
		case "target":
			sc.Target, _ = w.float(e.value, e.fieldPath)
		case "scale_up_delay", "scale_down_delay":
			if d, ok := w.duration(e.value, e.fieldPath); ok {
				if e.key == "scale_up_delay" {
					sc.ScaleUpDelay = &d
				} else {
					sc.ScaleDownDelay = &d
				}
			}
		}
	}
	return sc
}

func (w *walker) probes(n ast.Node, path string) []Probe {
	return items(w, n, path, "[{type: http, url: /health}]", func(it ast.Node, p string) (Probe, bool) {
		entries, ok := w.mapping(it, p, []string{"type", "url", "method", "timeout", "interval", "ready_after"}, nil)
		if !ok {
			return Probe{}, false
		}
		var pr Probe
		for _, e := range entries {
			switch e.key {
			case "type":
				pr.Type, _ = w.str(e.value, e.fieldPath)
			case "url":
				pr.URL, _ = w.str(e.value, e.fieldPath)
			case "method":
				pr.Method, _ = w.str(e.value, e.fieldPath)
			case "timeout", "interval":
				if d, ok := w.duration(e.value, e.fieldPath); ok {
					if e.key == "timeout" {
						pr.Timeout = &d
					} else {
						pr.Interval = &d
					}
				}
			case "ready_after":
				pr.ReadyAfter, _ = w.integer(e.value, e.fieldPath)
			}
		}
		return pr, true
	})
}

func (w *walker) model(n ast.Node, path string) *Model {
	if s, k := w.scalar(n); k == kindString {
		return &Model{Name: s}
	}
	entries, ok := w.mapping(n, path, []string{"type", "name", "format", "prefix"}, nil)
	if !ok {
		return nil
	}
	m := &Model{}
	for _, e := range entries {
		dst := map[string]*string{"type": &m.Type, "name": &m.Name, "format": &m.Format, "prefix": &m.Prefix}[e.key]
		*dst, _ = w.str(e.value, e.fieldPath)
	}
	return m
}

func (w *walker) rateLimits(n ast.Node, path string) []RateLimit {
	return items(w, n, path, "[{prefix: /, rps: 10}]", func(it ast.Node, p string) (RateLimit, bool) {
		entries, ok := w.mapping(it, p, []string{"prefix", "rps", "burst", "key"}, nil)
		if !ok {
			return RateLimit{}, false
		}
		var rl RateLimit
		for _, e := range entries {
			switch e.key {
			case "prefix":
				rl.Prefix, _ = w.str(e.value, e.fieldPath)
			case "rps":
				rl.RPS, _ = w.float(e.value, e.fieldPath)
			case "burst":
				rl.Burst, _ = w.integer(e.value, e.fieldPath)
			case "key":
				kes, ok := w.mapping(e.value, e.fieldPath, []string{"type", "header"}, nil)
				if ok {
					rl.Key = &RateLimitKey{}
					for _, ke := range kes {
						if ke.key == "type" {
							rl.Key.Type, _ = w.str(ke.value, ke.fieldPath)
						} else {
							rl.Key.Header, _ = w.str(ke.value, ke.fieldPath)
						}
					}
				}
			}
		}
		return rl, true
	})
}

// httpsValue reads `https`: true, false or auto.
func (w *walker) httpsValue(n ast.Node, path string) string {
	s, k := w.scalar(n)
	if k == kindBool || (k == kindString && s == "auto") {
		return strings.ToLower(s)
	}
	w.fail(n, path, "must be true, false or auto, not %s", describeScalar(s, k, w.resolve(n)))
	return ""
}

// checkService adds the errors of a service's fields, and of their use in
// another type.
func (t *Task) checkService(add func(path, format string, args ...any)) {
	if !t.IsService() {
		for _, f := range t.SetFields() {
			for _, sf := range ServiceFields {
				if f == sf {
					add(f, "belongs to service configurations; add `type: service` (or remove it)")
				}
			}
		}
		return
	}
	if t.Port == nil {
		add("port", "required for a service: the port its replicas serve HTTP on, such as 8000")
	}
	if t.Nodes > 1 {
		add("nodes", "a service's replica runs on one node; use `replicas` for more")
	}
	if len(t.Groups) > 0 || t.Array != "" || t.Schedule != nil || len(t.DependsOn) > 0 {
		add("type", "a service has no groups, array, schedule or depends_on")
	}
	r := t.ReplicaRange()
	switch {
	case r.Min < 0:
		add("replicas", "must be at least 0, got %d", r.Min)
	case r.Max < r.Min:
		add("replicas", "range %s: the upper bound is below the lower", r)
	case r.Max < 1:
		add("replicas", "must allow at least one replica")
	case r.Max > MaxReplicas:
		add("replicas", "must be at most %d, got %d", MaxReplicas, r.Max)
	}
	if r.Min != r.Max && t.Scaling == nil {
		add("scaling", "required when replicas is a range (%s): add `scaling: {metric: rps, target: 10}`", r)
	}
	if sc := t.Scaling; sc != nil {
		if sc.Metric != "rps" {
			add("scaling.metric", "must be rps, got %q", sc.Metric)
		}
		if sc.Target <= 0 {
			add("scaling.target", "must be a positive number of requests per second per replica")
		}
	}
	for i, p := range t.Probes {
		at := index("probes", i)
		if p.Type != "http" {
			add(at+".type", "must be http, got %q", p.Type)
		}
		if p.URL != "" && !strings.HasPrefix(p.URL, "/") {
			add(at+".url", "must be a path starting with /, got %q", p.URL)
		}
		if p.Method != "" {
			if m := checkEnum(strings.ToLower(p.Method), []string{"get", "head", "post", "put", "delete", "patch", "options"}); m != "" {
				add(at+".method", "%s", m)
			}
		}
		if p.ReadyAfter < 0 {
			add(at+".ready_after", "must be at least 1, got %d", p.ReadyAfter)
		}
		for _, d := range []struct {
			name string
			v    *Duration
		}{{"timeout", p.Timeout}, {"interval", p.Interval}} {
			if d.v != nil && *d.v < 1 {
				add(at+"."+d.name, "must be at least 1s")
			}
		}
	}
	if m := t.Model; m != nil {
		if m.Name == "" {
			add("model.name", "required")
		}
		if m.Type != "" && m.Type != "chat" {
			add("model.type", "must be chat, got %q", m.Type)
		}
		if m.Format != "" && m.Format != "openai" {
			add("model.format", "must be openai (the replicas serve an OpenAI-compatible API; tgi is not supported), got %q", m.Format)
		}
		if m.Prefix != "" && !strings.HasPrefix(m.Prefix, "/") {
			add("model.prefix", "must be a path starting with /, got %q", m.Prefix)
		}
	}
	for i, rl := range t.RateLimits {
		at := index("rate_limits", i)
		if rl.RPS <= 0 {
			add(at+".rps", "must be a positive number of requests per second")
		}
		if rl.Burst < 0 {
			add(at+".burst", "must be at least 0")
		}
		if k := rl.Key; k != nil && k.Type != "ip_address" && k.Type != "header" {
			add(at+".key.type", "must be ip_address or header, got %q", k.Type)
		}
		if k := rl.Key; k != nil && k.Type == "header" && k.Header == "" {
			add(at+".key.header", "required with key type header")
		}
	}
}
