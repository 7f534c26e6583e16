package slurm

import (
	"testing"
	"time"
)

func multinodeNodes(alloc map[string]int) []Node {
	var out []Node
	for _, name := range []string{"n1", "n2", "n3", "n4"} {
		n := goldenNode()
		n.Name, n.RealMemoryMB = name, 5000
		if c := alloc[name]; c > 0 {
			n.State, n.CPUsAlloc = NodeAllocated, c
		}
		out = append(out, n)
	}
	return out
}

func TestSinfoGolden(t *testing.T) {
	debug := []Partition{goldenPartition()}
	multiPart := goldenPartition()
	multiPart.Nodes = "n[1-4]"
	multi := []Partition{multiPart}
	idle := []Node{goldenNode()}
	busy := goldenNode()
	busy.State, busy.CPUsAlloc = NodeAllocated, 2
	tests := []struct {
		file  string
		parts []Partition
		nodes []Node
		opts  SinfoOptions
	}{
		{"sinfo.txt", debug, idle, SinfoOptions{}},
		{"sinfo-alloc.txt", debug, []Node{busy}, SinfoOptions{}},
		{"sinfo-N-l.txt", debug, idle, SinfoOptions{Nodes: true, Long: true, Now: at("01:27:43")}},
		{"sinfo-N-l-alloc.txt", debug, []Node{busy}, SinfoOptions{Nodes: true, Long: true, Now: at("01:26:18")}},
		{"sinfo-h-N-o.txt", debug, idle, SinfoOptions{NoHeader: true, Nodes: true, Format: "%N %T %C %e %G"}},
		{"sinfo-o-custom.txt", debug, idle, SinfoOptions{Format: "%P %a %l %D %t %N %c %m %G"}},
		{"multinode/sinfo.txt", multi, multinodeNodes(nil), SinfoOptions{}},
		{"multinode/sinfo-N-l.txt", multi, multinodeNodes(nil), SinfoOptions{Nodes: true, Long: true, Now: at("01:57:23")}},
		{"multinode/sinfo-mixed.txt", multi, multinodeNodes(map[string]int{"n1": 2, "n2": 2, "n3": 2, "n4": 1}), SinfoOptions{}},
		{"multinode/sinfo-N-l-mixed.txt", multi, multinodeNodes(map[string]int{"n1": 2, "n2": 2, "n3": 2, "n4": 1}), SinfoOptions{Nodes: true, Long: true, Now: at("01:57:27")}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			g := readGolden(t, tc.file)
			out, warnings := FormatSinfo(tc.parts, tc.nodes, tc.opts)
			if len(warnings) > 0 {
				t.Fatal(warnings)
			}
			assertGolden(t, tc.file, g.stdout, out)
		})
	}
}

func TestSinfoSummarizeAndLong(t *testing.T) {
	p := goldenPartition()
	p.Nodes = "n[1-4]"
	p.MaxTime = 2 * 24 * time.Hour
	nodes := multinodeNodes(map[string]int{"n1": 2, "n4": 1})
	nodes[2].State = NodeIdle | NodeDrain
	out, _ := FormatSinfo([]Partition{p}, nodes, SinfoOptions{Summarize: true})
	want := "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST\n" +
		"debug*       up 2-00:00:00          2/1/1/4 n[1-4]\n"
	assertGolden(t, "sinfo -s", want, out)
	// Lines are ordered by Slurm's numeric node state, flags included:
	// IDLE+DRAIN sorts above MIXED.
	out, _ = FormatSinfo([]Partition{p}, nodes, SinfoOptions{Long: true, Now: at("01:00:00")})
	want = "Sun Nov 22 01:00:00 2026\n" +
		"PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST\n" +
		"debug*       up 2-00:00:00 1-infinite   no       NO        all      1     drained n3\n" +
		"debug*       up 2-00:00:00 1-infinite   no       NO        all      1       mixed n4\n" +
		"debug*       up 2-00:00:00 1-infinite   no       NO        all      1   allocated n1\n" +
		"debug*       up 2-00:00:00 1-infinite   no       NO        all      1        idle n2\n"
	assertGolden(t, "sinfo -l", want, out)
}

func TestSinfoDefaultMarkFits(t *testing.T) {
	p := goldenPartition()
	p.Name = "verylongname"
	out, _ := FormatSinfo([]Partition{p}, []Node{goldenNode()}, SinfoOptions{Format: "%.5P|%P", NoHeader: true})
	if out != "very*|verylongname*\n" {
		t.Errorf("%q", out)
	}
}
