package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
)

// TestMain lets the test binary act as `berth shim DIR`, so the shim tests
// run the real supervisor as a real process.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "berth-shim" {
		os.Exit(RunShim(os.Args[2]))
	}
	os.Exit(m.Run())
}

func TestFramesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(100, 0)
	fw := &frameWriter{f: f, now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	_ = fw.write(1, []byte("hello\n"))
	_ = fw.write(2, []byte("oops\n"))
	_ = fw.write(1, []byte("bye\n"))
	// A frame still being written (header only) is not returned.
	if _, err := f.Write([]byte{1, 0, 0, 0, 0, 0, 0, 9}); err != nil {
		t.Fatal(err)
	}
	frames, next, err := ReadFrames(f, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fr := range frames {
		got = append(got, fr.Stream+":"+string(fr.Data))
	}
	if diff := cmp.Diff([]string{"stdout:hello\n", "stderr:oops\n", "stdout:bye\n"}, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
	if want := int64(3*frameHeader + 6 + 5 + 4); next != want {
		t.Errorf("next = %d, want %d", next, want)
	}
	// Reading from the middle gives the rest; a small budget stops early.
	rest, _, err := ReadFrames(f, frames[1].Offset, 1)
	if err != nil || len(rest) != 1 || string(rest[0].Data) != "oops\n" {
		t.Errorf("ReadFrames(mid, budget 1) = %v, %v", rest, err)
	}
	if !frames[0].Time.Equal(time.Unix(101, 0)) {
		t.Errorf("time = %v", frames[0].Time)
	}
}

func TestReadFramesCorrupt(t *testing.T) {
	if _, _, err := ReadFrames(bytes.NewReader(bytes.Repeat([]byte{7}, 40)), 0, 100); err == nil {
		t.Fatal("a corrupt frame was read without error")
	}
}

func TestParseGPUs(t *testing.T) {
	parse := func(s string) (int64, error) {
		v := strings.TrimSuffix(s, "GB")
		var n int64
		for _, r := range v {
			n = n*10 + int64(r-'0')
		}
		return n << 30, nil
	}
	got, err := ParseGPUs("A100:80GB:2,amd:MI300X:1", parse)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.GPU{
		{Index: 0, Vendor: "nvidia", Name: "A100", Memory: 80 << 30},
		{Index: 1, Vendor: "nvidia", Name: "A100", Memory: 80 << 30},
		{Index: 2, Vendor: "amd", Name: "MI300X"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseGPUs (-want +got):\n%s", diff)
	}
	if got, _ := ParseGPUs("3", parse); len(got) != 3 {
		t.Errorf("ParseGPUs(3) gave %d GPUs", len(got))
	}
	if _, err := ParseGPUs("A100::2", parse); err == nil {
		t.Error("an empty part was accepted")
	}
}

func TestParseNvidiaSMI(t *testing.T) {
	out := []byte("0, GPU-aaa, NVIDIA H100 80GB HBM3, 81559\n1, GPU-bbb, NVIDIA H100 80GB HBM3, 81559\n")
	got, err := parseNvidiaSMI(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.GPU{
		{Index: 0, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", Memory: 81559 << 20, UUID: "GPU-aaa"},
		{Index: 1, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", Memory: 81559 << 20, UUID: "GPU-bbb"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseNvidiaSMI (-want +got):\n%s", diff)
	}
	if _, err := parseNvidiaSMI([]byte("0, x\n")); err == nil {
		t.Error("a short line was accepted")
	}
}

func TestScript(t *testing.T) {
	if got := script([]string{"echo a", "echo b\n"}); got != "set -e\necho a\necho b\n" {
		t.Errorf("script = %q", got)
	}
}

func TestJobEnvHidesAgentSecrets(t *testing.T) {
	t.Setenv("BERTH_TOKEN", "secret")
	env := jobEnv(api.Assignment{Env: []string{"A=1"}})
	for _, kv := range env {
		if strings.HasPrefix(kv, "BERTH_TOKEN=") {
			t.Fatal("the agent's token leaked into a job's environment")
		}
	}
	if env[len(env)-1] != "A=1" {
		t.Errorf("the job's own env must come last (it wins): %v", env[len(env)-3:])
	}
}

// shimRun runs the real shim on a job directory and returns its exit report
// and output.
func shimRun(t *testing.T, sp shimSpec, signal func(pid int)) (shimExit, string) {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(sp)
	if err := os.WriteFile(filepath.Join(dir, fileSpec), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := execShim(dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if signal != nil {
		// A signal before the shim catches them would be lost (the agent
		// leaves a note for that case): wait until it has made the job's
		// output, which it does once it catches them, however slow its
		// start (-race, a loaded machine).
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, fileOutput)); err == nil {
				break
			}
		}
		signal(cmd.Process.Pid)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shim: %v", err)
	}
	var ex shimExit
	if err := readJSON(filepath.Join(dir, fileExit), &ex); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, fileOutput))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	frames, _, err := ReadFrames(f, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	// The output, with a stream's name before each change of stream.
	var out strings.Builder
	last := ""
	for _, fr := range frames {
		if fr.Stream != last {
			out.WriteString("[" + fr.Stream + "]")
			last = fr.Stream
		}
		out.Write(fr.Data)
	}
	return ex, out.String()
}

// A job that ended before its start was reported is reported with both, and
// its start is the shim's record of it, not the time of the report.
func TestCollectShortJob(t *testing.T) {
	a, err := New(Config{Server: "http://127.0.0.1:1", Name: "n", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	ended := began.Add(300 * time.Millisecond)
	a.jobs[7] = &localJob{id: 7, synced: true, started: began.Add(-time.Millisecond),
		exit: &shimExit{ExitCode: 0, StartedAt: began, FinishedAt: ended}}
	a.jobs[8] = &localJob{id: 8, synced: true, started: began,
		exit: &shimExit{Reason: exitStopped, FinishedAt: ended}} // never started
	evs, more := a.collect()
	type ev struct {
		Job          int64
		Type         string
		Time         time.Time
		NeverStarted bool
	}
	var got []ev
	for _, e := range evs {
		got = append(got, ev{e.JobID, e.Type, e.Time, e.NeverStarted})
	}
	want := []ev{{7, "started", began, false}, {7, "exited", ended, false}, {8, "exited", ended, true}}
	if diff := cmp.Diff(want, got); diff != "" || more {
		t.Errorf("events (-want +got):\n%s (more %v)", diff, more)
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// The agent tells the time by its injected clock: a health check is dated
// by it, in UTC.
func TestAgentClock(t *testing.T) {
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 3600))
	a, err := New(Config{Server: "http://127.0.0.1:1", Name: "n", DataDir: t.TempDir(), NoCgroups: true, Clock: fixedClock(at)})
	if err != nil {
		t.Fatal(err)
	}
	h := a.checkHealth(context.Background(), time.Second)
	if !h.CheckedAt.Equal(at) || h.CheckedAt.Location() != time.UTC {
		t.Errorf("health checked at %v, want %v in UTC", h.CheckedAt, at)
	}
}
