package container_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/agent/container/containertest"
)

// jobID makes test containers' labels unique to this test run.
var jobID = time.Now().UnixNano() % 1e9

// newSpec is a container of the test image running script in /bin/sh,
// labelled and named uniquely for the test.
func newSpec(t *testing.T, script string) container.Spec {
	jobID++
	return container.Spec{
		Name:       container.NewName("test-"+t.Name(), jobID),
		Labels:     map[string]string{container.LabelManaged: "1", container.LabelNode: "containertest", container.LabelJob: strconv.FormatInt(jobID, 10)},
		Image:      containertest.Image,
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{script},
	}
}

// start creates and starts s, and removes the container when the test ends.
func start(t *testing.T, e *container.Engine, s container.Spec) *container.Container {
	t.Helper()
	ctx := context.Background()
	c, err := e.Create(ctx, s, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(context.Background()); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// syncBuf is a bytes.Buffer safe for a writer and a poller.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// follow copies c's output into a buffer in the background.
func follow(c *container.Container) (*syncBuf, <-chan error) {
	var out syncBuf
	done := make(chan error, 1)
	go func() {
		_, err := c.Logs(context.Background(), 0, &out, &out)
		done <- err
	}()
	return &out, done
}

func waitFor(t *testing.T, out *syncBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after 20s; output: %q", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOutputAndExitCode(t *testing.T) {
	e := containertest.Engine(t)
	c := start(t, e, newSpec(t, "echo out; echo err >&2; echo out2; exit 3"))
	var stdout, stderr bytes.Buffer
	n, err := c.Logs(context.Background(), 0, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "out\nout2\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if n != int64(stdout.Len()+stderr.Len()) {
		t.Errorf("Logs reached offset %d, want %d", n, stdout.Len()+stderr.Len())
	}
	st, err := c.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 3 || st.OOMKilled || st.Running || st.StartedAt.IsZero() || st.FinishedAt.IsZero() {
		t.Errorf("state = %+v, want exit 3", st)
	}
}

func TestEnvWorkingDirAndVolumes(t *testing.T) {
	e := containertest.Engine(t)
	rw, ro := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSpec(t, `echo "$GREETING from $(pwd)" > /data/out.txt; cat /in/in.txt; echo x > /in/no.txt && echo ro-written; exit 0`)
	s.Env = []string{"GREETING=hello"}
	s.WorkingDir = "/work/dir"
	missing := filepath.Join(t.TempDir(), "created")
	s.Mounts = []container.Mount{
		{Source: rw, Target: "/data"},
		{Source: ro, Target: "/in", ReadOnly: true},
		{Source: missing, Target: "/created"},
		{Source: filepath.Join(t.TempDir(), "absent"), Target: "/absent", Optional: true},
	}
	c := start(t, e, s)
	var out bytes.Buffer
	if _, err := c.Logs(context.Background(), 0, &out, &out); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(context.Background())
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("state %+v, %v; output %q", st, err, out.String())
	}
	b, err := os.ReadFile(filepath.Join(rw, "out.txt"))
	if err != nil || string(b) != "hello from /work/dir\n" {
		t.Errorf("file written in the container: %q, %v", b, err)
	}
	if !strings.Contains(out.String(), "from host\n") || strings.Contains(out.String(), "ro-written") {
		t.Errorf("output %q: want the host's file read, and no write to the read-only volume", out.String())
	}
	if _, err := os.Stat(filepath.Join(ro, "no.txt")); err == nil {
		t.Error("a file was written through a read-only volume")
	}
	if fi, err := os.Stat(missing); err != nil || !fi.IsDir() {
		t.Errorf("a missing required volume source is not created: %v", err)
	}
}

func TestMemoryLimitOOMKilled(t *testing.T) {
	e := containertest.Engine(t)
	s := newSpec(t, "set -e; echo start; dd if=/dev/zero of=/dev/null bs=100M count=1; echo survived")
	s.Memory = 32 << 20
	c := start(t, e, s)
	var out bytes.Buffer
	_, _ = c.Logs(context.Background(), 0, &out, &out)
	st, err := c.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.OOMKilled || st.ExitCode != 137 || strings.Contains(out.String(), "survived") {
		t.Errorf("state = %+v (output %q), want OOMKilled, exit 137", st, out.String())
	}
}

func TestStopGraceful(t *testing.T) {
	e := containertest.Engine(t)
	dir := t.TempDir()
	s := newSpec(t, "trap 'echo term > /data/marker; exit 0' TERM; echo ready; sleep 60 & wait")
	s.Mounts = []container.Mount{{Source: dir, Target: "/data"}}
	c := start(t, e, s)
	out, _ := follow(c)
	waitFor(t, out, "ready")
	begin := time.Now()
	if err := c.Stop(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 8*time.Second {
		t.Errorf("a job that exits on SIGTERM took %v to stop", d)
	}
	st, err := c.Wait(context.Background())
	if err != nil || st.ExitCode != 0 {
		t.Errorf("state %+v, %v: want exit 0 from the trap", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "marker")); err != nil || string(b) != "term\n" {
		t.Errorf("marker %q, %v: the job did not get SIGTERM", b, err)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	e := containertest.Engine(t)
	c := start(t, e, newSpec(t, "trap '' TERM; echo ready; sleep 60 & wait"))
	out, _ := follow(c)
	waitFor(t, out, "ready")
	begin := time.Now()
	if err := c.Stop(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < time.Second || d > 15*time.Second {
		t.Errorf("stop took %v, want the 1s grace then SIGKILL", d)
	}
	st, err := c.Wait(context.Background())
	if err != nil || st.ExitCode != 137 {
		t.Errorf("state %+v, %v: want 137 (SIGKILL)", st, err)
	}
}

// stopAfter is a writer that cancels its context once it holds n lines.
type stopAfter struct {
	bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (s *stopAfter) Write(p []byte) (int, error) {
	n, err := s.Buffer.Write(p)
	if strings.Count(s.String(), "\n") >= s.n {
		s.cancel()
	}
	return n, err
}

// A supervisor that dies (drops its handle) is replaced by one that finds
// the container by its labels and resumes the output where the first left.
func TestReattachByLabel(t *testing.T) {
	e := containertest.Engine(t)
	s := newSpec(t, "for i in 1 2 3 4 5 6; do echo line$i; echo err$i >&2; sleep 0.2; done; exit 4")
	first := start(t, e, s)
	ctx, cancel := context.WithCancel(context.Background())
	got := &stopAfter{n: 3, cancel: cancel}
	off, err := first.Logs(ctx, 0, got, got)
	if err != nil {
		t.Fatal(err)
	}
	if off != int64(got.Len()) || off == 0 {
		t.Fatalf("first reader stopped at offset %d holding %d bytes", off, got.Len())
	}
	first = nil

	// A new engine connection, as a restarted supervisor would have.
	e2 := containertest.Engine(t)
	found, err := e2.Find(context.Background(), map[string]string{container.LabelNode: "containertest", container.LabelJob: s.Labels[container.LabelJob]})
	if err != nil || len(found) != 1 || found[0].Name != s.Name {
		t.Fatalf("Find = %v, %v; want the one container %s", found, err, s.Name)
	}
	byName, err := e2.Get(context.Background(), s.Name)
	if err != nil || byName.ID != found[0].ID {
		t.Fatalf("Get(%s) = %v, %v", s.Name, byName, err)
	}
	rest := &bytes.Buffer{}
	end, err := found[0].Logs(context.Background(), off, rest, rest)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 6; i++ {
		want.WriteString("line" + strconv.Itoa(i) + "\nerr" + strconv.Itoa(i) + "\n")
	}
	// stdout and stderr are two pipes: compare each stream's lines in order.
	all := got.String() + rest.String()
	if diff := cmp.Diff(sortedLines(want.String()), sortedLines(all)); diff != "" || len(all) != want.Len() {
		t.Errorf("output across the two readers (-want +got):\n%s\nfirst %q, rest %q", diff, got.String(), rest.String())
	}
	if end != int64(len(all)) {
		t.Errorf("end offset %d, want %d", end, len(all))
	}
	st, err := found[0].Wait(context.Background())
	if err != nil || st.ExitCode != 4 {
		t.Errorf("state %+v, %v: want exit 4", st, err)
	}
	if _, err := e2.Get(context.Background(), "berth-no-such-container-"+s.Name); !errors.Is(err, container.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
}

func sortedLines(s string) map[string]int {
	m := map[string]int{}
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			m[l]++
		}
	}
	return m
}

func TestPublishedPort(t *testing.T) {
	e := containertest.Engine(t)
	s := newSpec(t, "echo ready; echo hello | nc -l -p 8080")
	s.Ports = []container.Port{{Container: 8080, HostIP: "127.0.0.1"}}
	c := start(t, e, s)
	out, _ := follow(c)
	waitFor(t, out, "ready")
	st, err := c.Inspect(context.Background())
	if err != nil || len(st.Ports[8080]) != 1 || !strings.HasPrefix(st.Ports[8080][0], "127.0.0.1:") {
		t.Fatalf("ports %v, %v: want 8080 on 127.0.0.1", st.Ports, err)
	}
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", st.Ports[8080][0], time.Second)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
			b, _ := io.ReadAll(conn)
			conn.Close()
			if got = string(b); got != "" {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != "hello\n" {
		t.Errorf("read %q through the published port, want hello", got)
	}
}

func TestHostNetwork(t *testing.T) {
	e := containertest.Engine(t)
	s := newSpec(t, "ip -o link")
	s.HostNetwork = true
	s.Ports = []container.Port{{Container: 8080}} // ignored on the host's network
	c := start(t, e, s)
	var out bytes.Buffer
	_, _ = c.Logs(context.Background(), 0, &out, &out)
	if st, err := c.Wait(context.Background()); err != nil || st.ExitCode != 0 {
		t.Fatalf("state %+v, %v; output %q", st, err, out.String())
	}
	// Only the host's namespace has the engine's bridge.
	if !strings.Contains(out.String(), "docker0") {
		t.Errorf("links in the container %q: not the host's network", out.String())
	}
}

func TestMissingImageFailsToCreate(t *testing.T) {
	e := containertest.Engine(t)
	s := newSpec(t, "true")
	s.Image = "local/berth-no-such-image:missing"
	s.Auth = &container.Auth{Username: "u", Password: "p"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var progress bytes.Buffer
	c, err := e.Create(ctx, s, &progress)
	if err == nil {
		_ = c.Remove(context.Background())
		t.Fatal("a container was created from an image that exists nowhere")
	}
	if !strings.Contains(progress.String(), "pulling image local/berth-no-such-image:missing") {
		t.Errorf("progress %q does not say it pulls", progress.String())
	}
}

func TestDescribe(t *testing.T) {
	e := containertest.Engine(t)
	if got := container.Describe(context.Background()); got != "docker "+e.APIVersion() {
		t.Errorf("Describe = %q, want docker %s", got, e.APIVersion())
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/berth.sock")
	if got := container.Describe(context.Background()); !strings.HasPrefix(got, "none (no Docker engine at unix:///nonexistent/berth.sock") {
		t.Errorf("Describe without an engine = %q", got)
	}
}
