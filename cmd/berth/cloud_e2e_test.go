//go:build linux

package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/agent/container/containertest"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/provider/docker"
)

// Backend fleets on Docker as a cloud (issue 17): the server creates a
// container node for a waiting run, the run runs there, the idle node is
// terminated; a server killed between recording an instance and creating
// it neither leaks nor doubles it.

var (
	staticOnce sync.Once
	staticBin  string
	staticErr  error
)

// staticBerthBin is berth built without cgo, for the instances' image
// (busybox has no C library); the binary under test may be dynamic.
func staticBerthBin(t *testing.T) string {
	t.Helper()
	staticOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berth-e2e-static-")
		if err != nil {
			staticErr = err
			return
		}
		staticBin = filepath.Join(dir, "berth")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(goTool, "build", "-o", staticBin, "github.com/berth-hq/berth/cmd/berth")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			staticErr = fmt.Errorf("building a static berth: %v\n%s", err, out)
		}
	})
	if staticErr != nil {
		t.Fatal(staticErr)
	}
	return staticBin
}

// cloudCluster starts a server whose policy file has a Docker provider
// with an owner unique to the test and a backend fleet "cloud"; every
// container, volume and network of that owner is removed at the end.
func cloudCluster(t *testing.T, idle string, serverArgs ...string) (*cluster, *server, *docker.Provider) {
	t.Helper()
	return cloudClusterWith(t, fmt.Sprintf(`fleets:
  cloud:
    backend:
      backends: [docker]
      nodes: 0..2
      idle_duration: %s
`, idle), serverArgs...)
}

