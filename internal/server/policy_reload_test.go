package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
)

// newPolicyHarness serves with the policy file text written at a path the
// server reads and writes; it returns the path.
func newPolicyHarness(t *testing.T, text string) (*harness, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessCfg(t, dir, "127.0.0.1:0", func(c *Config) { c.Rules, c.PolicyFile = p, path }), path
}

func apiStatus(err error) int {
	var e *client.APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func qosNames(t *testing.T, h *harness) string {
	t.Helper()
	p, err := h.c.Policy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range p.QOS {
		names = append(names, fmt.Sprintf("%s:%d", q.Name, q.Priority))
	}
	return strings.Join(names, ",")
}

// A reload reads the file again; a bad file is refused with its line and
// field, and the rules in force stay. ReloadPolicy is what SIGHUP calls.
func TestPolicyReload(t *testing.T) {
	ctx := context.Background()
	h, path := newPolicyHarness(t, "qos:\n  normal: {}\n")
	os.WriteFile(path, []byte("qos:\n  normal: {}\n  high:\n    priority: 100\n    preempt_mode: sometimes\n"), 0o600)
	_, err := h.c.ReloadPolicy(ctx)
	if apiStatus(err) != 400 || !strings.Contains(err.Error(), "policy.yml:5:") || !strings.Contains(err.Error(), "qos.high.preempt_mode") {
		t.Fatalf("bad file: %v, want a 400 naming line 5 and qos.high.preempt_mode", err)
	}
	if got := qosNames(t, h); got != "normal:0" {
		t.Errorf("after a refused reload the QOS are %s, want normal:0 as before", got)
	}
	if err := h.srv.ReloadPolicy(); err == nil {
		t.Error("ReloadPolicy took a bad file")
	}
	os.WriteFile(path, []byte("qos:\n  normal: {}\n  high: {priority: 100}\n"), 0o600)
	if err := h.srv.ReloadPolicy(); err != nil {
		t.Fatal(err)
	}
	if got := qosNames(t, h); got != "high:100,normal:0" {
		t.Errorf("after SIGHUP's reload the QOS are %s", got)
	}
	// The new QOS takes submissions at once.
	submit(t, h, "type: task\ncommands: [\"true\"]\nqos: high\n")
	os.Remove(path)
	if _, err := h.c.ReloadPolicy(ctx); apiStatus(err) != 400 || qosNames(t, h) != "high:100,normal:0" {
		t.Errorf("a missing file: %v; the rules must stay", err)
	}
	if _, err := h.userClient(t, "bob").ReloadPolicy(ctx); apiStatus(err) != 403 {
		t.Errorf("bob's reload: %v, want 403", err)
	}
}

// PUT /policy/file writes the text edited from the version it names, only
// that, only valid, only for an admin.
func TestPolicyFilePut(t *testing.T) {
	ctx := context.Background()
	const first = "# the lab's rules\nqos:\n  normal: {}\n"
	h, path := newPolicyHarness(t, first)
	f, err := h.c.PolicyFile(ctx)
	if err != nil || f.Text != first || f.Version != policy.Version([]byte(first)) {
		t.Fatalf("GET: %+v %v", f, err)
	}
	next := first + "  high: {priority: 100}\n"
	if _, err := h.userClient(t, "bob").PutPolicyFile(ctx, next, f.Version); apiStatus(err) != 403 {
		t.Errorf("bob's PUT: %v, want 403", err)
	}
	bad := first + "  high: {priority: 100, preempt: [gold]}\n"
	if _, err := h.c.PutPolicyFile(ctx, bad, f.Version); apiStatus(err) != 400 || !strings.Contains(err.Error(), "policy.yml:4:") || !strings.Contains(err.Error(), "qos.high.preempt[0]") {
		t.Errorf("bad text: %v, want a 400 naming line 4 and qos.high.preempt[0]", err)
	}
	put, err := h.c.PutPolicyFile(ctx, next, f.Version)
	if err != nil || put.Version != policy.Version([]byte(next)) {
		t.Fatalf("PUT: %+v %v", put, err)
	}
	if b, _ := os.ReadFile(path); string(b) != next {
		t.Errorf("file after PUT: %q", b)
	}
	if got := qosNames(t, h); got != "high:100,normal:0" {
		t.Errorf("QOS after PUT: %s", got)
	}
	// The first version is stale now: a lost update is refused.
	_, err = h.c.PutPolicyFile(ctx, first+"  low: {}\n", f.Version)
	if !errors.Is(err, client.ErrConflict) {
		t.Errorf("stale version: %v, want 409", err)
	}
	if b, _ := os.ReadFile(path); string(b) != next {
		t.Errorf("file after refused PUTs: %q", b)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".policy.yml.*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// No file yet: empty text, empty version, and a PUT creates it.
	os.Remove(path)
	if f, err := h.c.PolicyFile(ctx); err != nil || f.Text != "" || f.Version != "" {
		t.Errorf("no file: %+v %v", f, err)
	}
	if _, err := h.c.PutPolicyFile(ctx, first, ""); err != nil {
		t.Errorf("creating the file: %v", err)
	}
}
