package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/server"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// TestMain lets the test binary act as the job supervisor (`berth shim`),
// so that the tests run a real agent with real job processes.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "berth-shim" {
		os.Exit(agent.RunShim(os.Args[2]))
	}
	os.Exit(m.Run())
}

const adminToken = "web-test-admin-token"

// cluster is a real server (SQLite in the test's directory) served over
// real HTTP on a free port, with one real agent, node1 (2 CPUs, 2 GPUs
// declared).
type cluster struct {
	url   string
	admin *client.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	st, err := store.OpenSQLite(ctx, filepath.Join(dir, "berth.db"), store.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A Docker provider configured but never started (no Providers): a
	// backend fleet file can be applied and listed, and creates nothing.
	rules, err := policy.Parse("policy.yml", []byte("providers:\n  docker:\n    image: local/busybox:ci\n    shapes: [{name: small, cpus: 1, memory: 256MB}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{Store: st, Logger: quiet, StopGrace: time.Second, PingEvery: 200 * time.Millisecond,
		DashboardPoll: time.Hour, Rules: rules}) // the live views follow changes, not a timer
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.EnsureAdmin(ctx, adminToken); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler()) // 127.0.0.1:0
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	c := &cluster{url: hs.URL, admin: client.New(hs.URL, adminToken)}

	gpus, err := agent.ParseGPUs("A100:80GB:2", func(s string) (int64, error) { b, err := spec.ParseBytes(s); return int64(b), err })
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Server: hs.URL, Token: adminToken, Name: "node1", DataDir: filepath.Join(dir, "agent"), CPUs: 2,
		GPUs: gpus, DeclaredGPUs: true, ShimCommand: []string{os.Args[0], "berth-shim"}, Logger: quiet, LogTick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan struct{})
	go func() { a.Run(actx); close(adone) }()
	t.Cleanup(func() {
		acancel()
		<-adone
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		st.Close()
	})
	waitFor(t, "node1 online", func() bool {
		ns, err := c.admin.Nodes(ctx)
		return err == nil && len(ns) == 1 && ns[0].Status != "offline"
	})
	return c
}

// submit submits a task through the API as the admin.
func (c *cluster) submit(t *testing.T, yaml string) *api.Run {
	t.Helper()
	task, err := spec.Parse("test.yml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.admin.Submit(context.Background(), api.SubmitRequest{Spec: task})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// userToken makes a user who is not an administrator, and their token.
func (c *cluster) userToken(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.admin.CreateUser(ctx, api.UserRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.admin.CreateToken(ctx, api.TokenRequest{User: name})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// apiHeld is a short task submitted held.
func apiHeld(t *testing.T) api.SubmitRequest {
	task, err := spec.Parse("held.yml", []byte("type: task\nname: held1\ncommands:\n  - echo held\n"))
	if err != nil {
		t.Fatal(err)
	}
	return api.SubmitRequest{Spec: task, Hold: true}
}
