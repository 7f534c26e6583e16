package spec

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestService: every service field parses, and the spec travels as JSON
// (the server's path) to the same configuration.
func TestService(t *testing.T) {
	src := `type: service
name: llm
port: "8080:8000"
replicas: 0..4
scaling: {metric: rps, target: 10, scale_down_delay: 5m}
probes:
  - type: http
    url: /health
    interval: 2s
    timeout: 1s
    ready_after: 2
model: {name: meta/llama, format: openai}
auth: false
https: auto
strip_prefix: false
rate_limits:
  - prefix: /v1
    rps: 5
    burst: 10
    key: {type: header, header: X-User}
commands: [python3 -m http.server 8000]
`
	got, err := Parse("svc.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsService() || got.ServicePort() != 8000 || got.ReplicaRange() != (Replicas{0, 4}) || got.AuthRequired() || got.StripsPrefix() ||
		got.Scaling.Target != 10 || *got.Scaling.ScaleDownDelay != 300 || len(got.Probes) != 1 || got.Probes[0].ReadyAfter != 2 ||
		*got.Probes[0].Interval != 2 || got.Model.Name != "meta/llama" || got.HTTPS != "auto" || got.RateLimits[0].Key.Header != "X-User" {
		t.Fatalf("parsed %+v", got)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeJSON(b, Limits{ScriptBytes: 1 << 20})
	if err != nil {
		t.Fatalf("DecodeJSON of %s: %v", b, err)
	}
	b2, _ := json.Marshal(again)
	if string(b) != string(b2) {
		t.Errorf("JSON round trip:\n%s\n%s", b, b2)
	}
	var viaStd Task
	if err := json.Unmarshal(b, &viaStd); err != nil || viaStd.ReplicaRange() != (Replicas{0, 4}) {
		t.Errorf("json.Unmarshal: %+v, %v", viaStd.Replicas, err)
	}
	one, err := Parse("svc.yml", []byte("type: service\nport: 8000\nmodel: m1\ncommands: [x]\n"))
	if err != nil || one.ReplicaRange() != (Replicas{1, 1}) || !one.AuthRequired() || !one.StripsPrefix() || one.Model.Name != "m1" {
		t.Errorf("defaults: %+v, %v", one, err)
	}
}

func TestServiceErrors(t *testing.T) {
	tests := map[string]struct {
		yaml, want string
	}{
		"no port":         {"type: service\ncommands: [x]\n", "svc.yml:1:1: port: required for a service"},
		"bad port":        {"type: service\nport: http\ncommands: [x]\n", "svc.yml:2:7: port: invalid port"},
		"range no scale":  {"type: service\nport: 80\nreplicas: 1..3\ncommands: [x]\n", "scaling: required when replicas is a range"},
		"bad range":       {"type: service\nport: 80\nreplicas: 3..1\nscaling: {metric: rps, target: 1}\ncommands: [x]\n", "svc.yml:3:11: replicas: range 3..1"},
		"bad replicas":    {"type: service\nport: 80\nreplicas: many\ncommands: [x]\n", "svc.yml:3:11: replicas: invalid replicas"},
		"bad metric":      {"type: service\nport: 80\nreplicas: 0..2\nscaling: {metric: cpu, target: 1}\ncommands: [x]\n", "scaling.metric: must be rps"},
		"probe url":       {"type: service\nport: 80\nprobes: [{type: http, url: health}]\ncommands: [x]\n", "probes[0].url: must be a path"},
		"probe type":      {"type: service\nport: 80\nprobes: [{type: tcp}]\ncommands: [x]\n", "probes[0].type: must be http"},
		"model format":    {"type: service\nport: 80\nmodel: {name: m, format: tgi}\ncommands: [x]\n", "model.format: must be openai"},
		"rate limit":      {"type: service\nport: 80\nrate_limits: [{rps: 0}]\ncommands: [x]\n", "rate_limits[0].rps: must be a positive"},
		"port in a task":  {"type: task\ncommands: [x]\nport: 80\n", "svc.yml:3:7: port: belongs to service configurations"},
		"nodes":           {"type: service\nport: 80\nnodes: 2\ncommands: [x]\n", "nodes: a service's replica runs on one node"},
		"no commands":     {"type: service\nport: 80\n", "commands"},
		"replica groups":  {"type: service\nport: 80\nreplicas: [{count: 1}]\ncommands: [x]\n", "replica groups are not supported"},
		"auth not a bool": {"type: service\nport: 80\nauth: maybe\ncommands: [x]\n", "svc.yml:3:7: auth:"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("svc.yml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