// cloudClusterWith is cloudCluster with the policy file's fleets block
// given (empty: none).
func cloudClusterWith(t *testing.T, fleets string, serverArgs ...string) (*cluster, *server, *docker.Provider) {
	t.Helper()
	containertest.Engine(t)
	bin := staticBerthBin(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := "e2e" + hex.EncodeToString(b[:])
	c := newCluster(t)
	policy := c.writeConfig("policy.yml", fmt.Sprintf(`providers:
  docker:
    owner: %s
    image: %s
    binary: %s
    shapes:
      - {name: medium, cpus: 2, memory: 512MB, price: 0.02}
      - {name: small, cpus: 1, memory: 256MB, price: 0.01}
%s`, owner, containertest.Image, bin, fleets))
	// The same owner's view, to check and clean what the server made.
	p, err := docker.New(context.Background(), docker.Config{Owner: owner, Image: containertest.Image, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Cleanup(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		p.Close()
	})
	// The instances reach the server through their network's gateway.
	args := append([]string{"--policy-file", policy, "--listen", "0.0.0.0:0", "--no-local-agent", "--node-timeout", "5s"}, serverArgs...)
	s := c.startServer(args...)
	return c, s, p
}

// instancesAndRecords are the provider's instances, the server's records
// of them (every state) and how many records are in each state.
func instancesAndRecords(t *testing.T, ctx context.Context, p *docker.Provider, s *server) ([]provider.Instance, []api.Instance, map[string]int) {
	t.Helper()
	ins, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var recs []api.Instance
	if err := getJSON(s, "/instances?all=1", &recs); err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	for _, x := range recs {
		states[x.State]++
	}
	return ins, recs, states
}

// getJSON GETs an API path (under /api/v1) as the admin.
func getJSON(s *server, path string, v any) error {
	req, err := http.NewRequest(http.MethodGet, s.url+"/api/v1"+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func TestCloudOfferScaleUpRunIdleTerminate(t *testing.T) {
	c, s, p := cloudCluster(t, "2s")
	ctx := context.Background()

	// berth offer: the shapes, cheapest first; a query narrows them.
	out := c.mustBerth("offer")
	for _, want := range []string{"BACKEND", "REGION", "INSTANCE", "RESOURCES", "SPOT", "PRICE", " 1  docker   local   small     1xCPU, 256MB  no    $0.010\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("berth offer lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "small"), strings.Index(out, "medium"); i < 0 || j < i {
		t.Errorf("berth offer is not sorted by price:\n%s", out)
	}
	var offers []provider.Offer
	if err := json.Unmarshal([]byte(c.mustBerth("offer", "--cpu", "2..", "--json")), &offers); err != nil {
		t.Fatal(err)
	}
	if len(offers) != 1 || offers[0].Instance != "medium" {
		t.Errorf("berth offer --cpu 2.. --json = %+v, want medium only", offers)
	}

	// A run for the fleet, which has no node: the server creates one.
	task := c.writeConfig("cloud.berth.yml", `type: task
name: on-cloud
fleets: [cloud]
shell: sh
resources: {cpu: 1, memory: 128MB}
commands:
  - echo "hello from $(hostname)"
`)
	// Its plan: no node, and the offers the fleet could create for it.
	plan := c.berth("", "apply", "--dry-run", "-f", task)
	if all := plan.stdout + plan.stderr; plan.code != 0 || !strings.Contains(all, "Offers a backend fleet can create for it") || !strings.Contains(all, "small     1xCPU, 256MB") {
		t.Errorf("apply --dry-run does not list the offers: %s", plan)
	}
	start := time.Now()
	if r := c.berth("", "apply", "-y", "--detach", "-f", task); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitRun("on-cloud", 2*time.Minute, "provisioning", func(r *api.Run) bool {
		return r.Reason == "ProvisioningNodes" || r.Status.Finished() || r.Status == api.StatusRunning
	})
	r := c.waitFinished("on-cloud", 3*time.Minute)
	if r.Status != api.StatusDone {
		c.dumpLogs()
		t.Fatalf("run on-cloud: %s (%s)", r.Status, r.Reason)
	}
	t.Logf("scale-up: run submitted to done on a new node in %v", time.Since(start).Round(time.Millisecond))
	ins, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].Offer.Instance != "small" {
		t.Fatalf("instances: %+v, want one of the cheapest shape that fits (small)", ins)
	}
	c.waitLog("on-cloud", "hello from "+ins[0].Key, 30*time.Second)

	// Idle past idle_duration (2 s): terminated, the record gone.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ins, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ins) == 0 {
			break
		}
		if time.Now().After(deadline) {
			c.dumpLogs()
			t.Fatalf("the idle instance was not terminated: %+v", ins)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var recs []api.Instance
	if err := getJSON(s, "/instances?all=1", &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].State != "gone" || !strings.Contains(recs[0].Detail, "idle") {
		t.Fatalf("instance records: %+v, want one gone for idleness", recs)
	}
}

func TestCloudCrashBetweenRecordAndCreate(t *testing.T) {
	c, s, p := cloudCluster(t, "1h", "--cloud-pause-after-record", "1h")
	ctx := context.Background()
	task := c.writeConfig("cloud.berth.yml", `type: task
name: after-crash
fleets: [cloud]
shell: sh
commands:
  - echo survived
`)
	if r := c.berth("", "apply", "-y", "--detach", "-f", task); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	// The server recorded the instance and waits before creating it: kill it there.
	log := filepath.Join(c.home, "server-1.log")
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "cloud: pausing between record and create") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never recorded an instance:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ins, _ := p.List(ctx); len(ins) != 0 {
		t.Fatalf("an instance exists before Create: %+v", ins)
	}
	s.kill9()
	// Restart without the pause: the record is reconciled (nothing was
	// created: gone), and the run's node is created once.
	var args []string
	for i := 0; i < len(s.args); i++ {
		if s.args[i] == "--cloud-pause-after-record" {
			i++
			continue
		}
		args = append(args, s.args[i])
	}
	s.args = args
	s.start()
	r := c.waitFinished("after-crash", 3*time.Minute)
	if r.Status != api.StatusDone {
		c.dumpLogs()
		t.Fatalf("run after-crash: %s (%s)", r.Status, r.Reason)
	}
	ins, recs, states := instancesAndRecords(t, ctx, p, s)
	if len(ins) != 1 || states["active"] != 1 || states["gone"] != 1 || len(recs) != 2 {
		t.Fatalf("after the crash: instances %+v, records %+v; want one instance, one active record and the crashed one gone", ins, recs)
	}
	for _, x := range recs {
		if x.State == "active" && x.Key != ins[0].Key {
			t.Fatalf("the active record %s is not the instance %s", x.Key, ins[0].Key)
		}
	}
}

// A node's container killed from outside (as a cloud takes a spot instance
// back) is an interruption: the job fails as unreachable, the run retries
// on a new node the fleet creates, and the dead instance is terminated.
func TestCloudInterruptionRetriesOnANewNode(t *testing.T) {
	c, s, p := cloudCluster(t, "1h")
	ctx := context.Background()
	task := c.writeConfig("cloud.berth.yml", `type: task
name: interrupted
fleets: [cloud]
shell: sh
retry:
  on_events: [interruption]
  duration: 10m
commands:
  - echo "attempt $BERTH_ATTEMPT on $(hostname)"
  - if [ "$BERTH_ATTEMPT" = 0 ]; then sleep 600; fi
`)
	if r := c.berth("", "apply", "-y", "--detach", "-f", task); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	c.waitLog("interrupted", "attempt 0 on cloud-", 3*time.Minute)
	first, err := p.List(ctx)
	if err != nil || len(first) != 1 {
		t.Fatalf("instances while the first attempt runs: %+v, %v", first, err)
	}
	if err := p.Kill(ctx, first[0].Key); err != nil {
		t.Fatal(err)
	}
	r := c.waitFinished("interrupted", 4*time.Minute)
	if r.Status != api.StatusDone {
		c.dumpLogs()
		t.Fatalf("run interrupted: %s (%s)", r.Status, r.Reason)
	}
	c.waitLog("interrupted", "attempt 1 on cloud-", 30*time.Second)
	// The killed instance is terminated and its record gone; the new one
	// holds the second attempt.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var recs []api.Instance
		if err := getJSON(s, "/instances?all=1", &recs); err != nil {
			t.Fatal(err)
		}
		ins, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gone := false
		for _, x := range recs {
			if x.Key == first[0].Key && x.State == "gone" {
				gone = true
			}
		}
		alive := len(ins) == 1 && ins[0].Key != first[0].Key
		if gone && alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the interruption: records %+v, instances %+v; want the killed one gone and one new", recs, ins)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
