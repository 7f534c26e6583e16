package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Stats reads v1 files: cpuacct from its own hierarchy, else from the cpu
// group (cpu and cpuacct on one mount); working set = usage - inactive files.
func TestStatsV1Files(t *testing.T) {
	tests := map[string]struct {
		paths map[string]string
		files map[string]string
		want  Stats
	}{
		"cpuacct apart": {
			paths: map[string]string{"memory": "/j", "cpu": "/j", "cpuacct": "/j"},
			files: map[string]string{
				"cpuacct/j/cpuacct.usage":              "2500000000\n",
				"memory/j/memory.usage_in_bytes":       "10485760\n",
				"memory/j/memory.stat":                 "cache 0\ntotal_inactive_file 4194304\n",
				"memory/j/memory.max_usage_in_bytes":   "20971520\n",
				"memory/j/memory.limit_in_bytes":       "67108864\n",
				"cpu/j/cpu.cfs_quota_us":               "100000\n",
				"memory/j/memory.memsw.limit_in_bytes": "67108864\n",
			},
			want: Stats{CPU: 2500 * time.Millisecond, HasCPU: true, Memory: 6 << 20, Usage: 10 << 20, Peak: 20 << 20, Limit: 64 << 20, HasMemory: true},
		},
		"cpu,cpuacct together, no memory limit": {
			paths: map[string]string{"memory": "/j", "cpu": "/j"},
			files: map[string]string{
				"cpu/j/cpuacct.usage":                "1000\n",
				"memory/j/memory.usage_in_bytes":     "4096\n",
				"memory/j/memory.limit_in_bytes":     "9223372036854771712\n",
				"memory/j/memory.max_usage_in_bytes": "8192\n",
			},
			want: Stats{CPU: 1000, HasCPU: true, Memory: 4096, Usage: 4096, Peak: 8192, HasMemory: true},
		},
		"no accounting": {
			paths: map[string]string{"memory": "/j", "cpu": "/j"},
			files: map[string]string{"cpu/j/cpu.stat": "nr_periods 0\n", "memory/j/memory.usage_in_bytes": "1\n"},
			want:  Stats{Memory: 1, Usage: 1, HasMemory: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for f, data := range tc.files {
				writeFile(t, filepath.Join(root, f), data)
			}
			got, err := Spec{Version: 1, Root: root, Paths: tc.paths}.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
			// Peak alone (a job's end) reads the same figure.
			if peak, ok := (Spec{Version: 1, Root: root, Paths: tc.paths}).Peak(); peak != tc.want.Peak || ok != (tc.want.Peak != 0) {
				t.Errorf("Peak = %d, %v, want %d", peak, ok, tc.want.Peak)
			}
		})
	}
}

func TestStatsV2Files(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a/j/cpu.stat"), "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
	writeFile(t, filepath.Join(root, "a/j/memory.current"), "3000\n")
	writeFile(t, filepath.Join(root, "a/j/memory.stat"), "anon 2000\nfile 1000\ninactive_file 1000\n")
	writeFile(t, filepath.Join(root, "a/j/memory.peak"), "5000\n")
	writeFile(t, filepath.Join(root, "a/j/memory.max"), "max\n")
	got, err := Spec{Version: 2, Root: root, Paths: map[string]string{"": "/a/j"}}.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{CPU: 1500 * time.Millisecond, HasCPU: true, Memory: 2000, Usage: 3000, Peak: 5000, HasMemory: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func TestStatsMissingGroup(t *testing.T) {
	root := t.TempDir()
	for _, s := range []Spec{
		{Version: 1, Root: root, Paths: map[string]string{"memory": "/gone", "cpu": "/gone", "cpuacct": "/gone"}},
		{Version: 2, Root: root, Paths: map[string]string{"": "/gone"}},
	} {
		if _, err := s.Stats(); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("v%d: Stats of a missing group = %v, want os.ErrNotExist", s.Version, err)
		}
	}
}

// On this host: a job's group spans cpuacct, and a process burning a CPU
// in it shows as CPU time; its memory is counted.
func TestV1StatsReal(t *testing.T) {
	h := realV1(t)
	if _, ok := h.base[v1Accounting]; !ok {
		t.Skip("no cpuacct hierarchy here")
	}
	spec := h.Spec(testName(t), 64<<20, 1)
	g, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(spec) })
	cmd := exec.Command("bash", "-c", "x=$(head -c 8M /dev/zero | tr '\\0' a); while :; do :; done")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Remove(spec); _ = cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := spec.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.HasCPU && st.CPU > 200*time.Millisecond && st.Memory > 0 {
			if st.Limit != 64<<20 || st.Peak < st.Memory {
				t.Errorf("limit %d peak %d memory %d", st.Limit, st.Peak, st.Memory)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never showed the burner: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
