package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
)

func TestParseGPUMetrics(t *testing.T) {
	const mib = 1 << 20
	tests := map[string]struct {
		out     string
		want    []api.GPUSample
		wantErr bool
	}{
		"two GPUs, as nvidia-smi prints them": {
			out: "0, GPU-5c3bd1a4-8b0e-11ee-b9d1-0242ac120002, 95, 74215, 81559\n" +
				"1, GPU-6d4ce2b5-8b0e-11ee-b9d1-0242ac120002, 0, 4, 81559\n",
			want: []api.GPUSample{
				{Index: 0, UUID: "GPU-5c3bd1a4-8b0e-11ee-b9d1-0242ac120002", Util: 95, MemoryUsed: 74215 * mib, MemoryTotal: 81559 * mib},
				{Index: 1, UUID: "GPU-6d4ce2b5-8b0e-11ee-b9d1-0242ac120002", Util: 0, MemoryUsed: 4 * mib, MemoryTotal: 81559 * mib},
			},
		},
		"not supported fields read as zero; blank lines skipped": {
			out:  "\n3, GPU-x, [N/A], [Not Supported], 16384\n\n",
			want: []api.GPUSample{{Index: 3, UUID: "GPU-x", MemoryTotal: 16384 * mib}},
		},
		"nothing": {out: ""},
		"a short line": {
			out:     "0, GPU-a, 5, 1, 2\n1, GPU-b, 7\n",
			want:    []api.GPUSample{{Index: 0, UUID: "GPU-a", Util: 5, MemoryUsed: mib, MemoryTotal: 2 * mib}},
			wantErr: true,
		},
		"an error message instead of figures": {
			out:     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseGPUMetrics([]byte(tc.out))
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGPUFindings(t *testing.T) {
	f := func(level, text string) finding { return finding{level, text} }
	tests := map[string]struct {
		out     string
		expect  []int
		want    []finding
		wantErr bool
	}{
		"healthy": {
			out:    "0, GPU-a, 0, 0, 41\n1, GPU-b, 0, 0, 39\n",
			expect: []int{0, 1},
		},
		"ECC off or unsupported": {
			out:    "0, GPU-a, [N/A], [N/A], 35\n",
			expect: []int{0},
		},
		"uncorrectable ECC fails, correctable warns, hot warns": {
			out: "0, GPU-a, 2, 0, 40\n1, GPU-b, 0, 17, 40\n2, GPU-c, 0, 0, 91\n",
			want: []finding{f(api.HealthFailure, "GPU 0: 2 uncorrectable ECC errors"), f(api.HealthWarning, "GPU 1: 17 correctable ECC errors"),
				f(api.HealthWarning, "GPU 2: temperature 91°C")},
		},
		"a GPU that needs a reset": {
			out:  "0, GPU-a, [GPU requires reset], [GPU requires reset], [GPU requires reset]\n",
			want: []finding{f(api.HealthFailure, "GPU 0: GPU requires reset")},
		},
		"a GPU lost since start": {
			out:    "0, GPU-a, 0, 0, 40\n",
			expect: []int{0, 1},
			want:   []finding{f(api.HealthFailure, "GPU 1: missing (nvidia-smi lists 1 of 2)")},
		},
		"unreadable line": {
			out:     "0, GPU-a, 0\n",
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := gpuFindings([]byte(tc.out), tc.expect)
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(finding{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		found []finding
		want  api.NodeHealth
	}{
		"nothing found": {want: api.NodeHealth{Status: api.HealthOK, CheckedAt: now}},
		"warnings only": {
			found: []finding{{api.HealthWarning, "a"}, {api.HealthWarning, "b"}},
			want:  api.NodeHealth{Status: api.HealthWarning, Reason: "a; b", CheckedAt: now},
		},
		"a failure wins and is the reason": {
			found: []finding{{api.HealthWarning, "hot"}, {api.HealthFailure, "disk full"}},
			want:  api.NodeHealth{Status: api.HealthFailure, Reason: "disk full", CheckedAt: now},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, combine(tc.found, now)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCPUPercent(t *testing.T) {
	tests := []struct {
		used, wall time.Duration
		cpus       int
		want       float64
	}{
		{time.Second, time.Second, 1, 100},
		{time.Second, time.Second, 2, 50},
		{1500 * time.Millisecond, time.Second, 0, 150}, // no allocation counts as one CPU
		{time.Second, 0, 1, 0},
		{333 * time.Millisecond, time.Second, 1, 33.3},
	}
	for _, tc := range tests {
		if got := cpuPercent(tc.used, tc.wall, tc.cpus); got != tc.want {
			t.Errorf("cpuPercent(%v, %v, %d) = %v, want %v", tc.used, tc.wall, tc.cpus, got, tc.want)
		}
	}
}

// The health-check program: exit 0 passes; another status fails with its
// last line of output (else the status); a program that outlives its
// timeout is killed, with whatever it printed last.
func TestRunHealthCheck(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct {
		prog   string
		ok     bool
		reason string
	}{
		"passes":              {prog: "echo all good", ok: true},
		"fails with a line":   {prog: "echo checking; echo 'GPU 3: XID 79 (fallen off the bus)' >&2; exit 1", reason: "GPU 3: XID 79 (fallen off the bus)"},
		"fails silently":      {prog: "exit 3", reason: `health check "exit 3" failed: exit status 3`},
		"a missing program":   {prog: filepath.Join(dir, "nope"), reason: "not found"},
		"times out":           {prog: "echo stuck on NFS; sleep 30", reason: "health check timed out after 300ms: stuck on NFS"},
		"its children go too": {prog: "sleep 30 & echo started; exit 1", reason: "started"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			why, ok := runHealthCheck(context.Background(), tc.prog, 300*time.Millisecond, os.Environ())
			if ok != tc.ok || !strings.Contains(why, tc.reason) {
				t.Errorf("= %q, %v; want %v with %q", why, ok, tc.ok, tc.reason)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
